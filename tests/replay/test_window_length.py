"""A window longer than ``[replay] max_window_days`` is refused before anything is written: every
scan tick in it would be replayed and stored, so a ``--to`` typed a century too far must not start."""

from __future__ import annotations

import pytest

from nsreplay.config import load_settings
from nsreplay.runtime import UsageError, parse_time
from nsreplay.storage import Warehouse
from pipelines.replay.run import NothingToReplayError, replay_window
from pipelines.replay.windows import DAY_MS, WindowTooLongError, check_window_length
from schemas.gold import GOLD_TABLES


def test_the_limit_is_inclusive_and_the_error_is_a_usage_error() -> None:
    check_window_length(0, 3 * DAY_MS, 3)
    with pytest.raises(WindowTooLongError, match=r"max_window_days = 3") as caught:
        check_window_length(0, 3 * DAY_MS + 1, 3)
    assert isinstance(caught.value, UsageError)  # exit status 2, like any other bad argument
    with pytest.raises(WindowTooLongError, match="9223372036854775807 ms"):  # beyond year 9999: no crash formatting it
        check_window_length(0, 2**63 - 1, 3)


def test_a_far_future_to_is_refused_before_the_warehouse_changes(spark, published) -> None:
    root = published[1]
    warehouse = Warehouse(root, spark, "delta-rs")
    versions = {spec.name: warehouse.version(spec) for spec in GOLD_TABLES}
    with pytest.raises(WindowTooLongError, match="2100-01-01"):
        replay_window(spark, warehouse, load_settings(), "typo", window_to=parse_time("2100-01-01T00:00:00Z"))
    assert {spec.name: warehouse.version(spec) for spec in GOLD_TABLES} == versions


@pytest.mark.parametrize(("window", "says"), [
    ({"window_from": 9999999999999999999}, r"--from 9999999999999999999 ms is not before the last record of silver\.events, 20\d\d-"),
    ({"window_from": parse_time("2100-01-01T00:00:00Z")}, r"--from 2100-01-01T00:00:00\.000Z is not before the last record"),
    ({"window_to": parse_time("2000-01-01T00:00:00Z")}, r"no record at or before --to 2000-01-01T00:00:00\.000Z"),
])
def test_an_empty_window_says_its_instants_and_writes_nothing(spark, published, window, says) -> None:
    """A ``--from`` past every record (or a ``--to`` before all of them) is refused with the instants
    as times (a number when no calendar holds it), before the warehouse changes."""
    warehouse = Warehouse(published[1], spark, "delta-rs")
    versions = {spec.name: warehouse.version(spec) for spec in GOLD_TABLES}
    with pytest.raises(NothingToReplayError, match=says):
        replay_window(spark, warehouse, load_settings(), "empty", **window)
    assert {spec.name: warehouse.version(spec) for spec in GOLD_TABLES} == versions


def test_the_job_refuses_a_long_window_before_the_ingest(tmp_path) -> None:
    """With --from and --to both given, the job knows the window before it reads anything: a typo
    fails with exit 2 before Spark starts and before the warehouse exists."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    (tmp_path / "cap.jsonl").write_text("")
    run = subprocess.run(
        [sys.executable, "jobs/rebuild_routes.py", "--captures", str(tmp_path / "cap.jsonl"), "--warehouse", str(tmp_path / "wh"),
         "--from", "2024-11-21T00:00:00Z", "--to", "2124-11-21T00:00:00Z"],
        cwd=root, capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 2, run.stderr
    assert run.stderr.strip().splitlines()[-1].startswith("rebuild_routes.py: the window 2024-11-21") and "max_window_days = 400" in run.stderr
    assert not (tmp_path / "wh").exists()
