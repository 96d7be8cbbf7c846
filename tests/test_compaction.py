"""``nsreplay compact``: the small files of the settled history and of the ledgers become a few
sorted files, and no reader sees a difference: every gold table and every ledger (whole, through
Spark), every answer of the published history, the next window's replay and publish, and the next
ingest's skipping of the files it read before are what they are without it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from chispa import assert_df_equality

from nsreplay.compaction import (
    DATED_TABLES, HISTORY_TABLES, JOB, LEDGER_TABLES, LedgerPolicy, Policy, compact_dated, compact_ledgers, compact_warehouse, plan_dated_groups, plan_groups,
    plan_ledger_groups,
)
from nsreplay.config import load_settings
from nsreplay.history import PublishedHistory, latest_publish_row
from nsreplay.storage import COMPACTION_MODE, CommitInfo, ConcurrentCommitError, DataFile, FileStatistics, Warehouse
from pipelines.ingest.run import run_ingest
from pipelines.replay.run import latest_publish, owned_rows, replay_window, run_backfill, run_replay
from pipelines.replay.windows import Window
from published import plain
from schemas.bronze import CAPTURE_BODIES, INGEST_FILES
from schemas.gold import BROKER_LIVE_INTERVALS, PUBLISH_LOG, REPLAY_RUNS, REPLAY_TABLES, ROUTE_CHANGES, STALE_WINDOWS
from schemas.silver import EVENTS, QUALITY_RESULTS, TOPIC_CONFIGS

ROOT = Path(__file__).resolve().parents[1]
POLICY = Policy(target_bytes=128 << 20, span_ms=24 * 3_600_000, row_group_rows=1_000)
LEDGER_POLICY = LedgerPolicy(target_bytes=8 << 20, row_group_rows=100)


# -- planning (pure) -----------------------------------------------------------------------------


def stats(name: str, namesrv: str | None, nulls: int | None, low: int | None, high: int | None, size: int = 100) -> FileStatistics:
    return FileStatistics(DataFile(f"/t/{name}", size, {"namesrv": namesrv}, 10), {"ts": (nulls, low, high)})


def names(groups) -> list[list[str]]:
    return [[os.path.basename(f.path) for f in g] for g in groups]


def test_only_files_whose_rows_are_all_settled_are_merged() -> None:
    day = POLICY.span_ms
    files = [
        stats("a", "ns1", 0, 10, 20),
        stats("b", "ns1", 0, 21, 30),
        stats("open", "ns1", 2, 25, 40),  # an interval still open (NULL): the next window rewrites it
        stats("later", "ns1", 0, 31, 51),  # ends after the publish's coverage of ns1 (50)
        stats("nostats", "ns1", None, None, None),
        stats("big", "ns1", 0, 5, 9, size=POLICY.target_bytes),
        stats("other-ns", "ns3", 0, 1, 2),  # a NameServer the publish does not cover
        stats("c", "ns2", 0, 1, 2),
        stats("d", "ns2", 0, 3, 4),
        stats("e", "ns2", 0, day + 1, day + 2),  # the next day: a group of its own, of one file
    ]
    groups = plan_groups(files, "ts", {"ns1": 50, "ns2": day + 2}, POLICY)
    assert names(groups) == [["a", "b"], ["c", "d"]]


def test_groups_are_cut_at_the_target_size_in_order_of_their_range() -> None:
    policy = Policy(target_bytes=250, span_ms=POLICY.span_ms, row_group_rows=10)
    files = [stats(n, "ns", 0, lo, lo + 1) for n, lo in (("f3", 30), ("f1", 10), ("f4", 40), ("f2", 20), ("f5", 50))]
    assert names(plan_groups(files, "ts", {"ns": 100}, policy)) == [["f1", "f2"], ["f3", "f4"]]  # f5 alone: no group


def test_every_compacted_table_settles_by_the_column_its_windows_own_rows_by() -> None:
    owned = owned_rows(Window(after=1_000, until=2_000, latest=False))
    assert {spec.name: column for spec, column in HISTORY_TABLES} == {
        name: r.column for name, r in owned.items() if r is not None and name in {s.name for s, _ in HISTORY_TABLES}
    }
    assert {spec.name for spec, _ in HISTORY_TABLES} == {s.name for s in REPLAY_TABLES if owned[s.name] is not None and s.name != "gold.replay_state"}


# -- on a warehouse of several published windows ---------------------------------------------------


def copy(root: str, target: Path, spark) -> Warehouse:
    shutil.copytree(root, target)
    return Warehouse(str(target), spark, "delta-rs")


def answers(root: str) -> dict:
    """The published history's snapshots and routes at eight instants of each NameServer."""
    history = PublishedHistory(root)
    out = {}
    for cov in history.coverage():
        for t in range(cov.from_ts, cov.to_ts + 1, max(1, (cov.to_ts - cov.from_ts) // 7)):
            snap = history.snapshot_at(cov.namesrv, t)
            out[cov.namesrv, t] = snap
            for topic in sorted(snap.topicQueueTable):
                out[cov.namesrv, t, topic] = history.route_at(cov.namesrv, topic, t)
    return out


def assert_same_tables(expected: Warehouse, actual: Warehouse) -> None:
    for spec in REPLAY_TABLES:
        assert_df_equality(plain(expected.read(spec)), plain(actual.read(spec)), ignore_row_order=True, ignore_nullable=True)


def compacted_spec(name: str):
    return next(spec for spec, _ in HISTORY_TABLES if spec.name == name)


def test_compaction_changes_no_row_and_the_next_window_builds_on_it(windowed, spark, tmp_path) -> None:
    root, ends = windowed
    plain_wh = copy(root, tmp_path / "plain", spark)
    compacted = copy(root, tmp_path / "compacted", spark)
    files_before = {spec.name: len(compacted.files(spec)) for spec, _ in HISTORY_TABLES}

    results = {r.table: r for r in compact_warehouse(compacted, POLICY, dry_run=False, run_id="compact-1")}

    assert all(r.error is None and r.skipped is None for r in results.values()), results
    merged = {name: sum(len(g) for g in r.result.removed) for name, r in results.items()}
    # three windows' files of the route changes and the ticks are settled, per NameServer: one file each
    for spec in (ROUTE_CHANGES, BROKER_LIVE_INTERVALS):
        assert merged[spec.name] > 0 and len(compacted.files(spec)) < files_before[spec.name]
    for name, r in results.items():
        assert len(compacted.files(compacted_spec(name))) == files_before[name] - merged[name] + len(r.result.added)
        if r.result.removed:
            entry = compacted.history(name, limit=1)[0]
            assert (entry["mode"], entry["job"], entry["run_id"]) == (COMPACTION_MODE, JOB, "compact-1")
    assert_same_tables(plain_wh, compacted)

    again = compact_warehouse(compacted, POLICY, dry_run=False, run_id="compact-2")
    assert [r.result.removed for r in again] == [()] * len(HISTORY_TABLES)  # nothing left to merge

    # The ledgers: each of their small files merged, the same rows (the next window reads the merged bodies).
    ledger_files = {spec.name: len(compacted.files(spec)) for spec, _ in LEDGER_TABLES if compacted.exists(spec)}
    # or this proves nothing: the topic configs and the run logs of the three windows have several files
    assert all(ledger_files[spec.name] > 1 for spec in (TOPIC_CONFIGS, PUBLISH_LOG, REPLAY_RUNS, QUALITY_RESULTS)), ledger_files
    ledgers = {r.table: r for r in compact_ledgers(compacted, LEDGER_POLICY, dry_run=False, run_id="compact-1")}
    assert [spec.name for spec, _ in LEDGER_TABLES if ledgers[spec.name].skipped == "not created yet"] == [STALE_WINDOWS.name]  # no late input here
    for spec, order in ((spec, order) for spec, order in LEDGER_TABLES if spec.name in ledger_files):
        r = ledgers[spec.name]
        assert r.error is None and r.skipped is None, r
        assert len(compacted.files(spec)) == (1 if ledger_files[spec.name] > 1 else ledger_files[spec.name]), spec.name
        assert_df_equality(plain(plain_wh.read(spec)), plain(compacted.read(spec)), ignore_row_order=True, ignore_nullable=True)
        if r.result.added:
            assert compacted.history(spec, limit=1)[0]["mode"] == COMPACTION_MODE
            merged_file = pq.read_table(compacted.files(spec)[0].path, columns=list(order))
            assert merged_file.to_pylist() == sorted(merged_file.to_pylist(), key=lambda row: tuple(row[c] for c in order)), spec.name
    again = compact_ledgers(compacted, LEDGER_POLICY, dry_run=False, run_id="compact-2")
    assert [r.result.removed for r in again if r.table in ledger_files] == [()] * len(ledger_files)

    # The daily tables: every day's partition closed (today far ahead), one file each, the same rows;
    # the next window reads its records from the merged files.
    daily_files = {spec.name: len(compacted.files(spec)) for spec, _, _ in DATED_TABLES}
    daily = {r.table: r for r in compact_dated(compacted, POLICY, today="9999-12-31", dry_run=False, run_id="compact-1")}
    for spec, day, order in DATED_TABLES:
        r, files = daily[spec.name], compacted.files(spec)
        assert r.error is None and r.skipped is None and len(r.result.removed) > 0, r
        assert len(files) == len({tuple(sorted(f.partition_values.items())) for f in files}) < daily_files[spec.name], spec.name
        assert_df_equality(plain(plain_wh.read(spec)), plain(compacted.read(spec)), ignore_row_order=True, ignore_nullable=True)
    for f in compacted.files(EVENTS):
        ts = pq.read_table(f.path, columns=["ts"]).column("ts").to_pylist()
        assert ts == sorted(ts)

    # The next window: no restore over the compaction, a publish, and the same tables as without it.
    versions = {spec.name: compacted.version(spec) for spec in REPLAY_TABLES}
    for warehouse in (plain_wh, compacted):
        run_replay(spark, warehouse, load_settings(), "w3", window_from=ends[2], window_to=ends[3])
    assert latest_publish(compacted).run_id == "w3"
    for spec in REPLAY_TABLES:
        since = [e for e in compacted.history(spec) if e["version"] > versions[spec.name]]
        assert all(e["mode"] != "restore" for e in since), (spec.name, since)
    assert_same_tables(plain_wh, compacted)
    # the publish names the compacted versions: the published history now reads the merged files
    published = latest_publish(compacted).versions[ROUTE_CHANGES.name]
    merged_files = {compacted.path(ROUTE_CHANGES) + "/" + p for p in results[ROUTE_CHANGES.name].result.added}
    assert merged_files <= set(compacted.file_uris(ROUTE_CHANGES, published))
    assert answers(str(tmp_path / "compacted")) == answers(str(tmp_path / "plain"))


def test_an_ingest_after_the_ledgers_and_days_are_merged_skips_what_it_read_before(windowed, spark, tmp_path) -> None:
    """A file read before is skipped (the merged ``bronze.ingest_files``), and a copy of it under
    another name adds only duplicates (the merged ``silver.events`` and bodies)."""
    root, _ = windowed
    warehouse = copy(root, tmp_path / "ledgers", spark)
    compact_ledgers(warehouse, LEDGER_POLICY, dry_run=False, run_id="compact-1")
    compact_dated(warehouse, POLICY, today="9999-12-31", dry_run=False, run_id="compact-1")
    assert len(warehouse.files(INGEST_FILES)) == 1
    read_before = sorted({r.source_file for r in warehouse.read(INGEST_FILES).collect()})
    versions = {spec.name: warehouse.version(spec) for spec in (EVENTS, CAPTURE_BODIES, TOPIC_CONFIGS)}

    result = run_ingest(spark, warehouse, load_settings(), os.path.dirname(read_before[0]), "ingest-again")
    assert (result.files_seen, result.files_read, result.files_skipped, result.accepted) == (len(read_before), 0, len(read_before), 0)
    copied = tmp_path / "copied"
    copied.mkdir()
    shutil.copy(read_before[0], copied / ("copy-" + os.path.basename(read_before[0])))
    result = run_ingest(spark, warehouse, load_settings(), str(copied), "ingest-copy")  # the file read before: not read
    assert (result.files_read, result.files_renamed, result.lines_read, result.accepted) == (1, 1, 0, 0), result

    for spec in (EVENTS, CAPTURE_BODIES, TOPIC_CONFIGS):  # nothing added (an empty commit at most)
        assert_df_equality(plain(warehouse.read(spec, version=versions[spec.name])), plain(warehouse.read(spec)), ignore_row_order=True, ignore_nullable=True)


def test_only_the_days_before_today_are_merged() -> None:
    def f(name: str, day: str, size: int = 10) -> DataFile:
        return DataFile(name, size, {"namesrv": "ns", "event_date": day}, 1)

    files = [f("a", "2026-11-25"), f("b", "2026-11-25"), f("c", "2026-11-26"), f("d", "2026-11-26"), f("e", "2026-11-24")]
    assert names(plan_dated_groups(files, "event_date", "2026-11-26", POLICY)) == [["a", "b"]]  # 11-24 alone, 11-26 is today
    assert names(plan_dated_groups(files, "event_date", "2026-11-27", POLICY)) == [["a", "b"], ["c", "d"]]


def test_ledger_files_are_grouped_largest_first_per_partition_below_the_target() -> None:
    def f(name: str, size: int, part: str | None = None) -> DataFile:
        return DataFile(name, size, {} if part is None else {"p": part}, 1)

    policy = LedgerPolicy(target_bytes=100, row_group_rows=10)
    files = [f("a", 40), f("b", 100), f("c", 30), f("d", 35), f("e", 10, "x"), f("g", 20, "x"), f("h", 99, "y")]
    # b is at the target: left alone; a and d fill a file, c would take it over: alone; e and g share
    # their partition; h is alone in its own
    assert names(plan_ledger_groups(files, policy)) == [["g", "e"], ["a", "d"]]
    assert plan_ledger_groups([f("a", 40)], policy) == []
    with pytest.raises(ValueError, match="LedgerPolicy"):
        LedgerPolicy(0, 10)


def test_a_backfill_over_a_compacted_day_rewrites_the_same_rows(windowed, spark, tmp_path) -> None:
    root, ends = windowed
    plain_wh = copy(root, tmp_path / "plain", spark)
    compacted = copy(root, tmp_path / "compacted", spark)
    compact_warehouse(compacted, POLICY, dry_run=False, run_id="compact-1")
    merged = {f.path for f in compacted.files(ROUTE_CHANGES)}

    for warehouse in (plain_wh, compacted):  # re-run the middle window: its rows are inside the merged files
        run_backfill(spark, warehouse, load_settings(), "again", start=ends[0], end=ends[1])

    assert latest_publish(compacted).run_id == "again-0000"
    assert not merged <= {f.path for f in compacted.files(ROUTE_CHANGES)}  # the day's file was rewritten
    assert_same_tables(plain_wh, compacted)
    assert answers(str(tmp_path / "compacted")) == answers(str(tmp_path / "plain"))


def test_a_table_written_after_the_latest_publish_is_left_alone(windowed, spark, tmp_path) -> None:
    root, ends = windowed
    warehouse = copy(root, tmp_path / "pending", spark)
    replay_window(spark, warehouse, load_settings(), "w3-unpublished", window_from=ends[2], window_to=ends[3])
    versions = {spec.name: warehouse.version(spec) for spec, _ in HISTORY_TABLES}

    results = compact_warehouse(warehouse, POLICY, dry_run=False, run_id="compact-pending")

    assert all(r.result is None and "w3-unpublished" in r.skipped for r in results), results
    assert {spec.name: warehouse.version(spec) for spec, _ in HISTORY_TABLES} == versions


def test_a_group_whose_file_another_commit_replaced_commits_nothing(windowed, spark, tmp_path) -> None:
    root, _ = windowed
    warehouse = copy(root, tmp_path / "raced", spark)
    files = warehouse.files(ROUTE_CHANGES)
    namesrv = files[0].partition_values["namesrv"]
    group = [f for f in files if f.partition_values["namesrv"] == namesrv]
    warehouse.restore(ROUTE_CHANGES, 1, CommitInfo(run_id="rewind", job="test"))  # the planned files leave the table
    version = warehouse.version(ROUTE_CHANGES)

    with pytest.raises(ConcurrentCommitError, match="not in its latest version"):
        warehouse.compact(ROUTE_CHANGES, [group], sort_by="ts", commit=CommitInfo(run_id="late", job=JOB))
    assert warehouse.version(ROUTE_CHANGES) == version
    assert not (Path(warehouse.path(ROUTE_CHANGES)) / "_staging").exists()


def test_the_command_reports_a_dry_run_and_then_compacts(windowed, spark, tmp_path) -> None:
    root, _ = windowed
    warehouse = copy(root, tmp_path / "cli", spark)
    versions = {spec.name: warehouse.version(spec) for spec, _ in HISTORY_TABLES}
    files = len(warehouse.files(ROUTE_CHANGES))
    settled = {c["namesrv"]: c["to_ts"] for c in latest_publish_row(warehouse)["namesrvs"]}
    planned = plan_groups(warehouse.file_statistics(ROUTE_CHANGES, ("ts",)), "ts", settled, Policy.from_config(load_settings().compact))
    merged = sum(len(g) for g in planned)
    assert merged > 0

    def command(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "nsreplay.cli", "compact", "--warehouse", str(tmp_path / "cli"), *args],
                              cwd=ROOT, capture_output=True, text=True, timeout=300)

    dry = command("--dry-run", "--table", ROUTE_CHANGES.name)
    assert dry.returncode == 0, dry.stderr
    line = next(x for x in dry.stdout.splitlines() if x.startswith(ROUTE_CHANGES.name)).split()
    assert [int(x) for x in line[1:4]] == [files, files - merged + len(planned), merged]
    assert f"would merge {merged} files into {len(planned)} files" in dry.stdout
    assert {spec.name: warehouse.version(spec) for spec, _ in HISTORY_TABLES} == versions

    done = command()
    assert done.returncode == 0, done.stderr
    assert len(warehouse.files(ROUTE_CHANGES)) == files - merged + len(planned)
    refused = command("--table", "gold.replay_state")  # thinned (nsreplay thin-states), never merged
    assert refused.returncode == 2 and "not a compacted table" in refused.stderr
