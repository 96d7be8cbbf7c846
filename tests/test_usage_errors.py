"""interfaces.md §1: a failure is a non-zero exit with a one-line reason on stderr, usage errors
included (argparse alone would print its usage block first)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from nsreplay import cli
from nsreplay.generator import cli as generator_cli

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "argv",
    [
        ["--no-such-option"],
        ["serve", "--warehouse", "w", "--http-port", "abc"],
        ["backfill", "--warehouse", "w", "--from", "start", "--extra"],
        ["no-such-command"],
    ],
)
def test_a_usage_error_of_nsreplay_is_one_line_and_exit_2(argv, capsys) -> None:
    assert cli.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    # the prefix is the program's name (pytest's here); the reason says where to ask for help
    assert len(lines) == 1 and " (see nsreplay" in lines[0] and lines[0].endswith(" --help)"), err


@pytest.mark.parametrize("job", ["rebuild_routes.py", "ingest_captures.py"])
def test_a_usage_error_of_a_job_is_one_line_and_exit_2(job) -> None:
    result = subprocess.run([sys.executable, f"jobs/{job}", "--captures", "x", "--bogus", "1"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [f"{job}: unrecognized arguments: --bogus 1 (see {job} --help)"], result.stderr


@pytest.mark.parametrize("argv", [["--bogus"], ["--start", "yesterday"], ["--workers", "two"]])
def test_a_usage_error_of_the_standalone_generator_is_one_line_and_exit_2(argv, capsys) -> None:
    assert generator_cli.main(argv) == 2
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert out == "" and len(lines) == 1 and lines[0].endswith(" (see nsreplay generate --help)"), err
