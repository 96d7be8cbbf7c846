"""Incremental windows: windows replayed one by one, each resuming from the state the previous one
persisted, give the same gold tables as one run over all of them; re-runs change nothing; late
input is detected and a backfill repairs the history; a killed run publishes nothing.

The reference for every comparison is one run over the whole capture (itself checked against the
reference model tick by tick in test_replay_vs_model). Tables are compared whole (chispa), without
the ``run_id`` bookkeeping column.
"""

from __future__ import annotations

import gzip
import os
import pickle
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from chispa import assert_df_equality
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from nsreplay import cli, runtime
from nsreplay.config import load_settings
from nsreplay.history import PublishedHistory
from nsreplay.state_thinning import Policy, thin_states
from nsreplay.runtime import format_ms
from nsreplay.storage import Warehouse
from pipelines.ingest.run import run_ingest
from nsreplay.compaction import DATED_TABLES
from nsreplay.compaction import Policy as CompactPolicy
from nsreplay.compaction import compact_dated
from pipelines.replay.run import (
    MissingPredecessorError,
    RunIdSpentError,
    check_window,
    latest_publish,
    publish_window,
    replay_window,
    run_backfill,
    run_replay,
)
from pipelines.replay.stale import late_data_note, open_stale
from published import assert_same_history, plain
from schemas.gold import PUBLISH_LOG, REPLAY_RUNS, REPLAY_STATE, REPLAY_TABLES, ROUTE_CHANGES, STALE_WINDOWS
from schemas.silver import EVENTS, QUALITY_RESULTS
from stopped_runs import Killed, killed_after_writes, killed_before_run_row, one_writer

ROOT = Path(__file__).resolve().parents[2]
HISTORY = [spec for spec in REPLAY_TABLES if spec is not REPLAY_STATE]


def replay_windows(spark, warehouse: Warehouse, cuts: list[int], prefix: str, start: int | None = None) -> None:
    after = start
    for i, cut in enumerate(cuts):
        run_replay(spark, warehouse, load_settings(), f"{prefix}-{i}", window_from=after, window_to=cut)
        after = cut


@pytest.fixture(scope="module")
def capture(tiny_published) -> Path:
    """The clean tiny capture (read-only: tests write what they derive from it elsewhere)."""
    return tiny_published[0]


@pytest.fixture(scope="module")
def ingested(spark, capture, tmp_path_factory) -> Path:
    """The root of a warehouse that ingested the capture and replayed nothing. Tests replay into their
    own copy (:func:`warehouse_copy`): ingesting once is enough, the ingest is not what they test."""
    root = tmp_path_factory.mktemp("windows-ingested") / "wh"
    run_ingest(spark, Warehouse(str(root), spark, "delta-rs"), load_settings(), str(capture), "capture-ingest")
    return root


def warehouse_copy(spark, root: Path, directory: Path) -> Warehouse:
    """A copy of the warehouse at ``root`` in ``directory``/wh (Delta tables keep relative paths, so a
    copied directory is the same warehouse)."""
    shutil.copytree(root, directory / "wh")
    return Warehouse(str(directory / "wh"), spark, "delta-rs")


@pytest.fixture(scope="module")
def full(spark, tiny_published) -> Warehouse:
    """The reference: one run over the whole capture (the shared ``tiny_published``: the same
    capture ingested as in ``ingested``, then replayed in one window). Read-only."""
    return Warehouse(tiny_published[1], spark, "delta-rs")


@pytest.fixture(scope="module")
def cuts(full) -> dict[str, int]:
    """Instants that cut through incidents of the tiny capture: a NameServer restart (its start
    record's ts), the last heartbeat before an expiry and the expiry's tick, and the end."""
    events = full.read(EVENTS)
    starts = sorted(r.ts for r in events.where(F.col("kind") == "namesrv_start").collect())
    expiries = sorted(
        r.ts for r in full.read(ROUTE_CHANGES).where((F.col("phase") == 1) & (F.col("table") == "brokerLiveTable") & (F.col("op") == "remove")).select("ts").distinct().collect()
    )
    assert len(starts) >= 2 and len(expiries) >= 2, (starts, expiries)
    end = events.agg(F.max("ts")).first()[0]
    first = events.agg(F.min("ts")).first()[0]
    return {"first": first, "restart": starts[1], "before_expiry": expiries[0] - 1, "inside_expiry": expiries[-1] - 60_000, "end": end}


@pytest.fixture(scope="module")
def irregular(spark, ingested, cuts, tmp_path_factory) -> Warehouse:
    """Windows ending exactly at a restart, one ms before an expiry tick, inside a partition's
    expiry wait, and at the end."""
    warehouse = warehouse_copy(spark, ingested, tmp_path_factory.mktemp("windows-irregular"))
    replay_windows(spark, warehouse, sorted({cuts["restart"], cuts["before_expiry"], cuts["inside_expiry"]}) + [cuts["end"]], "irregular")
    return warehouse


def test_windows_cut_through_incidents_equal_one_run(full, irregular) -> None:
    assert_same_history(full, irregular)
    published = PublishedHistory(irregular.root)
    assert published.run_id == "irregular-3"
    assert [(c.namesrv, c.to_ts) for c in published.coverage()] == [(c.namesrv, c.to_ts) for c in PublishedHistory(full.root).coverage()]


def test_the_shim_answers_a_history_of_windows_from_the_files_an_instant_needs(full, irregular, cuts) -> None:
    """The shim's index over the windows' history answers full snapshots and the broker-live table
    (read per request) like the oracle over one run, at every cut and around it, and route history
    like an index over one run. An instant's broker-live rows, and the change rows of a route
    history's instants, are read from the files whose statistics may hold them, not from every
    window's."""
    from nsreplay.serving.index import RouteIndex
    from nsreplay.serving.source import HistorySource
    from nsreplay.storage.stored_table import alive_at
    from schemas.gold import BROKER_LIVE_INTERVALS

    index, one_run, oracle = RouteIndex.load(irregular.root), RouteIndex.load(full.root), HistorySource(full.root)
    one_run_rows = PublishedHistory(full.root)
    pruned = compared = 0
    for cov in index.coverage():
        ns = cov.namesrv
        instants = sorted({cov.from_ts, cov.to_ts} | {c + d for c in cuts.values() for d in (-1, 0, 1) if cov.from_ts <= c + d <= cov.to_ts})
        for t in instants:
            assert index.snapshot(ns, t) == oracle.snapshot(ns, t), (ns, t)
            _, _, rows = index.table_rows(ns, "brokerLiveTable", t)
            want = [{k: v for k, v in r.items() if k not in ("namesrv", "run_id")} for r in one_run_rows.rows(BROKER_LIVE_INTERVALS, ns, t)]
            assert sorted(rows, key=repr) == sorted(want, key=repr), (ns, t)
            compared += len(rows)
        every = index._live.files(ns, [])
        for t in (cov.from_ts, cov.to_ts):
            opened = index._live.files(ns, alive_at(t))
            assert set(opened) <= set(every) and (opened or t == cov.from_ts), (ns, t)  # nothing is alive before the first record
            pruned += len(every) - len(opened)
        every = index._changes.files(ns, [])
        opened = index._changes.files_at(ns, "ts", [cov.from_ts, cov.to_ts])  # a route history's instants at both ends
        assert set(opened) <= set(every) and len(opened) < len(every), (ns, len(opened), len(every))
        for topic in one_run.topic_names(ns):
            assert index.route_history(ns, topic, None, None) == one_run.route_history(ns, topic, None, None), (ns, topic)
    assert pruned > 0 and compared > 0


def test_ten_minute_windows_equal_one_run(spark, ingested, full, cuts, tmp_path) -> None:
    warehouse = warehouse_copy(spark, ingested, tmp_path)
    steps = list(range(cuts["first"] + 600_000, cuts["end"], 600_000)) + [cuts["end"]]
    assert len(steps) == 2
    replay_windows(spark, warehouse, steps, "ten")
    assert_same_history(full, warehouse)


def test_a_window_reads_only_the_events_after_its_start_even_after_an_older_predecessor(spark, ingested, full, cuts, tmp_path, monkeypatch) -> None:
    """A window with a published predecessor reads silver.events from its start on only: each
    NameServer's first and last record come from the files' statistics, its start records before the
    window from the state the predecessor left (``~starts``). A predecessor written before that state
    was kept (simulated: its rows left out) costs one search of the earlier records, and the result
    is the same history."""
    import pipelines.replay.run as replay_run

    warehouse = warehouse_copy(spark, ingested, tmp_path)
    keep_all = replay_run._bookkeeping_states
    monkeypatch.setattr(replay_run, "_bookkeeping_states", lambda *a: [r for r in keep_all(*a) if r[2] != replay_run.STARTS_UNIT])
    run_replay(spark, warehouse, load_settings(), "reads-0", window_to=cuts["restart"])
    monkeypatch.setattr(replay_run, "_bookkeeping_states", keep_all)
    read = Warehouse.read
    reads: list = []

    def spy(self, spec, **kwargs):
        if spec is EVENTS:
            reads[-1].append(kwargs.get("where"))
        return read(self, spec, **kwargs)

    monkeypatch.setattr(Warehouse, "read", spy)
    for i, (after, until) in enumerate([(cuts["restart"], cuts["inside_expiry"]), (cuts["inside_expiry"], cuts["end"])], start=1):
        reads.append([])
        run_replay(spark, warehouse, load_settings(), f"reads-{i}", window_from=after, window_to=until)
    monkeypatch.undo()
    older, newer = reads
    earlier = [w for w in older if w is not None and w.above is None]
    assert [(w.column, w.at_most) for w in earlier] == [("ts", cuts["restart"])]  # the one search for the start records
    assert all(w is not None and w.column == "ts" and w.above == cuts["restart"] for w in older if w not in earlier), older
    assert newer and all(w is not None and w.column == "ts" and w.above == cuts["inside_expiry"] for w in newer), newer
    assert_same_history(full, warehouse)
    starts = warehouse.read(REPLAY_STATE).where((F.col("unit") == replay_run.STARTS_UNIT) & (F.col("window_to") == cuts["end"]))
    carried = {r.namesrv: [ts for ts, _, _ in pickle.loads(r.state)] for r in starts.collect()}
    records = full.read(EVENTS).where(F.col("kind") == "namesrv_start").groupBy("namesrv").agg(F.sort_array(F.collect_list("ts")).alias("ts"))
    assert carried == {r.namesrv: r.ts for r in records.collect()} and len(carried) >= 2


def test_rerunning_windows_replaces_exactly_their_output(spark, full, irregular, cuts) -> None:
    ends = sorted({cuts["restart"], cuts["before_expiry"], cuts["inside_expiry"]})
    # an earlier window (not the latest), then the latest one, each re-run under a new run id
    run_replay(spark, irregular, load_settings(), "rerun-middle", window_from=ends[0], window_to=ends[1])
    run_replay(spark, irregular, load_settings(), "rerun-last", window_from=ends[-1], window_to=cuts["end"])
    assert_same_history(full, irregular)
    assert PublishedHistory(irregular.root).run_id == "rerun-last"
    # the same run id again commits nothing
    versions = {spec.name: irregular.version(spec) for spec in REPLAY_TABLES}
    run_replay(spark, irregular, load_settings(), "rerun-last", window_from=ends[-1], window_to=cuts["end"])
    assert {spec.name: irregular.version(spec) for spec in REPLAY_TABLES} == versions


def test_a_window_without_its_predecessor_fails_clearly(spark, full, irregular, cuts) -> None:
    start = cuts["inside_expiry"] + 1234
    before = latest_publish(irregular)
    with pytest.raises(MissingPredecessorError, match=f"no published replay state at {start}"):
        run_replay(spark, irregular, load_settings(), "orphan", window_from=start, window_to=cuts["end"])
    assert latest_publish(irregular) == before
    result = run_replay(spark, irregular, load_settings(), "last-good", window_from=start, window_to=cuts["end"], from_last_good=True)
    assert result.resumed_from == cuts["inside_expiry"]
    assert_same_history(full, irregular)


def test_the_first_window_of_a_warehouse_replays_from_the_first_record(spark, ingested, full, cuts, tmp_path) -> None:
    """``--from`` on a warehouse with nothing published, with records before it (an incident window
    rebuilt from a longer capture): nothing to resume from and no predecessor to miss, so the run
    replays from the first record, the only way to the exact state at ``--from``, and publishes
    what one run over the same records publishes."""
    warehouse = warehouse_copy(spark, ingested, tmp_path)
    assert cuts["first"] < cuts["before_expiry"] < cuts["end"]
    result = run_replay(spark, warehouse, load_settings(), "first", window_from=cuts["before_expiry"], window_to=cuts["end"])
    assert result.resumed_from is None
    assert_same_history(full, warehouse)
    assert PublishedHistory(warehouse.root).coverage() == PublishedHistory(full.root).coverage()


def _split_capture(capture: Path, early: Path, late: Path, after: int) -> int:
    """Copy ``capture`` to ``early`` but hold back the records of its last file with ts > ``after``,
    which go to ``late``. Returns the number of late lines."""
    import json

    files = sorted(capture.glob("*.jsonl.gz"))
    held = []
    for path in files:
        lines = gzip.decompress(path.read_bytes()).splitlines(keepends=True)
        if path == files[-1]:
            keep = [line for line in lines if json.loads(line)["ts"] <= after]
            held = [line for line in lines if json.loads(line)["ts"] > after]
            lines = keep
        (early / path.name).write_bytes(gzip.compress(b"".join(lines)))
    (late / "late.jsonl.gz").write_bytes(gzip.compress(b"".join(held)))
    return len(held)


@pytest.fixture(scope="module")
def without_late(spark, capture: Path, cuts: dict[str, int], tmp_path_factory) -> tuple[Path, Path]:
    """(warehouse root, late records): a warehouse that ingested the capture without the late records
    (those of its last file after ``cuts["restart"]``) and published windows ending at the restart,
    inside an expiry and at the end; and the directory holding the late records. Built once; each
    test works on its own copy (:func:`published_without_late_records`)."""
    base = tmp_path_factory.mktemp("windows-without-late")
    early, late = base / "early", base / "late"
    early.mkdir()
    late.mkdir()
    assert _split_capture(capture, early, late, cuts["restart"]) > 0
    warehouse = Warehouse(str(base / "wh"), spark, "delta-rs")
    run_ingest(spark, warehouse, load_settings(), str(early), "early-ingest")
    replay_windows(spark, warehouse, [cuts["restart"], cuts["inside_expiry"], cuts["end"]], "early")
    return base / "wh", late


def published_without_late_records(spark, without_late: tuple[Path, Path], tmp_path: Path) -> tuple[Warehouse, Path]:
    """A copy of the ``without_late`` warehouse (:func:`warehouse_copy`) and the directory holding the
    late records."""
    root, late = without_late
    return warehouse_copy(spark, root, tmp_path), late


def stale_command(root: str, monkeypatch, capsys) -> list[str]:
    """The lines ``nsreplay stale`` prints for ``root`` (exit status 0), with Spark unavailable: the
    command reads two small tables with pyarrow and must not start a session."""

    def no_spark(*args, **kwargs):
        raise AssertionError("nsreplay stale started Spark")

    capsys.readouterr()
    with monkeypatch.context() as patch:
        patch.setattr(runtime, "build_spark", no_spark)
        assert cli.main(["stale", "--warehouse", root]) == 0
    return capsys.readouterr().out.splitlines()


def test_late_file_is_detected_and_backfill_repairs_the_history(spark, without_late, full, cuts, tmp_path, monkeypatch, capsys) -> None:
    warehouse, late = published_without_late_records(spark, without_late, tmp_path)
    windows = [cuts["restart"], cuts["inside_expiry"], cuts["end"]]

    ingest = run_ingest(spark, warehouse, load_settings(), str(late), "late-ingest")
    late_ns = {r.namesrv for r in warehouse.read(EVENTS).where(F.col("source_file").contains("late.jsonl")).select("namesrv").distinct().collect()}
    expected = {(ns, w_from, w_to) for ns in late_ns for w_from, w_to in [(windows[0], windows[1]), (windows[1], windows[2])]}
    assert {(s.namesrv, s.window_from, s.window_to) for s in ingest.stale} == expected
    assert {(s.namesrv, s.window_from, s.window_to) for s in open_stale(warehouse)} == expected
    assert ingest.late_data().endswith(f"nsreplay backfill --warehouse {warehouse.root} --from {windows[0]}")
    listed = stale_command(warehouse.root, monkeypatch, capsys)
    assert listed[-1] == f"re-run them: nsreplay backfill --warehouse {warehouse.root} --from {windows[0]}"
    assert sorted(line.split()[:3] for line in listed[:-1]) == sorted(
        [ns, f"({format_ms(w_from)},", f"{format_ms(w_to)}]"] for ns, w_from, w_to in expected
    )

    results = run_backfill(spark, warehouse, load_settings(), "backfill", start=cuts["restart"])
    assert [(r.resumed_from, r.window_to) for r in results] == [(windows[0], windows[1]), (windows[1], windows[2])]
    assert open_stale(warehouse) == []
    assert stale_command(warehouse.root, monkeypatch, capsys) == ["no stale windows"]
    assert_same_history(full, warehouse)


def state_ends(warehouse: Warehouse, version: int | None = None) -> set[int]:
    return {r.window_to for r in warehouse.read(REPLAY_STATE, version=version).select("window_to").distinct().collect()}


def test_thinned_states_are_not_put_back_and_a_backfill_resumes_before_them(spark, without_late, full, cuts, tmp_path) -> None:
    """`nsreplay thin-states` removes the states of window ends the policy does not keep. The next
    replay does not take that commit for another run's writes (it would put them back), and a backfill
    whose start state is gone resumes from the latest state kept before it: the same history."""
    warehouse, late = published_without_late_records(spark, without_late, tmp_path)
    windows = [cuts["restart"], cuts["inside_expiry"], cuts["end"]]
    assert state_ends(warehouse) == set(windows)
    published = latest_publish(warehouse)
    policy = Policy(keep_recent_ms=0, checkpoint_ms=10**13)  # one span: only the latest end is kept

    planned = thin_states(Warehouse(warehouse.root, None, "delta-rs"), policy, dry_run=True, run_id="thin-dry")
    assert (planned.ends, planned.kept, planned.version, planned.latest) == (3, 1, None, cuts["end"])
    assert planned.removed_files > 0 and planned.removed_files < planned.files and state_ends(warehouse) == set(windows)
    done = thin_states(Warehouse(warehouse.root, None, "delta-rs"), policy, dry_run=False, run_id="thin")
    assert (done.removed_files, done.removed_bytes) == (planned.removed_files, planned.removed_bytes) and done.version is not None
    assert state_ends(warehouse) == {cuts["end"]}
    assert state_ends(warehouse, published.versions[REPLAY_STATE.name]) == set(windows)  # the published version reads as before
    assert latest_publish(warehouse) == published

    # the last window again: it resumes from the published state at its start, and leaves the thinning in place
    run_replay(spark, warehouse, load_settings(), "last-again", window_from=windows[1], window_to=windows[2])
    assert state_ends(warehouse) == state_ends(warehouse, latest_publish(warehouse).versions[REPLAY_STATE.name]) == {cuts["end"]}

    run_ingest(spark, warehouse, load_settings(), str(late), "late-ingest")
    results = run_backfill(spark, warehouse, load_settings(), "backfill", start=windows[0])
    assert [(r.resumed_from, r.window_to) for r in results] == [(None, windows[1]), (windows[1], windows[2])]
    assert open_stale(warehouse) == []
    assert_same_history(full, warehouse)


def published_tables(warehouse: Warehouse) -> dict[str, DataFrame]:
    versions = latest_publish(warehouse).versions
    return {spec.name: plain(warehouse.read(spec, version=versions[spec.name])) for spec in HISTORY}


def test_an_unpublished_replay_is_not_published_by_the_next_run(spark, without_late, cuts, tmp_path) -> None:
    """A run that wrote gold rows but never published them (quality failed, or killed) must not become
    visible when another window publishes: its writes are put back to the published versions first."""
    warehouse, late = published_without_late_records(spark, without_late, tmp_path)
    before = published_tables(warehouse)
    run_ingest(spark, warehouse, load_settings(), str(late), "late-ingest")  # records after cuts["restart"]
    # the replay stage alone of the second window, which holds late records: written, never published
    replay_window(spark, warehouse, load_settings(), "unpublished", window_from=cuts["restart"], window_to=cuts["inside_expiry"])
    # the first window again (it holds no late record): replayed, checked and published
    run_replay(spark, warehouse, load_settings(), "first-again", window_to=cuts["restart"])
    after = published_tables(warehouse)
    for name, df in before.items():
        assert_df_equality(df, after[name], ignore_row_order=True, ignore_nullable=True)
    # put back by a Delta restore of each table (no data rewritten), not by a copy of its rows
    discards = {spec.name: [h["operation"] for h in warehouse.history(spec) if h["job"] == "replay/discard-unpublished"] for spec in REPLAY_TABLES}
    assert discards == {spec.name: ["RESTORE"] for spec in REPLAY_TABLES}


def test_a_run_id_whose_published_window_went_stale_is_refused_with_the_repair(spark, without_late, cuts, tmp_path) -> None:
    """A run id publishes once: run again (an Airflow re-run of a window after late data) it would write
    nothing, publish nothing and report success. It is refused, naming the backfill that repairs it."""
    warehouse, late = published_without_late_records(spark, without_late, tmp_path)
    before = published_tables(warehouse)
    run_ingest(spark, warehouse, load_settings(), str(late), "late-ingest")  # makes the windows after cuts["restart"] stale
    with pytest.raises(RunIdSpentError) as refused:
        run_replay(spark, warehouse, load_settings(), "early-1", window_from=cuts["restart"], window_to=cuts["inside_expiry"])
    assert str(refused.value).startswith("run 'early-1' published the window (")
    assert str(refused.value).endswith(f"nsreplay backfill --warehouse {warehouse.root} --from {cuts['restart']}")
    after = published_tables(warehouse)
    for name, df in before.items():
        assert_df_equality(df, after[name], ignore_row_order=True, ignore_nullable=True)
    # a window the late records left alone is still run again as before: nothing new is written,
    # checked or published (its writes, quality results and publish are each done already)
    touched = REPLAY_TABLES + (PUBLISH_LOG, REPLAY_RUNS, STALE_WINDOWS, QUALITY_RESULTS)
    versions = {spec.name: warehouse.version(spec) for spec in touched}
    assert None not in versions.values(), versions
    published = latest_publish(warehouse)
    assert published is not None and published.run_id == "early-2"
    run_replay(spark, warehouse, load_settings(), "early-0", window_to=cuts["restart"])
    assert {spec.name: warehouse.version(spec) for spec in touched} == versions
    assert latest_publish(warehouse) == published


@pytest.mark.parametrize("stopped", ["after its run row", "before its run row"])
def test_a_retry_after_an_ingest_is_refused_where_it_would_mix_inputs(spark, without_late, cuts, tmp_path, monkeypatch, stopped: str) -> None:
    """A replay that wrote its gold tables and stopped before its publish may be retried under its run
    id while the input is unchanged (its writes are skipped as done). Once an ingest has committed
    meanwhile, it is refused, saying why, and the published state stays as it was: a try killed
    before its run row (the last of its writes) would keep the tables written from the old input and
    write the others from the new; one that wrote them all would publish the window without the
    records ingested since."""
    warehouse, late = published_without_late_records(spark, without_late, tmp_path)
    before = published_tables(warehouse)
    window = {"window_from": cuts["inside_expiry"], "window_to": cuts["end"]}
    if stopped == "after its run row":
        replay_window(spark, warehouse, load_settings(), "stopped", **window)  # written; quality and publish never ran
        versions = {spec.name: warehouse.version(spec) for spec in REPLAY_TABLES}
        replay_window(spark, warehouse, load_settings(), "stopped", **window)  # the same input: a retry writes nothing
        assert {spec.name: warehouse.version(spec) for spec in REPLAY_TABLES} == versions
        why = r"^run 'stopped' wrote its window from silver\.events version \d+ \(not published\), and silver\.events is at version \d+ now: a retry would publish the window without the records ingested since"
    else:
        with killed_before_run_row(monkeypatch):
            replay_window(spark, warehouse, load_settings(), "stopped", **window)
        why = r"^run 'stopped' stopped after writing gold\.\w+ from silver\.events version \d+, and silver\.events is at version \d+ now"
    run_ingest(spark, warehouse, load_settings(), str(late), "late-ingest")
    with pytest.raises(RunIdSpentError, match=why):
        run_replay(spark, warehouse, load_settings(), "stopped", **window)
    after = published_tables(warehouse)
    for name, df in before.items():
        assert_df_equality(df, after[name], ignore_row_order=True, ignore_nullable=True)


def test_records_ingested_between_a_replay_and_its_publish_leave_the_window_stale(spark, without_late, cuts, tmp_path, monkeypatch, capsys) -> None:
    """The quality stage runs between a window's replay and its publish; an ingest in that gap adds
    records the run did not read. Before, the ingest saw the window unpublished (nothing to mark) and
    the publish then hid the loss: a re-run's publish even closed the ingest's own marks. Now the
    publish marks its window stale for them, and the marks stay open until a run that read them."""
    warehouse, late = published_without_late_records(spark, without_late, tmp_path)
    window = {"window_from": cuts["inside_expiry"], "window_to": cuts["end"]}
    replay_window(spark, warehouse, load_settings(), "rerun", **window)  # read silver.events without the late records
    ingest = run_ingest(spark, warehouse, load_settings(), str(late), "late-ingest")  # marks the windows published then
    late_ns = {s.namesrv for s in ingest.stale}
    assert late_ns and {(s.window_from, s.window_to) for s in ingest.stale} == {(cuts["restart"], cuts["inside_expiry"]), (cuts["inside_expiry"], cuts["end"])}
    check_window(spark, warehouse, "rerun")
    published = publish_window(spark, warehouse, "rerun")
    assert {(s.namesrv, s.window_from, s.window_to) for s in open_stale(warehouse)} == {
        (ns, w_from, w_to) for ns in late_ns for w_from, w_to in [(cuts["restart"], cuts["inside_expiry"]), (cuts["inside_expiry"], cuts["end"])]
    }
    # the publish marks its own window (and the published one before it) for the records it did not read
    assert {(s.namesrv, s.window_from, s.window_to, s.published_run_id, s.detected_by) for s in published["stale"]} == {
        (ns, w_from, w_to, rid, "rerun")
        for ns in late_ns
        for w_from, w_to, rid in [(cuts["restart"], cuts["inside_expiry"], "early-1"), (cuts["inside_expiry"], cuts["end"], "rerun")]
    }
    assert late_data_note(published["stale"], warehouse.root).endswith(f"nsreplay backfill --warehouse {warehouse.root} --from {cuts['restart']}")
    # the listing names the run that found each mark, the ingest's or the publish's, without calling it an ingest
    listed = stale_command(warehouse.root, monkeypatch, capsys)
    found_by = {s.detected_by for s in open_stale(warehouse)}
    assert found_by == {"late-ingest", "rerun"}
    assert sorted(line.rsplit("(", 1)[1] for line in listed[:-1]) == sorted(f"found by run {s.detected_by})" for s in open_stale(warehouse))
    # published again (a retry of the stage), nothing new is marked
    versions = warehouse.version(STALE_WINDOWS)
    publish_window(spark, warehouse, "rerun")
    assert warehouse.version(STALE_WINDOWS) == versions


def test_a_compaction_of_the_events_does_not_spend_a_stopped_run_id(spark, without_late, cuts, tmp_path) -> None:
    """A compaction rewrites silver.events' files and changes no row: a retry of a replay stopped
    before it reads the same records, so it is not refused as if an ingest had committed."""
    warehouse, _ = published_without_late_records(spark, without_late, tmp_path)
    window = {"window_from": cuts["inside_expiry"], "window_to": cuts["end"]}
    replay_window(spark, warehouse, load_settings(), "stopped", **window)
    compacted = compact_dated(warehouse, CompactPolicy(1 << 30, 24 * 3600_000, 8192), today="2100-01-01", dry_run=False,
                              run_id="compact", tables=[t for t in DATED_TABLES if t[0] is EVENTS])
    assert compacted[0].result is not None and compacted[0].result.added, compacted
    assert warehouse.row_commits_since(EVENTS, warehouse.version(EVENTS) - 1) == []  # the newest commit changed no row
    before = {spec.name: warehouse.version(spec) for spec in REPLAY_TABLES}
    result = run_replay(spark, warehouse, load_settings(), "stopped", **window)  # RunIdSpentError before
    assert {spec.name: warehouse.version(spec) for spec in REPLAY_TABLES} == before  # its writes were kept as done
    assert latest_publish(warehouse).run_id == "stopped" and result.stale == ()


def test_a_replay_leaves_out_the_records_of_an_ingest_that_has_not_finished(spark, without_late, cuts, tmp_path, monkeypatch) -> None:
    """An ingest stopped after its commit to silver.events, before its register bodies: a replay
    that read those events failed with a KeyError on a body. The replay reads the version before
    that commit, says so, and its publish marks the window stale for those records; the next ingest
    discards them and reads their file again, as before."""
    warehouse, late = published_without_late_records(spark, without_late, tmp_path)
    append = Warehouse.append

    def stopped_after_events(self, spec, *args, **kwargs):
        result = append(self, spec, *args, **kwargs)
        if spec is EVENTS:
            raise Killed("killed after silver.events")
        return result

    with monkeypatch.context() as patch:
        patch.setattr(Warehouse, "append", stopped_after_events)
        with pytest.raises(Killed):
            run_ingest(spark, warehouse, load_settings(), str(late), "stopped-ingest")
    assert warehouse.read(EVENTS).where(F.col("run_id") == "stopped-ingest").count() > 0
    before = published_tables(warehouse)
    result = run_replay(spark, warehouse, load_settings(), "after-stop", window_from=cuts["inside_expiry"], window_to=cuts["end"])
    assert result.unfinished_ingests == ("stopped-ingest",)
    assert result.summary().splitlines()[1].startswith("left out the records of ingest run(s) that have not finished (stopped-ingest)")
    # the same rows as the run it replaced, which read no late record either
    after = published_tables(warehouse)
    for name, df in before.items():
        assert_df_equality(df, after[name], ignore_row_order=True, ignore_nullable=True)
    assert {(s.window_from, s.window_to) for s in result.stale} == {(cuts["restart"], cuts["inside_expiry"]), (cuts["inside_expiry"], cuts["end"])}


def test_a_retry_whose_writes_another_run_discarded_is_refused(spark, without_late, cuts, tmp_path, monkeypatch) -> None:
    """A replay killed after some gold writes, then another run of the window that discarded them and
    was killed in turn: a retry of the first would skip the writes it made before as done and publish
    the tables without them. It is refused; a new run id publishes the whole window."""
    warehouse, _ = published_without_late_records(spark, without_late, tmp_path)
    before = published_tables(warehouse)
    window = {"window_from": cuts["inside_expiry"], "window_to": cuts["end"]}
    for run_id, writes in (("first", 4), ("second", 0)):  # the second is killed right after its discard
        with killed_after_writes(monkeypatch, writes):
            replay_window(spark, warehouse, load_settings(), run_id, **window)
    discarded = [h for h in warehouse.history(ROUTE_CHANGES) if h["run_id"] == "second"]
    assert discarded and all(h["operation"] == "RESTORE" for h in discarded)
    with pytest.raises(RunIdSpentError, match=r"^run 'first' committed to gold\.\w+ before \(a write or a discard\), and run\(s\) 'second' committed to it since"):
        run_replay(spark, warehouse, load_settings(), "first", **window)
    run_replay(spark, warehouse, load_settings(), "third", **window)
    after = published_tables(warehouse)
    for name, df in before.items():
        assert_df_equality(df, after[name], ignore_row_order=True, ignore_nullable=True)


def test_a_retry_keeps_its_writes_made_after_discarding_another_runs(spark, without_late, cuts, tmp_path, monkeypatch) -> None:
    """Another run's unpublished writes, then a run that discarded them, wrote some tables and was
    killed: its retry keeps those writes (nothing to discard again), writes the rest and publishes
    the whole window."""
    warehouse, _ = published_without_late_records(spark, without_late, tmp_path)
    before = published_tables(warehouse)
    window = {"window_from": cuts["inside_expiry"], "window_to": cuts["end"]}
    replay_window(spark, warehouse, load_settings(), "unpublished", **window)
    with killed_after_writes(monkeypatch, 4):
        replay_window(spark, warehouse, one_writer(), "retried", **window)
    kept = {spec.name: [h["version"] for h in warehouse.history(spec) if h["run_id"] == "retried" and h["job"] == "replay"] for spec in REPLAY_TABLES}
    assert sum(map(len, kept.values())) == 4
    run_replay(spark, warehouse, load_settings(), "retried", **window)
    # no second discard, and the four writes stand: one write of the run per table
    assert all(len([h for h in warehouse.history(spec) if h["run_id"] == "retried" and h["job"] == "replay/discard-unpublished"]) <= 1
               for spec in REPLAY_TABLES)
    rewritten = {spec.name: [h["version"] for h in warehouse.history(spec) if h["run_id"] == "retried" and h["job"] == "replay"] for spec in REPLAY_TABLES}
    assert all(len(v) == 1 for v in rewritten.values()) and all(rewritten[name] == v for name, v in kept.items() if v), rewritten
    after = published_tables(warehouse)
    for name, df in before.items():
        assert_df_equality(df, after[name], ignore_row_order=True, ignore_nullable=True)


def test_two_runs_writing_one_window_at_once_publish_neither(spark, without_late, cuts, tmp_path, monkeypatch) -> None:
    """A run that writes while another does (here: a whole replay of the window runs between the
    first run's discard and its writes) is refused once its writes are done, and the other cannot
    publish over its writes; a run under a new id publishes the window once, with no duplicate row."""
    import pipelines.replay.run as replay_run

    warehouse, _ = published_without_late_records(spark, without_late, tmp_path)
    before = published_tables(warehouse)
    window = {"window_from": cuts["inside_expiry"], "window_to": cuts["end"]}
    overwrite = Warehouse.overwrite_counted
    interleaved = []

    def writes_meanwhile(self, spec, *args, **kwargs):
        if not interleaved:
            interleaved.append(spec.name)
            monkeypatch.setattr(Warehouse, "overwrite_counted", overwrite)
            replay_window(spark, warehouse, load_settings(), "meanwhile", **window)
        return overwrite(self, spec, *args, **kwargs)

    monkeypatch.setattr(Warehouse, "overwrite_counted", writes_meanwhile)
    with pytest.raises(replay_run.ConcurrentRunError, match=r"^run\(s\) 'meanwhile' wrote gold tables \("):
        replay_window(spark, warehouse, one_writer(), "first", **window)
    monkeypatch.undo()
    with pytest.raises(replay_run.PublishRefusedError):
        check_and_publish(spark, warehouse, "meanwhile")
    run_replay(spark, warehouse, load_settings(), "afterwards", **window)
    after = published_tables(warehouse)
    for name, df in before.items():
        assert_df_equality(df, after[name], ignore_row_order=True, ignore_nullable=True)


def test_a_run_between_another_runs_discard_and_its_writes_is_caught(spark, without_late, cuts, tmp_path, monkeypatch) -> None:
    """Another run that writes gold tables after a run discarded the unpublished writes and before
    its own writes start (here: a whole replay of the window before, while the run plans) is in
    the versions that run would record and publish: its rows, never checked by it, would be
    published as its own. The run is refused once its writes are done, the other cannot publish
    either, and a run under a new id publishes the window as before."""
    import pipelines.replay.run as replay_run

    warehouse, _ = published_without_late_records(spark, without_late, tmp_path)
    before = published_tables(warehouse)
    discard = replay_run._discard_unpublished

    def then_another_run(*args, **kwargs):
        discard(*args, **kwargs)
        monkeypatch.setattr(replay_run, "_discard_unpublished", discard)
        replay_window(spark, warehouse, load_settings(), "meanwhile", window_from=cuts["restart"], window_to=cuts["inside_expiry"])

    monkeypatch.setattr(replay_run, "_discard_unpublished", then_another_run)
    with pytest.raises(replay_run.ConcurrentRunError, match=r"^run\(s\) 'meanwhile' wrote gold tables \("):
        replay_window(spark, warehouse, load_settings(), "first", window_from=cuts["inside_expiry"], window_to=cuts["end"])
    monkeypatch.undo()
    with pytest.raises(replay_run.PublishRefusedError):
        check_and_publish(spark, warehouse, "meanwhile")
    run_replay(spark, warehouse, load_settings(), "afterwards", window_from=cuts["inside_expiry"], window_to=cuts["end"])
    after = published_tables(warehouse)
    for name, df in before.items():
        assert_df_equality(df, after[name], ignore_row_order=True, ignore_nullable=True)


def check_and_publish(spark, warehouse: Warehouse, run_id: str) -> None:
    from pipelines.replay.run import check_window, publish_window

    check_window(spark, warehouse, run_id)
    publish_window(spark, warehouse, run_id)


def test_rerunning_an_earlier_window_keeps_a_namesrv_that_starts_after_it(spark, capture, cuts, tmp_path) -> None:
    """A NameServer whose first record is after a window takes no part in that window's replay; a
    re-run of the window keeps it published as it was (its coverage and its rows)."""
    import json

    later = "10.0.0.11:9876"
    shifted = tmp_path / "shifted"
    shifted.mkdir()
    for path in sorted(capture.glob("*.jsonl.gz")):
        kept = []
        for line in gzip.decompress(path.read_bytes()).splitlines(keepends=True):
            record = json.loads(line)
            if not (record.get("namesrv") == later and record["ts"] <= cuts["restart"]):
                kept.append(line)
        (shifted / path.name).write_bytes(gzip.compress(b"".join(kept)))
    warehouse = Warehouse(str(tmp_path / "wh"), spark, "delta-rs")
    run_ingest(spark, warehouse, load_settings(), str(shifted), "shifted-ingest")
    replay_windows(spark, warehouse, [cuts["restart"], cuts["end"]], "w")
    coverage, before = latest_publish(warehouse).coverage, published_tables(warehouse)
    assert coverage[later][0] > cuts["restart"]
    run_replay(spark, warehouse, load_settings(), "first-again", window_to=cuts["restart"])
    assert latest_publish(warehouse).coverage == coverage
    after = published_tables(warehouse)
    for name, df in before.items():
        assert_df_equality(df, after[name], ignore_row_order=True, ignore_nullable=True)


def test_a_killed_run_leaves_the_published_state_untouched(spark, full, irregular, cuts, capture) -> None:
    before = latest_publish(irregular)
    log = Path(irregular.path(ROUTE_CHANGES)) / "_delta_log"
    commits = len(list(log.glob("*.json")))
    proc = subprocess.Popen(
        [str(ROOT / "spark-submit.sh"), "--master", "local[1]", "jobs/rebuild_routes.py", "--captures", str(capture), "--warehouse", irregular.root,
         "--from", str(cuts["inside_expiry"]), "--to", str(cuts["end"]), "--run-id", "killed"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        deadline = time.time() + 600
        while len(list(log.glob("*.json"))) == commits:  # the run has started writing gold
            assert proc.poll() is None, "the run ended before it wrote anything"
            assert time.time() < deadline
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert latest_publish(irregular) == before
    assert PublishedHistory(irregular.root).run_id == before.run_id
    run_replay(spark, irregular, load_settings(), "after-kill", window_from=cuts["inside_expiry"], window_to=cuts["end"])
    assert_same_history(full, irregular)
