"""interfaces.md §1: "non-zero with a one-line reason on standard error on failure" also through
``./spark-submit.sh``, whose PythonRunner merges the job's stderr into stdout."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_a_failing_job_run_through_spark_submit_says_why_on_stderr(tmp_path) -> None:
    result = subprocess.run(
        [str(ROOT / "spark-submit.sh"), "jobs/rebuild_routes.py", "--captures", str(tmp_path / "nothing-here"), "--warehouse", str(tmp_path / "wh")],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode != 0
    last = [line for line in result.stderr.splitlines() if line.strip()][-1]
    assert last.startswith("rebuild_routes.py: ") and "nothing-here" in last, result.stderr[-2000:]
    assert not (tmp_path / "wh").exists(), "a wrong capture path must fail before the warehouse is touched"
