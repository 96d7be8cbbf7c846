"""The latest publish is found from the newest publish file: a warehouse published thousands of
times must not open one file per run to learn which run is the latest."""

from __future__ import annotations

from pathlib import Path

from nsreplay.history import newest_publish
from nsreplay.runtime import local_frame
from nsreplay.storage import ColumnRange, CommitInfo, Warehouse
from pipelines.replay.run import latest_publish
from schemas.gold import PUBLISH_LOG

NS = "10.0.0.10:9876"


def publish_row(spark, run_id: str, published_ms: int):
    row = (run_id, published_ms, 0, published_ms, [(NS, 0, published_ms, "rocketmq-4.9")], {"gold.scan_ticks": published_ms}, {}, "passed")
    return local_frame(spark, [row], PUBLISH_LOG.schema)


def test_the_latest_publish_is_read_from_the_files_of_the_greatest_publish_time(spark, tmp_path) -> None:
    warehouse = Warehouse(str(tmp_path), spark, "delta-rs")
    added = {}
    # one file per publish, as runs write them; a tie at 300 ms: the greater run id is the latest
    for run_id, ms in [("run-a", 100), ("run-c", 300), ("run-b", 300), ("run-d", 200)]:
        before = set(warehouse.file_uris(PUBLISH_LOG)) if warehouse.exists(PUBLISH_LOG) else set()
        warehouse.append(PUBLISH_LOG, publish_row(spark, run_id, ms), CommitInfo(run_id=run_id, job="publish"))
        (added[run_id],) = set(warehouse.file_uris(PUBLISH_LOG)) - before
    newest = newest_publish(warehouse)
    assert newest == ColumnRange("published_ms", above=299)
    assert sorted(f.path for f in warehouse.files(PUBLISH_LOG, where=newest)) == sorted([added["run-c"], added["run-b"]])
    latest = latest_publish(warehouse)
    assert (latest.run_id, latest.versions) == ("run-c", {"gold.scan_ticks": 300})
    assert Path(added["run-a"]).exists()  # the older publish rows are kept, only not read
