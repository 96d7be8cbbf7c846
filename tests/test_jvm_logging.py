"""The JVMs nsreplay starts log to stderr (nsreplay.jvm_logging, conf/base/log4j2.properties), so a
job's stdout holds only what the job prints: checked on the test session's JVM, on a session built
by ``build_spark`` in a fresh process and on a job run through ``./spark-submit.sh``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from datetime import datetime
from pathlib import Path

from nsreplay import jvm_logging

ROOT = Path(__file__).resolve().parents[1]
MARKER = "nsreplay-jvm-logging-probe"
# A JVM log line (an error: build_spark lowers the level to errors once the session runs), then a
# line of the job's own: the log line must reach stderr only.
PROBE = f"""
spark._jvm.org.apache.logging.log4j.LogManager.getLogger("nsreplay.probe").error("{MARKER}")
print("the job's own line")
"""


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != jvm_logging.ENV}
    env.update(PYSPARK_PYTHON=sys.executable, NSREPLAY_ROOT=str(ROOT))
    return env


def test_configure_names_the_project_file_unless_one_is_named() -> None:
    environ: dict[str, str] = {}
    assert jvm_logging.configure(environ) == str(jvm_logging.CONFIG_FILE)
    assert environ == {jvm_logging.ENV: str(jvm_logging.CONFIG_FILE)}
    assert jvm_logging.CONFIG_FILE.is_file()
    mine = {jvm_logging.ENV: "/etc/my-log4j2.xml"}
    assert jvm_logging.configure(mine) == "/etc/my-log4j2.xml"
    assert mine == {jvm_logging.ENV: "/etc/my-log4j2.xml"}


def test_the_session_jvm_reads_the_project_file(spark) -> None:
    context = spark._jvm.org.apache.logging.log4j.LogManager.getContext(False)
    location = context.getConfiguration().getConfigurationSource().getLocation()
    assert location == jvm_logging.configure(dict(os.environ))


def test_a_session_built_from_python_keeps_jvm_warnings_off_stdout(tmp_path) -> None:
    script = tmp_path / "probe.py"
    script.write_text(
        "from nsreplay.config import load_settings\nfrom nsreplay.runtime import build_spark\n"
        'spark = build_spark(load_settings(), "probe", master="local[1]")\n'
        "context = spark._jvm.org.apache.logging.log4j.LogManager.getContext(False)\n"
        "print(context.getConfiguration().getConfigurationSource().getLocation())\n" + textwrap.dedent(PROBE)
    )
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=_clean_env(), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines() == [str(jvm_logging.CONFIG_FILE), "the job's own line"], result.stdout[-2000:]
    assert MARKER in result.stderr
    assert not [line for line in result.stderr.splitlines() if " INFO " in line], result.stderr[-2000:]


def test_a_job_run_through_spark_submit_keeps_jvm_warnings_off_stdout(tmp_path) -> None:
    script = tmp_path / "probe.py"
    script.write_text("from pyspark.sql import SparkSession\nspark = SparkSession.builder.getOrCreate()\n" + textwrap.dedent(PROBE))
    result = subprocess.run(
        [str(ROOT / "spark-submit.sh"), "--master", "local[1]", str(script)],
        cwd=ROOT, env=_clean_env(), capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines() == ["the job's own line"], result.stdout[-2000:]
    assert MARKER in result.stderr
    assert not [line for line in result.stderr.splitlines() if " INFO " in line], result.stderr[-2000:]


def test_jvm_log_lines_say_utc_times_whatever_the_machines_time_zone(tmp_path) -> None:
    """The job prints its times in UTC (``...Z``); its JVM's log lines did in the machine's zone,
    unlabelled (``26/11/30 18:19:50 WARN ...`` under TZ=Pacific/Chatham, 05:19 UTC)."""
    script = tmp_path / "probe.py"
    script.write_text("from pyspark.sql import SparkSession\nspark = SparkSession.builder.getOrCreate()\n" + textwrap.dedent(PROBE))
    env = {**_clean_env(), "TZ": "Pacific/Chatham", "JAVA_TOOL_OPTIONS": "-Duser.timezone=America/St_Johns"}
    before = time.time()
    result = subprocess.run([str(ROOT / "spark-submit.sh"), "--master", "local[1]", str(script)],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    after = time.time()
    assert result.returncode == 0, result.stderr[-2000:]
    line = next(line for line in result.stderr.splitlines() if MARKER in line)
    stamp = line.split(" ", 1)[0]
    assert stamp.endswith("Z"), line
    logged = datetime.fromisoformat(stamp[:-1] + "+00:00").timestamp()
    assert before - 1 <= logged <= after + 1, line
