"""The quality and publish stages find their run's rows in gold.replay_runs and
silver.quality_results from the files that run's commit added, not by reading every run's file."""

from __future__ import annotations

import pytest

from nsreplay.runtime import local_frame
from nsreplay.storage import CommitInfo, Warehouse
from pipelines.replay.run import JOB, NotWrittenError, run_rows, written_run
from schemas.gold import REPLAY_RUNS

NS = "10.0.0.10:9876"


def run_row(run_id: str, ms: int) -> tuple:
    return (run_id, ms, ms - 100, ms, [(NS, 0, ms, "rocketmq-4.9")], {"gold.scan_ticks": ms, "gold.route_changes": ms + 1}, {"gold.scan_ticks": 3}, "passed")


def test_a_run_row_is_read_from_its_commit_files_and_equals_the_scan(spark, tmp_path, monkeypatch) -> None:
    warehouse = Warehouse(str(tmp_path), spark, "delta-rs")
    runs = [f"run-{i}" for i in range(5)]
    for i, run_id in enumerate(runs):
        warehouse.append(REPLAY_RUNS, local_frame(spark, [run_row(run_id, 1000 * (i + 1))], REPLAY_RUNS.schema), CommitInfo(run_id=run_id, job=JOB))
    scanned = {run_id: [r.asDict(recursive=True) for r in warehouse.read(REPLAY_RUNS).where(f"run_id = '{run_id}'").collect()] for run_id in runs}
    assert all(len(rows) == 1 for rows in scanned.values())

    reads: list = []
    original = Warehouse.read
    monkeypatch.setattr(Warehouse, "read", lambda self, spec, **kw: reads.append(spec) or original(self, spec, **kw))
    for run_id in runs:
        assert run_rows(warehouse, REPLAY_RUNS, JOB, run_id) == scanned[run_id]
        assert written_run(warehouse, run_id) == scanned[run_id][0]
        assert len(warehouse.files_written_by(REPLAY_RUNS, CommitInfo(run_id=run_id, job=JOB))) == 1
    assert reads == []  # every run was found from its commit: no scan
    # a run older than the commits searched, or written by another job: found by the scan
    assert warehouse.files_written_by(REPLAY_RUNS, CommitInfo(run_id="run-0", job=JOB), newest=2) is None
    assert run_rows(warehouse, REPLAY_RUNS, "another-job", "run-1") == scanned["run-1"]
    assert reads == [REPLAY_RUNS]
    with pytest.raises(NotWrittenError, match="run-9"):
        written_run(warehouse, "run-9")
