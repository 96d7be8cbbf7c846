"""Helpers of the scheduling tests (tests/scheduling): where things are, and how Airflow is called."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
AIRFLOW_ENV = ROOT / "scripts" / "airflow-env.sh"
DAGS = ROOT / "dags"


@dataclass(frozen=True)
class Airflow:
    """A usable Airflow installation and home; ``run`` calls a command inside the Airflow venv."""

    home: Path
    env: dict[str, str]

    def run(self, *args: str, extra_env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
        env = {**self.env, **(extra_env or {})}
        return subprocess.run([str(AIRFLOW_ENV), *args], env=env, cwd=self.home, capture_output=True, text=True, timeout=timeout)


def environment(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "NSREPLAY_", "PYSPARK_"))}
    env.update({
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
