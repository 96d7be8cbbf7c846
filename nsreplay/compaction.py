"""Compaction: merge the small files of the published route history and of the ledgers, never changing a row.

Every window a replay publishes adds a few files to each gold history table per NameServer (a
scheduled deployment: hundreds a window, hundreds of thousands in a few months). Each file costs a
reader an open and each costs the Delta log an entry, so reads of a long history and the log of
every table grow with the number of windows rather than with the rows. :func:`compact_warehouse`
merges them, table by table:

* **Only settled rows.** A file is merged when every row in it is in the published coverage of its
  NameServer: its time column (:data:`HISTORY_TABLES`: ``ts``, ``tick_ts``, ``keyframe_ts``, or
  ``valid_to`` for the interval tables) has no NULL (an interval still open) and is at most the
  ``to_ts`` of the latest publish. The next window's write replaces the rows after that instant and
  the open intervals, so it never has to rewrite a merged file. A re-run of an old window (a
  backfill) still can: it rewrites the merged file of its day.
* **Tight in time.** Files are grouped by NameServer and by the span (``[compact] span_hours``, a
  UTC day by default) holding the maximum of their time column, at most ``target_file_mb`` a group,
  and each group is written as one file sorted by that column, in row groups of ``row_group_rows``
  rows: the statistics that let a reader of one instant skip the other files and row groups stay as
  tight as a day. Keyframes are sorted by key first (:data:`SORT_ORDER`), which keeps their file
  small.
* **Only what the latest publish names.** A table that a run wrote since the latest publish (not
  yet published, or failed) is left alone and reported: the next replay may put the published
  version back over it.
* **No row changes.** One commit per table; it says ``dataChange`` false, its mode is ``compact``,
  and the replay and publish stages do not take it for another run's writes. Readers of the
  published version (the shim, ``PublishedHistory``, SQL) keep reading its files, which a vacuum
  keeps (``nsreplay vacuum``); the next publish names the compacted version.

* **The daily tables too.** ``silver.events`` and ``bronze.captures_raw`` are partitioned by UTC
  day (:data:`DATED_TABLES`) and every ingest adds files to the day it reads; the replay reads them
  by their ``ts`` statistics, an analyst or a replay from the first record reads them all.
  :func:`compact_dated` merges the files of each partition of a day before ``today`` (the day a
  scheduled ingest still writes to is left alone) into files of at most ``target_file_mb``, sorted
  (events by ``ts``: the statistics stay tight), largest first. A late file that adds rows to an
  older day adds a file there, which the next compaction merges again.
* **The ledgers too.** The append-only tables that every ingest or replay reads whole
  (:data:`LEDGER_TABLES`: the files each ingest read, the run logs, the publish log, and the
  register bodies stored once by content) gain a few files a run: an hourly deployment's replay
  would open tens of thousands of ``silver.topic_configs`` files after a year, and a backfill as
  many ``gold.publish_log`` files. :func:`compact_ledgers` merges every
  file below ``ledger_file_mb`` (8 MB: their rows decompress to ~50 times that), largest first,
  into files of at most that size, so each table keeps a file per few weeks of bodies plus the
  day's new ones. Every committed row of them is final (an ingest's discard of an abandoned run
  deletes by run id, from merged files as from any), so no publish is waited for.

    results = compact_warehouse(Warehouse(root, None, "delta-rs"), Policy.from_config(settings.compact),
                                dry_run=True, run_id="compact-20261126T230000Z")
    results += compact_dated(Warehouse(root, None, "delta-rs"), Policy.from_config(settings.compact), today="2026-11-26",
                             dry_run=True, run_id="compact-20261126T230000Z")
    results += compact_ledgers(Warehouse(root, None, "delta-rs"), LedgerPolicy.from_config(settings.compact),
                               dry_run=True, run_id="compact-20261126T230000Z")
    print(render(results, dry_run=True))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from nsreplay.history import latest_publish_row
from nsreplay.runtime import format_size
from nsreplay.storage import CommitInfo, CompactionResult, DataFile, FileStatistics, StorageError, TableSpec, Warehouse
from schemas.bronze import CAPTURE_BODIES, CAPTURES_RAW, INGEST_FILES
from schemas.gold import INTERVAL_TABLES, KEYFRAMES, PUBLISH_LOG, REPLAY_RUNS, ROUTE_CHANGES, ROUTE_FIDELITY, SCAN_TICKS, STALE_WINDOWS
from schemas.silver import EVENTS, INGEST_RUNS, QUALITY_RESULTS, QUARANTINE, TOPIC_CONFIGS

if TYPE_CHECKING:  # pragma: no cover
    from nsreplay.config import CompactConfig

__all__ = [
    "JOB", "HISTORY_TABLES", "DATED_TABLES", "LEDGER_TABLES", "SORT_ORDER", "Policy", "LedgerPolicy", "TableCompaction", "plan_groups",
    "plan_dated_groups", "plan_ledger_groups", "compact_warehouse", "compact_dated", "compact_ledgers", "render",
]

#: The job name of a compaction's commits.
JOB = "compact"

#: The tables compacted, each with the integer column by which a window owns its rows (as
#: ``pipelines.replay.run.owned_rows`` slices them): a row is settled once that column is at most the
#: published coverage. Merged files are sorted by it (unless :data:`SORT_ORDER` says otherwise).
HISTORY_TABLES: tuple[tuple[TableSpec, str], ...] = (
    (ROUTE_CHANGES, "ts"),
    (SCAN_TICKS, "tick_ts"),
    (KEYFRAMES, "keyframe_ts"),
    (ROUTE_FIDELITY, "ts"),
    *((spec, "valid_to") for spec in INTERVAL_TABLES.values()),
)

#: Tables whose merged files are sorted otherwise than by their time column alone. A keyframe
#: repeats every row of the tables at each keyframe instant, mostly unchanged: sorted by key, the
#: repeats sit together and the file is ~10 times smaller than sorted by instant (bench-day's
#: keyframes: 495.2 KB against 5.2 MB in row groups of 8,192 rows, docs/performance.md), and a day's keyframes are read
#: whole anyway (a keyframe is every key of one instant).
SORT_ORDER: Mapping[str, tuple[str, ...]] = {KEYFRAMES.name: ("table", "key", "keyframe_ts")}

#: The tables partitioned by UTC day that every ingest appends to, each with its day column and the
#: columns its merged files are sorted by.
DATED_TABLES: tuple[tuple[TableSpec, str, tuple[str, ...]], ...] = (
    (EVENTS, "event_date", ("ts", "record_id")),
    (CAPTURES_RAW, "ingest_date", ("source_file", "line_no")),
)

#: The append-only tables read whole by every ingest (the files already read, the finished runs,
#: the bodies already stored) or replay (the decoded bodies), and the run logs that gain a file
#: per run (the publish log, which every backfill, ``nsreplay stale`` and an ingest's check for
#: stale windows read; the replay runs, the quality results, the quarantined lines and the stale
#: windows), each with the columns its merged files are sorted by. The bodies are sorted by size,
#: which puts each broker's bodies (near repeats of one another) together: bench-day's, merged,
#: 1.75 MB sorted by their content id and 1.06 MB by size; the topic configs 363 KB and 280 KB.
#: The publish log is sorted by ``published_ms``, so the file and row group that hold the latest
#: publish are still the only ones a reader of it opens (``nsreplay.history.newest_publish``).
LEDGER_TABLES: tuple[tuple[TableSpec, tuple[str, ...]], ...] = (
    (INGEST_FILES, ("mtime_ms", "source_file")),
    (INGEST_RUNS, ("started_ms",)),
    (CAPTURE_BODIES, ("body_text_bytes", "body_ref")),
    (TOPIC_CONFIGS, ("topic_count", "body_bytes", "body_id")),
    (PUBLISH_LOG, ("published_ms", "run_id")),
    (REPLAY_RUNS, ("written_ms", "run_id")),
    (QUALITY_RESULTS, ("run_id", "suite", "expectation")),
    (QUARANTINE, ("run_id", "source_file", "line_no")),
    (STALE_WINDOWS, ("detected_ms", "namesrv", "window_to")),
)

_HOUR_MS = 3_600_000


@dataclass(frozen=True)
class Policy:
    """How files are merged: groups of at most ``target_bytes``, of files whose time column ends in
    the same ``span_ms`` (UTC-aligned), each written in row groups of at most ``row_group_rows``."""

    target_bytes: int
    span_ms: int
    row_group_rows: int

    def __post_init__(self) -> None:
        for name in ("target_bytes", "span_ms", "row_group_rows"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"Policy.{name} must be a positive int, got {value!r}")

    @classmethod
    def from_config(cls, config: "CompactConfig") -> "Policy":
        return cls(config.target_file_mb << 20, config.span_hours * _HOUR_MS, config.row_group_rows)


@dataclass(frozen=True)
class LedgerPolicy:
    """How the ledgers' files are merged: groups of files each below ``target_bytes``, at most
    ``target_bytes`` a group, each written in row groups of at most ``row_group_rows`` rows."""

    target_bytes: int
    row_group_rows: int

    def __post_init__(self) -> None:
        for name in ("target_bytes", "row_group_rows"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"LedgerPolicy.{name} must be a positive int, got {value!r}")

    @classmethod
    def from_config(cls, config: "CompactConfig") -> "LedgerPolicy":
        return cls(config.ledger_file_mb << 20, config.ledger_row_group_rows)


@dataclass(frozen=True)
class TableCompaction:
    """The outcome for one table: how many data files it had, what was (or would be) merged, or
    why it was left alone (``skipped``), or why it failed (``error``)."""

    table: str
    files: int | None
    result: CompactionResult | None
    skipped: str | None = None
    error: str | None = None


def plan_groups(
    files: Sequence[FileStatistics], column: str, settled: Mapping[str, int], policy: Policy
) -> list[tuple[DataFile, ...]]:
    """The groups of ``files`` to merge, each into one file (see the module docstring).

    ``files``: a table version's files with the statistics of ``column``; ``settled``: for each
    NameServer (the ``namesrv`` partition), the last instant whose rows are settled. A file is a
    candidate when its statistics say ``column`` has no NULL and ends at or before its NameServer's
    settled instant, and it is smaller than the target. Candidates are grouped by NameServer and by
    the span holding their maximum, taken in order of their range, and cut at the target size; a
    group of one file is no group. Pure: the same files give the same groups.
    """
    buckets: dict[tuple[str, int], list[FileStatistics]] = {}
    for f in files:
        namesrv = f.file.partition_values.get("namesrv")
        nulls, low, high = f.columns.get(column, (None, None, None))
        if namesrv is None or namesrv not in settled or nulls != 0 or low is None or high is None:
            continue
        if high > settled[namesrv] or f.file.size >= policy.target_bytes:
            continue
        buckets.setdefault((namesrv, high // policy.span_ms), []).append(f)
    groups: list[tuple[DataFile, ...]] = []
    for key in sorted(buckets):
        current: list[DataFile] = []
        size = 0
        for f in sorted(buckets[key], key=lambda f: (f.columns[column][1], f.columns[column][2], f.file.path)):
            if current and size + f.file.size > policy.target_bytes:
                if len(current) > 1:
                    groups.append(tuple(current))
                current, size = [], 0
            current.append(f.file)
            size += f.file.size
        if len(current) > 1:
            groups.append(tuple(current))
    return groups


def plan_ledger_groups(files: Sequence[DataFile], policy: LedgerPolicy) -> list[tuple[DataFile, ...]]:
    """The groups of a ledger's ``files`` to merge, each into one file: the files below the target,
    per partition, largest first (so the file merged the day before grows until it reaches the
    target), each into the first group it fits in without taking it over the target; a group of one
    file is no group. Pure.

    >>> f = lambda name, size: DataFile(name, size, {}, 1)
    >>> [[x.path for x in g] for g in plan_ledger_groups([f("a", 5), f("b", 60), f("c", 50), f("d", 1), f("e", 200)], LedgerPolicy(100, 10))]
    [['b', 'a', 'd']]
    """
    return _packed(files, policy.target_bytes)


def plan_dated_groups(files: Sequence[DataFile], day_column: str, today: str, policy: Policy) -> list[tuple[DataFile, ...]]:
    """The groups of a daily table's ``files`` to merge: those of the partitions whose ``day_column``
    (``YYYY-MM-DD``) is before ``today``, packed as :func:`plan_ledger_groups` packs, at most
    ``policy.target_bytes`` a group. Pure.

    >>> f = lambda name, day, size: DataFile(name, size, {"namesrv": "ns", "event_date": day}, 1)
    >>> files = [f("a", "2024-11-20", 5), f("b", "2024-11-20", 7), f("c", "2024-11-21", 5), f("d", "2024-11-21", 5)]
    >>> [[x.path for x in g] for g in plan_dated_groups(files, "event_date", "2024-11-21", Policy(100, 1, 10))]
    [['b', 'a']]
    """
    return _packed([f for f in files if (f.partition_values.get(day_column) or today) < today], policy.target_bytes)


def _packed(files: Sequence[DataFile], target: int) -> list[tuple[DataFile, ...]]:
    """``files`` below ``target`` packed per partition, largest first, each into the first group it
    fits in without taking it over ``target``; the groups of two files or more."""
    buckets: dict[tuple[tuple[str, str | None], ...], list[DataFile]] = {}
    for f in files:
        if f.size < target:
            buckets.setdefault(tuple(sorted(f.partition_values.items())), []).append(f)
    groups: list[tuple[DataFile, ...]] = []
    for key in sorted(buckets, key=repr):
        bins: list[list[DataFile]] = []
        sizes: list[int] = []
        for f in sorted(buckets[key], key=lambda f: (-f.size, f.path)):
            fits = next((i for i, size in enumerate(sizes) if size + f.size <= target), None)
            if fits is None:
                bins.append([f])
                sizes.append(f.size)
            else:
                bins[fits].append(f)
                sizes[fits] += f.size
        groups += [tuple(members) for members in bins if len(members) > 1]
    return groups


def compact_dated(
    warehouse: Warehouse, policy: Policy, *, today: str, dry_run: bool, run_id: str,
    tables: Sequence[tuple[TableSpec, str, tuple[str, ...]]] = DATED_TABLES,
) -> list[TableCompaction]:
    """Compact the daily ``tables`` of ``warehouse`` (module docstring): the partitions of the days
    before ``today`` (``YYYY-MM-DD``, UTC). One :class:`TableCompaction` each, in order; a table not
    created yet is skipped, one that fails is reported and the others go on."""
    return _compact_each(
        warehouse, [(spec, order) for spec, _, order in tables], policy.row_group_rows, dry_run=dry_run, run_id=run_id,
        plan={spec.name: (lambda files, day=day: plan_dated_groups(files, day, today, policy)) for spec, day, _ in tables},
    )


def compact_ledgers(
    warehouse: Warehouse, policy: LedgerPolicy, *, dry_run: bool, run_id: str,
    tables: Sequence[tuple[TableSpec, tuple[str, ...]]] = LEDGER_TABLES,
) -> list[TableCompaction]:
    """Compact the ledger ``tables`` of ``warehouse`` (module docstring), one :class:`TableCompaction`
    each, in order; a table that does not exist yet is skipped, one that fails is reported and the
    others go on."""
    return _compact_each(
        warehouse, tables, policy.row_group_rows, dry_run=dry_run, run_id=run_id,
        plan={spec.name: (lambda files: plan_ledger_groups(files, policy)) for spec, _ in tables},
    )


def _compact_each(
    warehouse: Warehouse, tables: Sequence[tuple[TableSpec, tuple[str, ...]]], row_group_rows: int, *, dry_run: bool, run_id: str,
    plan: Mapping[str, Callable[[list[DataFile]], list[tuple[DataFile, ...]]]],
) -> list[TableCompaction]:
    """Each of ``tables`` (spec, sort order) compacted as ``plan[name]`` groups its latest files."""
    commit = CommitInfo(run_id=run_id, job=JOB)
    outcomes = []
    for spec, order in tables:
        if not warehouse.exists(spec):
            outcomes.append(TableCompaction(spec.name, None, None, skipped="not created yet"))
            continue
        try:
            files = warehouse.files(spec)
            result = warehouse.compact(spec, plan[spec.name](files), sort_by=order, commit=commit, row_group_rows=row_group_rows, dry_run=dry_run)
        except StorageError as exc:
            outcomes.append(TableCompaction(spec.name, None, None, error=f"{type(exc).__name__}: {exc}"))
            continue
        outcomes.append(TableCompaction(spec.name, len(files), result))
    return outcomes


def compact_warehouse(
    warehouse: Warehouse, policy: Policy, *, dry_run: bool, run_id: str,
    tables: Sequence[tuple[TableSpec, str]] = HISTORY_TABLES,
) -> list[TableCompaction]:
    """Compact ``tables`` of ``warehouse`` (see the module docstring), one :class:`TableCompaction`
    each, in order. A table that fails (storage unreachable, a concurrent commit) is reported and the
    others go on. Nothing is compacted before a first publish."""
    publish = latest_publish_row(warehouse)
    if publish is None:
        return [TableCompaction(spec.name, None, None, skipped="nothing published yet") for spec, _ in tables]
    settled = {c["namesrv"]: c["to_ts"] for c in publish["namesrvs"]}
    versions = dict(publish["table_versions"])
    commit = CommitInfo(run_id=run_id, job=JOB)
    outcomes = []
    for spec, column in tables:
        version = versions.get(spec.name)
        if version is None or not warehouse.exists(spec):
            outcomes.append(TableCompaction(spec.name, None, None, skipped="not in the latest publish"))
            continue
        try:
            pending = warehouse.row_commits_since(spec, version)
            if pending:
                outcomes.append(TableCompaction(
                    spec.name, None, None,
                    skipped=f"run {pending[-1]['run_id']!r} wrote it after the latest publish: compact once a run publishes",
                ))
                continue
            files = warehouse.file_statistics(spec, (column,))
            groups = plan_groups(files, column, settled, policy)
            result = warehouse.compact(
                spec, groups, sort_by=SORT_ORDER.get(spec.name, (column,)), commit=commit, row_group_rows=policy.row_group_rows, dry_run=dry_run
            )
        except StorageError as exc:
            outcomes.append(TableCompaction(spec.name, None, None, error=f"{type(exc).__name__}: {exc}"))
            continue
        outcomes.append(TableCompaction(spec.name, len(files), result))
    return outcomes


def render(results: Sequence[TableCompaction], *, dry_run: bool) -> str:
    """A report of ``results``: one line per table (files before and after, bytes merged and
    written), then the totals."""
    verb = "would merge" if dry_run else "merged"
    lines = [f"{'table':<30} {'files':>7} {'after':>7} {'merged':>7} {'size':>10} {'written':>10}"]
    merged_total = written_total = 0
    for r in results:
        if r.error is not None:
            lines.append(f"{r.table:<30} {'failed':>7}  {r.error}")
        elif r.result is None:
            lines.append(f"{r.table:<30} {'-':>7}  ({r.skipped})")
        else:
            merged = sum(len(g) for g in r.result.removed)
            after = r.files - merged + (len(r.result.removed) if dry_run else len(r.result.added))
            written = "-" if dry_run else format_size(r.result.bytes_after)
            lines.append(f"{r.table:<30} {r.files:>7} {after:>7} {merged:>7} {format_size(r.result.bytes_before):>10} {written:>10}")
            merged_total += merged
            written_total += len(r.result.removed) if dry_run else len(r.result.added)
    failed = [r.table for r in results if r.error is not None]
    into = "files" if dry_run else "files written"
    lines.append(f"{verb} {merged_total} files into {written_total} {into}" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return "\n".join(lines)
