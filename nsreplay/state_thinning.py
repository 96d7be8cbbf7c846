"""Thinning the replay states: which window ends of ``gold.replay_state`` keep their states.

Every replay run stores the complete state of each replay unit at its window's end, so that the next
window resumes from it (#3, resumable state). A scheduled deployment adds a window every hour, and
the states of every window end stay: on bench-day's volume 1.6 MB a window, ~40 MB a day, more than
the day's whole route history. A run reads only the states at its own start, so almost all of them
are never read again. :func:`thin_states` removes those no run needs by default:

* **Kept.** The latest publish's end (the next window resumes there); every window end in the last
  :attr:`Policy.keep_recent_ms` before it (the windows that late input makes stale, re-run by a
  backfill from their own start); and, before that, a checkpoint: the last window end of each
  UTC-aligned span ``(k·span, (k+1)·span]`` of :attr:`Policy.checkpoint_ms` (a day by default).
  Window ends after the latest publish's end (a run not yet published) are left alone.
* **What a removed state costs.** A run that starts at a window end whose state is gone resumes from
  the latest state kept before it and replays the range again (``run_backfill`` does so itself;
  ``jobs/rebuild_routes.py --from-last-good`` for a single window). The replay is deterministic, so
  its rows are the same; only the run is longer, by at most a checkpoint span.
* **How.** Only whole files go: each run writes the states of its one window end in files of their
  own, and a file whose ``window_to`` statistics span several ends (none is written so) is kept and
  counted. One commit, whose ``mode`` is :data:`~nsreplay.storage.spec.THINNING_MODE`: the next
  replay does not take it for another run's writes, and the versions before it (the published one
  among them) read as before until a vacuum deletes the files.
* **Only what the latest publish names.** When a run wrote ``gold.replay_state`` after the latest
  publish, nothing is removed: the next replay may put the published version back.

    result = thin_states(Warehouse(root, None, "delta-rs"), Policy.from_config(settings.thin_states),
                         dry_run=True, run_id="thin-states-20261127T040000Z")
    print(render(result))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

from nsreplay.history import latest_publish_row
from nsreplay.runtime import format_ms, format_size
from nsreplay.storage import THINNING_MODE, CommitInfo, DataFile, StorageError, Warehouse
from schemas.gold import REPLAY_STATE

if TYPE_CHECKING:  # pragma: no cover
    from nsreplay.config import ThinStatesConfig

__all__ = ["JOB", "Policy", "StateThinning", "kept_ends", "thin_states", "render"]

#: The job name of a thinning's commit.
JOB = "thin-states"

_HOUR_MS = 3_600_000


@dataclass(frozen=True)
class Policy:
    """Which window ends keep their states: every one of the last ``keep_recent_ms`` before the
    latest publish's end, and before that the last one of each UTC-aligned ``checkpoint_ms`` span."""

    keep_recent_ms: int
    checkpoint_ms: int

    def __post_init__(self) -> None:
        for name, least in (("keep_recent_ms", 0), ("checkpoint_ms", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"Policy.{name} must be an int >= {least}, got {value!r}")

    @classmethod
    def from_config(cls, config: "ThinStatesConfig") -> "Policy":
        return cls(config.keep_recent_hours * _HOUR_MS, config.checkpoint_hours * _HOUR_MS)


def kept_ends(ends: Iterable[int], latest: int, policy: Policy) -> frozenset[int]:
    """Of the window ends ``ends`` at or before ``latest`` (the latest publish's end), those whose
    states stay: ``latest``, every end after ``latest - keep_recent_ms``, and the greatest end of each
    span ``(k·checkpoint_ms, (k+1)·checkpoint_ms]``. Pure.

    >>> day = 86_400_000
    >>> sorted(kept_ends([day // 2, day, day + 5, 2 * day - 1, 3 * day], 3 * day, Policy(0, day)))
    [86400000, 172799999, 259200000]
    """
    settled = sorted({e for e in ends if e <= latest})
    kept = {e for e in settled if e > latest - policy.keep_recent_ms}
    last_of_span: dict[int, int] = {}
    for end in settled:  # ascending: the last one written wins
        last_of_span[(end - 1) // policy.checkpoint_ms] = end
    kept.update(last_of_span.values())
    if latest in settled:
        kept.add(latest)
    return frozenset(kept)


@dataclass(frozen=True)
class StateThinning:
    """The outcome: the window ends found (``ends``) and kept (``kept``), the files and bytes removed
    (or that would be, ``dry_run``), the files left because they hold several ends (``mixed``), the
    commit (``version``; ``None`` when nothing was committed), or why nothing was done (``skipped``)
    or what failed (``error``)."""

    ends: int = 0
    kept: int = 0
    files: int = 0
    removed_files: int = 0
    removed_bytes: int = 0
    mixed: int = 0
    latest: int | None = None
    version: int | None = None
    dry_run: bool = False
    skipped: str | None = None
    error: str | None = None


def thin_states(warehouse: Warehouse, policy: Policy, *, dry_run: bool, run_id: str) -> StateThinning:
    """Remove the states of ``gold.replay_state`` that ``policy`` does not keep (module docstring);
    with ``dry_run``, only count them. Spark-free: the Delta log and its statistics."""
    if not warehouse.exists(REPLAY_STATE):
        return StateThinning(dry_run=dry_run, skipped=f"{REPLAY_STATE.name} does not exist")
    publish = latest_publish_row(warehouse)
    if publish is None:
        return StateThinning(dry_run=dry_run, skipped="nothing published yet")
    version = dict(publish["table_versions"]).get(REPLAY_STATE.name)
    if version is None:
        return StateThinning(dry_run=dry_run, skipped=f"{REPLAY_STATE.name} is not in the latest publish")
    latest = max(c["to_ts"] for c in publish["namesrvs"])
    try:
        pending = warehouse.row_commits_since(REPLAY_STATE, version)
        if pending:
            return StateThinning(
                latest=latest, dry_run=dry_run,
                skipped=f"run {pending[-1]['run_id']!r} wrote it after the latest publish: thin once a run publishes",
            )
        files = warehouse.file_statistics(REPLAY_STATE, ("window_to",))
        single: dict[int, list[DataFile]] = {}  # window end -> the files holding its states and nothing else
        mixed = 0
        for f in files:
            _, low, high = f.columns.get("window_to", (None, None, None))
            if low is None or low != high:
                mixed += 1
            elif low <= latest:
                single.setdefault(low, []).append(f.file)
        keep = kept_ends(single.keys(), latest, policy)
        drop = [f for end, group in sorted(single.items()) if end not in keep for f in group]
        committed = None
        if not dry_run:
            committed = warehouse.remove_files(REPLAY_STATE, drop, mode=THINNING_MODE, commit=CommitInfo(run_id=run_id, job=JOB))
    except StorageError as exc:
        return StateThinning(latest=latest, dry_run=dry_run, error=f"{type(exc).__name__}: {exc}")
    return StateThinning(
        ends=len(single), kept=len(keep), files=len(files), removed_files=len(drop), removed_bytes=sum(f.size for f in drop),
        mixed=mixed, latest=latest, version=committed, dry_run=dry_run,
    )


def render(result: StateThinning) -> str:
    """A report of ``result`` in a few lines."""
    if result.error is not None:
        return f"{REPLAY_STATE.name}: failed: {result.error}"
    if result.skipped is not None:
        return f"{REPLAY_STATE.name}: nothing done ({result.skipped})"
    verb = "would remove" if result.dry_run else "removed"
    lines = [
        f"{REPLAY_STATE.name}: {result.ends} window ends up to the latest publish's end ({format_ms(result.latest)}), "
        f"{result.kept} kept, {result.ends - result.kept} thinned",
        f"{verb} {result.removed_files} of {result.files} files ({format_size(result.removed_bytes)})"
        + (f"; committed as version {result.version}" if result.version is not None else ""),
    ]
    if result.mixed:
        lines.append(f"{result.mixed} files hold several window ends or no statistics: kept")
    return "\n".join(lines)
