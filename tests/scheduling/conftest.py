"""Fixtures of the scheduling tests: the pinned Airflow venv (.venv-airflow, built by
scripts/airflow-env.sh) and a throw-away AIRFLOW_HOME with a migrated sqlite database per module.

Airflow never runs inside the test process: its pins would fight the project's. Every Airflow call
is a subprocess of the Airflow venv. When the venv cannot be built because PyPI is unreachable the
tests are skipped with the reason, except under CI (env CI set), where that is a failure."""

from __future__ import annotations

import os
import subprocess
import urllib.request

import pytest

from scheduling_support import AIRFLOW_ENV, Airflow, environment, tail


def _pypi_reachable() -> bool:
    try:
        with urllib.request.urlopen("https://pypi.org/simple/pip/", timeout=15):
            return True
    except OSError:
        return False


@pytest.fixture(scope="session")
def airflow_venv(tmp_path_factory) -> None:
    """.venv-airflow, built on first use (a stamp makes later sessions instant)."""
    env = environment(tmp_path_factory.mktemp("airflow-build"))
    built = subprocess.run([str(AIRFLOW_ENV)], env=env, capture_output=True, text=True, timeout=1800)
    if built.returncode != 0:
        reason = f"cannot build the Airflow venv (scripts/airflow-env.sh): {tail(built.stderr, 5)}"
        if os.environ.get("CI") or _pypi_reachable():
            pytest.fail(reason)
        pytest.skip(f"PyPI unreachable; {reason}")


@pytest.fixture(scope="module")
def airflow(airflow_venv, tmp_path_factory) -> Airflow:
    """A fresh AIRFLOW_HOME (sqlite, `airflow db migrate`) whose dags folder is the project's dags/."""
    result = Airflow(home := tmp_path_factory.mktemp("airflow-home"), environment(home))
    migrated = result.run("airflow", "db", "migrate")
    assert migrated.returncode == 0, f"airflow db migrate failed:\n{tail(migrated.stdout + migrated.stderr)}"
    return result
