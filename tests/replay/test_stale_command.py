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
