"""Helpers of the scheduling tests (tests/scheduling): where things are, and how Airflow is called."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
AIRFLOW_ENV = ROOT / "scripts" / "airflow-env.sh"
DAGS = ROOT / "dags"
#: The Airflow versions the DAG is tested on, as scripts/airflow-env.sh's NSREPLAY_AIRFLOW names them
#: ("3", the default, and "2"), each with the apache-airflow release conf/airflow pins for it.
PINNED = {
    version: re.search(r"(?m)^apache-airflow==(\S+)$", (ROOT / "conf" / "airflow" / name).read_text()).group(1)
    for version, name in (("3", "requirements.txt"), ("2", "requirements-2.txt"))
}
AIRFLOW3 = pytest.param("3", id="airflow3")
AIRFLOW2 = pytest.param("2", id="airflow2")
#: ``@pytest.mark.parametrize("airflow", AIRFLOW_VERSIONS, indirect=True)``: the test runs on both.
AIRFLOW_VERSIONS = [AIRFLOW3, AIRFLOW2]


@dataclass(frozen=True)
class Airflow:
    """A usable Airflow installation and home; ``run`` calls a command inside the Airflow venv."""

    home: Path
    env: dict[str, str]

    def run(self, *args: str, extra_env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
        env = {**self.env, **(extra_env or {})}
        return subprocess.run([str(AIRFLOW_ENV), *args], env=env, cwd=self.home, capture_output=True, text=True, timeout=timeout)


def environment(home: Path, version: str = "3") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "NSREPLAY_", "PYSPARK_"))}
    env.update({
        "NSREPLAY_AIRFLOW": version,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
        "PYTHONWARNINGS": "ignore",
    })
    return env


def tail(text: str, lines: int = 15) -> str:
    kept = [line for line in text.splitlines() if not line.startswith("WARNING: Location")]
    return "\n".join(kept[-lines:])
