"""The maintenance commands (``nsreplay vacuum``, ``compact``, ``thin-states``) when one table fails:
the others are still done, the report on stdout says which failed, and the exit status is 1 with the
one-line reason on stderr that every command promises (interfaces.md, "Commands")."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nsreplay.storage import Warehouse
from schemas.gold import KEYFRAMES, REPLAY_STATE, SCAN_TICKS

ROOT = Path(__file__).resolve().parents[1]


def break_log(root: str, spec) -> None:
    """Make the newest commit of ``spec``'s Delta log unreadable, as a torn write would."""
    log = Path(Warehouse(root, None, "delta-rs").path(spec), "_delta_log")
    newest = sorted(log.glob("*.json"))[-1]
    newest.write_text(newest.read_text() + '{"add": torn\n')


@pytest.mark.parametrize(
    "command, broken, others",
    [
        ("vacuum", KEYFRAMES, [SCAN_TICKS]),
        ("compact", KEYFRAMES, [SCAN_TICKS]),
        ("thin-states", REPLAY_STATE, []),
    ],
)
def test_a_failed_table_fails_the_command_with_its_reason_on_stderr(demo_published, tmp_path, command, broken, others) -> None:
    root = str(tmp_path / "wh")
    shutil.copytree(demo_published[1], root)
    break_log(root, broken)
    tables = [a for spec in [broken, *others] for a in ("--table", spec.name)] if others else []
    run = subprocess.run([sys.executable, "-m", "nsreplay.cli", command, "--warehouse", root, "--dry-run", *tables],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)

    assert run.returncode == 1, (run.stdout, run.stderr)
    reason = (rf"\S+: MaintenanceError: {command}: 1 of {1 + len(others)} table\(s\) failed, the others were done "
              rf"\(see the report on stdout\): {re.escape(broken.name)}: StorageError: cannot open the Delta table at "
              rf"{re.escape(Warehouse(root, None, 'delta-rs').path(broken))}: [^\n]+")
    assert re.fullmatch(reason, run.stderr.strip()), run.stderr
    names = {spec.name for spec in [broken, *others]}
    report = {line.split()[0].rstrip(":"): line for line in run.stdout.splitlines() if line.split()[:1] and line.split()[0].rstrip(":") in names}
    assert "failed" in report[broken.name]
    for spec in others:  # done: a row of figures, not a failure
        assert "failed" not in report[spec.name] and re.match(rf"{re.escape(spec.name)}\s+\d", report[spec.name]), report


def block_staging(root: str, spec) -> None:
    """Put a plain file where ``spec``'s staging directory goes: every listing or making of it then
    fails in the file system (``OSError``), as on a read-only or full disk, whoever runs the test."""
    Path(Warehouse(root, None, "delta-rs").path(spec), "_staging").write_text("not a directory\n")


@pytest.mark.parametrize(
    "command, args",
    [
        ("vacuum", ["--dry-run"]),  # lists the staging directories of killed writes
        ("compact", []),  # writes the merged files into a staging directory
    ],
)
def test_a_file_system_error_in_one_table_is_reported_and_the_others_are_done(demo_published, tmp_path, command, args) -> None:
    root = str(tmp_path / "wh")
    shutil.copytree(demo_published[1], root)
    block_staging(root, KEYFRAMES)
    run = subprocess.run([sys.executable, "-m", "nsreplay.cli", command, "--warehouse", root, *args,
                          "--table", KEYFRAMES.name, "--table", SCAN_TICKS.name],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)

    assert run.returncode == 1, (run.stdout, run.stderr)
    reason = (rf"\S+: MaintenanceError: {command}: 1 of 2 table\(s\) failed, the others were done "
              rf"\(see the report on stdout\): {re.escape(KEYFRAMES.name)}: StorageError: [^\n]*Not a directory[^\n]*")
    assert re.fullmatch(reason, run.stderr.strip()), run.stderr
    report = {line.split()[0]: line for line in run.stdout.splitlines() if line.split()[:1] in ([KEYFRAMES.name], [SCAN_TICKS.name])}
    assert "failed" in report[KEYFRAMES.name], run.stdout
    assert "failed" not in report[SCAN_TICKS.name] and re.match(rf"{re.escape(SCAN_TICKS.name)}\s+\d", report[SCAN_TICKS.name]), run.stdout
