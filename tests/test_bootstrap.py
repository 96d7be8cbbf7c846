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


def test_the_test_runner_installs_the_npm_client_again_only_when_its_lock_file_changes(project: Path) -> None:
    """run-tests.sh runs ``npm ci`` for the ali-ons client when node_modules lacks the lock file's
    hash: once at first, not again for a lock file that is only newer (a fresh git worktree that
    shares node_modules), again when its contents change, and again after a failed install. Here
    ``npm`` records its calls and installs nothing but node_modules itself."""
    shutil.copy(ROOT / "run-tests.sh", project / "run-tests.sh")
    clients = project / "tests" / "serving" / "clients"
    clients.mkdir(parents=True)
    lock = clients / "package-lock.json"
    shutil.copy(ROOT / "tests" / "serving" / "clients" / "package-lock.json", lock)
    tools = project / "tools"
    tools.mkdir()
    npm = tools / "npm"
    npm.write_text(  # as `npm ci` does: node_modules made anew, or left out when the install fails
        "#!/bin/sh\n"
        f'echo "$*" >> {project}/npm.log\n'
        f'rm -rf {clients}/node_modules\n'
        f'[ -f {project}/npm-fails ] && exit 1\n'
        f'mkdir -p {clients}/node_modules && echo {{}} > {clients}/node_modules/.package-lock.json\n')
    npm.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("NSREPLAY_EXTRAS", "VIRTUAL_ENV")}
    env.update(PATH=f"{tools}:{env['PATH']}", NSREPLAY_JVM_ARCHIVE="off")

    def installs() -> int:
        log = project / "npm.log"
        log.unlink(missing_ok=True)
        done = subprocess.run(["bash", str(project / "run-tests.sh"), "-q"], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert "-m pytest -q" in (project / "pip.log").read_text().splitlines()[-1]  # the tests ran after it
        calls = log.read_text().splitlines() if log.exists() else []
        assert all(c.startswith("ci --prefix tests/serving/clients") for c in calls), calls
        return len(calls)

    assert installs() == 1
    assert installs() == 0
    os.utime(lock, (lock.stat().st_atime, lock.stat().st_mtime + 3600))  # a newer lock file, the same contents
    assert installs() == 0
    lock.write_text(lock.read_text().replace('"lockfileVersion"', '"name": "changed",\n  "lockfileVersion"', 1))
    (project / "npm-fails").touch()
    assert installs() == 1  # failed: nothing installed, so the next run tries again
    (project / "npm-fails").unlink()
    assert installs() == 1
    assert installs() == 0
