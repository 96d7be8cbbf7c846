"""``nsreplay thin-states``: which window ends keep their replay states (pure), and the command on a
warehouse published in three windows. That a run after a thinning does not put the states back, and
that a backfill whose start state is gone rebuilds the same history, is in
tests/replay/test_windows.py (``test_thinned_states_are_not_put_back_and_a_backfill_resumes_before_them``)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nsreplay.config import load_settings
from nsreplay.state_thinning import Policy, StateThinning, kept_ends, render, thin_states
from nsreplay.storage import THINNING_MODE, Warehouse
from pipelines.replay.run import replay_window
from schemas.gold import REPLAY_STATE

ROOT = Path(__file__).resolve().parents[1]
HOUR = 3_600_000
DAY = 24 * HOUR


# -- which ends are kept (pure) ---------------------------------------------------------------------


def test_every_recent_end_is_kept_and_one_end_per_older_span() -> None:
    latest = 10 * DAY
    hourly = list(range(5 * DAY + HOUR, latest + 1, HOUR))  # five days of hourly windows
    kept = kept_ends(hourly, latest, Policy(keep_recent_ms=2 * DAY, checkpoint_ms=DAY))
    recent = {e for e in hourly if e > latest - 2 * DAY}
    # an end exactly at midnight is the last one of the day it ends
    assert kept == recent | {6 * DAY, 7 * DAY, 8 * DAY}
    assert len(recent) == 48


def test_ends_after_the_latest_publish_are_not_considered_and_the_latest_is_always_kept() -> None:
    assert kept_ends([DAY + 1, DAY + 2, 5 * DAY], DAY + 2, Policy(0, 100 * DAY)) == {DAY + 2}
    assert kept_ends([3, 7, 9], 9, Policy(0, 4)) == {3, 7, 9}  # spans (0, 4], (4, 8], (8, 12]
    assert kept_ends([1, 2, 3, 4, 5], 5, Policy(keep_recent_ms=2, checkpoint_ms=10)) == {4, 5}
    assert kept_ends([], 5, Policy(0, 1)) == frozenset()


def test_a_policy_refuses_impossible_values() -> None:
    for recent, span in ((-1, DAY), (0, 0), (True, DAY), (0, 1.5)):
        with pytest.raises(ValueError, match="Policy"):
            Policy(recent, span)  # type: ignore[arg-type]
    assert Policy.from_config(load_settings().thin_states) == Policy(168 * HOUR, 24 * HOUR)


def test_the_report_says_what_was_removed_kept_skipped_or_failed() -> None:
    done = StateThinning(ends=5, kept=2, files=12, removed_files=9, removed_bytes=3 << 20, latest=0, version=7)
    assert render(done).splitlines() == [
        "gold.replay_state: 5 window ends up to the latest publish's end (1970-01-01T00:00:00.000Z), 2 kept, 3 thinned",
        "removed 9 of 12 files (3.0 MB); committed as version 7",
    ]
    assert "would remove 9 of 12 files" in render(StateThinning(ends=5, kept=2, files=12, removed_files=9, dry_run=True))
    assert render(StateThinning(skipped="nothing published yet")) == "gold.replay_state: nothing done (nothing published yet)"
    assert render(StateThinning(error="StorageError: x")) == "gold.replay_state: failed: StorageError: x"


# -- on a warehouse published in three windows ------------------------------------------------------


def state_ends(warehouse: Warehouse) -> set[int]:
    return {f.columns["window_to"][1] for f in warehouse.file_statistics(REPLAY_STATE, ("window_to",))}


def test_the_command_reports_a_dry_run_then_removes_the_states_not_kept(windowed, tmp_path) -> None:
    root, ends = windowed
    shutil.copytree(root, tmp_path / "wh")
    warehouse = Warehouse(str(tmp_path / "wh"), None, "delta-rs")
    assert state_ends(warehouse) == set(ends[:3])
    version = warehouse.version(REPLAY_STATE)

    def command(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "nsreplay.cli", "thin-states", "--warehouse", str(tmp_path / "wh"), *args],
                              cwd=ROOT, capture_output=True, text=True, timeout=300)

    one_span = ("--keep-recent-hours", "0", "--checkpoint-hours", str(10**13 // HOUR))  # every end in one span
    dry = command("--dry-run", *one_span)
    assert dry.returncode == 0, dry.stderr
    assert "3 window ends up to the latest publish's end" in dry.stdout and "1 kept, 2 thinned" in dry.stdout, dry.stdout
    assert warehouse.version(REPLAY_STATE) == version

    done = command(*one_span)
    assert done.returncode == 0, done.stderr
    assert state_ends(warehouse) == {ends[2]}
    entry = warehouse.history(REPLAY_STATE, limit=1)[0]
    assert (entry["mode"], entry["job"], entry["version"]) == (THINNING_MODE, "thin-states", version + 1)
    again = command(*one_span)  # nothing left to thin: no commit
    assert again.returncode == 0 and "1 kept, 0 thinned" in again.stdout and warehouse.version(REPLAY_STATE) == version + 1

    defaults = command()  # the configured policy keeps every end of the last week
    assert defaults.returncode == 0 and "removed 0 of" in defaults.stdout, defaults.stdout
    refused = command("--checkpoint-hours", "0")
    assert refused.returncode == 2 and "--checkpoint-hours" in refused.stderr


def test_states_written_after_the_latest_publish_are_left_alone(windowed, spark, tmp_path) -> None:
    root, ends = windowed
    shutil.copytree(root, tmp_path / "wh")
    warehouse = Warehouse(str(tmp_path / "wh"), spark, "delta-rs")
    replay_window(spark, warehouse, load_settings(), "w3-unpublished", window_from=ends[2], window_to=ends[3])
    version = warehouse.version(REPLAY_STATE)

    result = thin_states(Warehouse(str(tmp_path / "wh"), None, "delta-rs"), Policy(0, 10**13), dry_run=False, run_id="thin-pending")

    assert result.version is None and "w3-unpublished" in result.skipped
    assert warehouse.version(REPLAY_STATE) == version and state_ends(warehouse) == set(ends)
