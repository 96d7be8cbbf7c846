"""``nsreplay stale`` on a path that holds no warehouse fails with a one-line reason instead of saying
"no stale windows" (a mistyped path must not hide stale windows)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from nsreplay import cli

ROOT = Path(__file__).resolve().parents[2]


def test_a_missing_directory_fails_before_spark_starts(tmp_path, capsys) -> None:
    assert cli.main(["stale", "--warehouse", str(tmp_path / "nowhere")]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [f"{Path(sys.argv[0]).name}: NotAWarehouseError: {tmp_path / 'nowhere'}: no such directory"]


def test_a_directory_without_a_warehouse_fails(tmp_path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "nsreplay.cli", "stale", "--warehouse", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.splitlines()[-1] == f"cli.py: NotAWarehouseError: {tmp_path}: not an nsreplay warehouse (it has no gold.publish_log)"


def test_the_late_data_note_names_its_windows_in_utc_and_the_backfill_in_exact_ms() -> None:
    """The note printed after an ingest or a publish that found stale windows: their times were bare
    epoch milliseconds ("between 1732147200000 and 1732148400000"), beside summaries that print UTC."""
    from pipelines.replay.stale import StaleWindow, late_data_note

    stale = [StaleWindow("10.0.0.10:9876", 1732147200000, 1732147800000, "r1", 1732147500123, "late", 1),
             StaleWindow("10.0.0.11:9876", 1732147800000, 1732148400000, "r2", 1732147900000, "late", 1)]
    assert late_data_note(stale, "/data/wh x") == (
        "late data: 2 published window(s) between 2024-11-21T00:00:00.000Z and 2024-11-21T00:20:00.000Z are stale (gold.stale_windows); "
        "re-run them and every window after them, in order: nsreplay backfill --warehouse '/data/wh x' --from 1732147200000"
    )
