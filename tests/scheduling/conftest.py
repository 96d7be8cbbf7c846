"""Fixtures of the scheduling tests: the pinned Airflow venv (.venv-airflow, built by
scripts/airflow-env.sh) and a throw-away AIRFLOW_HOME with a migrated sqlite database per module.

``airflow`` is Airflow 3 (conf/airflow/requirements.txt). A test parametrized with
``@pytest.mark.parametrize("airflow", AIRFLOW_VERSIONS, indirect=True)`` runs on Airflow 3 and on
Airflow 2 (conf/airflow/requirements-2.txt, .venv-airflow2): only the few that exercise what the two
differ in, as the Airflow 2 venv costs its build (about a minute) on a fresh machine.

Airflow never runs inside the test process: its pins would fight the project's. Every Airflow call
is a subprocess of the Airflow venv. When the venv cannot be built because PyPI is unreachable the
tests are skipped with the reason, except under CI (env CI set), where that is a failure."""

from __future__ import annotations

import os
import subprocess
import urllib.request

import pytest

from scheduling_support import AIRFLOW3, AIRFLOW_ENV, PINNED, Airflow, environment, tail


def _pypi_reachable() -> bool:
    try:
        with urllib.request.urlopen("https://pypi.org/simple/pip/", timeout=15):
            return True
    except OSError:
        return False


def _build(tmp_path_factory, version: str) -> None:
    env = environment(tmp_path_factory.mktemp(f"airflow{version}-build"), version)
    built = subprocess.run([str(AIRFLOW_ENV)], env=env, capture_output=True, text=True, timeout=1800)
    if built.returncode != 0:
        reason = f"cannot build the Airflow {version} venv (scripts/airflow-env.sh): {tail(built.stderr, 5)}"
        if os.environ.get("CI") or _pypi_reachable():
            pytest.fail(reason)
        pytest.skip(f"PyPI unreachable; {reason}")


def pytest_generate_tests(metafunc):
    """A test that uses ``airflow`` without naming its versions runs on Airflow 3, through the same
    parametrization as those that do (one module-scoped AIRFLOW_HOME per version, not two for 3)."""
    if "airflow" not in metafunc.fixturenames:
        return
    for mark in metafunc.definition.iter_markers("parametrize"):
        names = mark.args[0].split(",") if isinstance(mark.args[0], str) else mark.args[0]
        if "airflow" in (name.strip() for name in names):
            return
    metafunc.parametrize("airflow", [AIRFLOW3], indirect=True)


@pytest.fixture(scope="session")
def airflow_venv(tmp_path_factory) -> None:
    """.venv-airflow, built on first use (a stamp makes later sessions instant)."""
    _build(tmp_path_factory, "3")


@pytest.fixture(scope="session")
def airflow2_venv(tmp_path_factory) -> None:
    """.venv-airflow2 (NSREPLAY_AIRFLOW=2), built on first use, as .venv-airflow is."""
    _build(tmp_path_factory, "2")


@pytest.fixture(scope="module")
def airflow(request, tmp_path_factory) -> Airflow:
    """A fresh AIRFLOW_HOME (sqlite, `airflow db migrate`) whose dags folder is the project's dags/,
    on Airflow 3, or on the version an indirect parametrization names ("3" or "2"). The venv must
    hold the release conf/airflow pins for that version (not merely some Airflow)."""
    version = getattr(request, "param", "3")
    request.getfixturevalue("airflow_venv" if version == "3" else f"airflow{version}_venv")
    result = Airflow(home := tmp_path_factory.mktemp(f"airflow{version}-home"), environment(home, version))
    # the installed release (0.7 s; `airflow version` takes 5 s: it imports and configures Airflow)
    reported = result.run("python", "-c", "from importlib.metadata import version; print(version('apache-airflow'))")
    assert reported.returncode == 0 and reported.stdout.split()[-1:] == [PINNED[version]], tail(reported.stdout + reported.stderr)
    migrated = result.run("airflow", "db", "migrate")
    assert migrated.returncode == 0, f"airflow db migrate failed:\n{tail(migrated.stdout + migrated.stderr)}"
    return result
