"""scripts/bootstrap.sh: which dependencies a command installs into .venv, and when it installs again.

The jobs (``spark-submit.sh``, the scheduler's workers) install the runtime dependencies only;
``run-tests.sh`` adds the ``test`` extras. A stamp in .venv keeps the hash of pyproject.toml and the
extras installed, so a second command installs nothing, and extras once installed are kept when the
dependencies change. The script runs for real here, sourced by bash, on a copy of itself in a
project root whose ``.venv/bin/python`` only records the pip commands it is given.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "bootstrap.sh", tmp_path / "scripts" / "bootstrap.sh")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    python = bin_dir / "python"
    python.write_text(f'#!/bin/sh\necho "$*" >> {tmp_path}/pip.log\n')
    python.chmod(0o755)
    nsreplay = bin_dir / "nsreplay"
    nsreplay.write_text("#!/bin/sh\n")
    nsreplay.chmod(0o755)
    return tmp_path


def bootstrap(root: Path, extras: str | None) -> list[str]:
    """Source the bootstrap as the commands do; return the installs of the project it made."""
    log = root / "pip.log"
    log.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "NSREPLAY_EXTRAS"}
    env.update(NSREPLAY_ROOT=str(root), NSREPLAY_JVM_ARCHIVE="off")
    if extras is not None:
        env["NSREPLAY_EXTRAS"] = extras
    subprocess.run(["bash", "-c", 'source "$NSREPLAY_ROOT/scripts/bootstrap.sh"'], env=env, check=True, capture_output=True)
    calls = log.read_text().splitlines() if log.exists() else []
    return [c.split(" -e ", 1)[1] for c in calls if " -e " in c]


def test_a_job_installs_the_runtime_only_and_the_tests_add_their_extras(project: Path) -> None:
    root = str(project)
    assert bootstrap(project, None) == [root]
    assert (project / ".venv" / ".nsreplay-stamp").read_text().splitlines()[1:] == [""]
    assert bootstrap(project, None) == []
    assert bootstrap(project, "test") == [f"{root}[test]"]
    assert bootstrap(project, "test") == []
    assert bootstrap(project, None) == []  # the test extras' venv serves the jobs as it is


def test_extras_once_installed_are_kept_when_the_dependencies_change(project: Path) -> None:
    root = str(project)
    assert bootstrap(project, "test") == [f"{root}[test]"]
    (project / "pyproject.toml").write_text("[project]\nname = 'x'\nversion = '2'\n")
    assert bootstrap(project, None) == [f"{root}[test]"]
    assert bootstrap(project, "test") == []


def test_a_venv_stamped_before_the_extras_were_recorded_gets_them_once(project: Path) -> None:
    root = str(project)
    assert bootstrap(project, None) == [root]
    stamp = project / ".venv" / ".nsreplay-stamp"
    stamp.write_text(stamp.read_text().splitlines()[0] + "\n")  # the stamp's old form: the hash alone
    assert bootstrap(project, None) == []
    assert bootstrap(project, "test") == [f"{root}[test]"]
    assert bootstrap(project, "test") == []


def test_the_test_runner_asks_for_the_test_extras_and_the_jobs_do_not() -> None:
    assert "export NSREPLAY_EXTRAS=test" in (ROOT / "run-tests.sh").read_text()
    for job_entry in ("spark-submit.sh", "dags/nsreplay_routes.py"):
        assert "NSREPLAY_EXTRAS" not in (ROOT / job_entry).read_text()
