"""nsreplay.runtime.build_spark: a setting Spark refuses as a session starts is a SparkConfigError (exit 1,
a type the DAG does not retry), whatever exception Spark refuses it with; a failure to start that a
setting's check did not raise stays what it was (the DAG retries it).

The sessions start in a process of their own (the test session's JVM has its SparkContext): one JVM,
started by the first case, in which each case tries a session of its own settings in turn (a
SparkContext that fails to start leaves the JVM up for the next)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Tries build_spark with each case's settings; prints, a line each, [type, message] of the failure.
TRY_SESSIONS = """
import json, sys
from pyspark import SparkContext
from nsreplay.config import load_settings
from nsreplay.runtime import build_spark
for conf in json.loads(sys.argv[1]):
    try:
        build_spark(load_settings(), "refused-settings", conf=conf).stop()
        print(json.dumps(["started", ""]), flush=True)
    except Exception as exc:
        print(json.dumps([type(exc).__name__, " ".join(str(exc).split("\\n\\tat ")[0].split())[:400]]), flush=True)
        if SparkContext._active_spark_context is not None:  # the session's SQL state failed: its context is up
            SparkContext._active_spark_context.stop()
"""

REFUSED = "Spark refused its settings (spark-submit options, the DAG's spark_args, conf/<env>/spark-defaults.conf): "


def test_settings_spark_refuses_at_the_start_are_spark_configuration_errors_naming_them_and_other_failures_are_not(tmp_path) -> None:
    """``spark.task.cpus=0`` failed the session with "Py4JJavaError: ... JavaSparkContext. :
    java.lang.ArithmeticException: / by zero", more cpus per task than a local master's threads and
    ``local[0]`` with SparkException's words: none of them a type the DAG knows as final, so each
    was retried twice, to fail the same way. A session's SQL setting refused in words that name no
    setting (``spark.sql.broadcastTimeout=abc``) was not named: its converter's failure, asked
    again, came back as pyspark's own exception, which the check did not read. A negative
    ``spark.task.cpus`` started a session whose jobs never ran (the task hung until its timeout). A driver that cannot bind its address (not a setting's
    check: a network's state, which may change) stays a Py4JJavaError."""
    cases = [
        {"spark.master": "local[2]", "spark.task.cpus": "0"},
        {"spark.master": "local[2]", "spark.task.cpus": "3"},
        {"spark.master": "local[0]", "spark.task.cpus": "1"},
        # a session's SQL setting in words that name none: the setting whose own converter refuses its value so
        {"spark.master": "local[2]", "spark.task.cpus": "1", "spark.sql.broadcastTimeout": "abc"},
        # Spark takes it, and then runs no task: every job waits for ever
        {"spark.master": "local[2]", "spark.task.cpus": "-1", "spark.sql.broadcastTimeout": "300"},
        {"spark.master": "local[2]", "spark.task.cpus": "1", "spark.sql.broadcastTimeout": "300", "spark.driver.bindAddress": "192.0.2.222",
         "spark.port.maxRetries": "1"},
    ]
    result = subprocess.run([sys.executable, "-c", TRY_SESSIONS, json.dumps(cases)], cwd=tmp_path, capture_output=True, text=True,
                            timeout=300, env={**os.environ, "NSREPLAY_ENV": "test", "PYTHONPATH": str(ROOT)})
    said = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("[")]
    assert said[:5] == [
        ["SparkConfigError", REFUSED + "spark.master=local[2], spark.task.cpus=0: ArithmeticException: / by zero"],
        ["SparkConfigError", REFUSED + "spark.master=local[2], spark.task.cpus=3: SparkException: The number of cores per executor (=2) "
                                       "has to be >= the number of cpus per task = 3."],
        ["SparkConfigError", REFUSED + "spark.master=local[0]: SparkException: Asked to run locally with 0 threads"],
        ["SparkConfigError", REFUSED + "spark.sql.broadcastTimeout: NumberFormatException: Time must be specified as seconds (s), "
                                       "milliseconds (ms), microseconds (us), minutes (m or min), hour (h), or day (d). E.g. 50s, 100ms, "
                                       "or 250us. Failed to parse time string: abc"],
        ["SparkConfigError", REFUSED + "spark.task.cpus=-1: a task takes at least one cpu (Spark would start and run no task)"],
    ], result.stdout + result.stderr[-3000:]
    assert len(said) == 6 and said[5][0] == "Py4JJavaError" and "BindException" in said[5][1], said[5:]


#: Tries build_spark with each case's settings, each from a builder of its own settings only (PySpark's
#: builder is one object per process, which keeps the options of every session built before), and runs
#: a job of a range, a shuffle and a Python task in each session that starts; prints, a line each,
#: [type, message] of the failure, or ["ran", ""].
TRY_JOBS = """
import json, sys
from pyspark import SparkContext
from pyspark.sql import SparkSession
from nsreplay.config import load_settings
from nsreplay.runtime import build_spark
def passed_on(batches):
    yield from batches
for conf in json.loads(sys.argv[1]):
    SparkSession.builder._options.clear()
    try:
        spark = build_spark(load_settings(), "late-settings", conf=conf)
        spark.range(40).repartition(3).groupBy("id").count().mapInArrow(passed_on, "id long, count long").collect()
        spark.stop()
        print(json.dumps(["ran", ""]), flush=True)
    except Exception as exc:
        print(json.dumps([type(exc).__name__, " ".join(str(exc).split("\\n\\tat ")[0].split())[:600]]), flush=True)
        if SparkContext._active_spark_context is not None:
            SparkContext._active_spark_context.stop()
"""


def test_a_setting_spark_reads_only_when_a_job_needs_it_is_refused_as_the_session_starts(tmp_path) -> None:
    """Spark took ``spark.default.parallelism=abc`` as the session started and failed the first job
    that asked for the default parallelism ("NumberFormatException: Illegal value for config key
    spark.default.parallelism"), ``spark.python.worker.reuse=maybe`` the first Python task, a size
    of the shuffle the first shuffle, ``spark.locality.wait=soon`` the scheduler (every job of the
    session cancelled): errors the DAG retried, to fail the same way. Now each is a SparkConfigError
    as the session starts, naming the setting, its value and Spark's words; the values of the right
    kind, Spark's own spellings of them, still run the job."""
    # each case gives every setting, those it does not try with a value of the right kind: the first
    # session's settings are the JVM's (spark-submit's) for every later one
    right = {"spark.master": "local[2]", "spark.default.parallelism": "3", "spark.python.worker.reuse": " FALSE ",
             "spark.python.worker.faulthandler.enabled": "True", "spark.shuffle.file.buffer": "64k",
             "spark.shuffle.sort.bypassMergeThreshold": "100", "spark.reducer.maxSizeInFlight": "24m", "spark.locality.wait": "1s"}
    cases = [
        {**right, "spark.default.parallelism": "abc"},
        {**right, "spark.python.worker.reuse": "maybe"},
        {**right, "spark.python.worker.faulthandler.enabled": "1"},
        {**right, "spark.shuffle.file.buffer": "lots"},
        {**right, "spark.shuffle.sort.bypassMergeThreshold": "x"},
        {**right, "spark.reducer.maxSizeInFlight": "1.5m"},
        {**right, "spark.locality.wait": "soon"},
        right,
    ]
    result = subprocess.run([sys.executable, "-c", TRY_JOBS, json.dumps(cases)], cwd=tmp_path, capture_output=True, text=True,
                            timeout=300, env={**os.environ, "NSREPLAY_ENV": "test", "PYTHONPATH": str(ROOT)})
    said = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("[")]
    size = ("Size must be specified as bytes (b), kibibytes (k), mebibytes (m), gibibytes (g), tebibytes (t), or pebibytes(p). "
            "E.g. 50b, 100k, or 250m.")
    assert said == [
        ["SparkConfigError", REFUSED + 'spark.default.parallelism=abc: NumberFormatException: Illegal value for config key '
                                       'spark.default.parallelism: For input string: "abc"'],
        ["SparkConfigError", REFUSED + "spark.python.worker.reuse=maybe: IllegalArgumentException: spark.python.worker.reuse should be "
                                       "boolean, but was maybe"],
        ["SparkConfigError", REFUSED + "spark.python.worker.faulthandler.enabled=1: IllegalArgumentException: "
                                       "spark.python.worker.faulthandler.enabled should be boolean, but was 1"],
        ["SparkConfigError", REFUSED + f"spark.shuffle.file.buffer=lots: NumberFormatException: {size} Failed to parse byte string: lots"],
        ["SparkConfigError", REFUSED + "spark.shuffle.sort.bypassMergeThreshold=x: IllegalArgumentException: "
                                       "spark.shuffle.sort.bypassMergeThreshold should be int, but was x"],
        ["SparkConfigError", REFUSED + f"spark.reducer.maxSizeInFlight=1.5m: NumberFormatException: {size} Fractional values are not "
                                       "supported. Input was: 1.5"],
        ["SparkConfigError", REFUSED + "spark.locality.wait=soon: NumberFormatException: Time must be specified as seconds (s), "
                                       "milliseconds (ms), microseconds (us), minutes (m or min), hour (h), or day (d). E.g. 50s, 100ms, "
                                       "or 250us. Failed to parse time string: soon"],
        ["ran", ""],
    ], result.stdout + result.stderr[-3000:]


@pytest.mark.parametrize("setting, value, refused, jvm_said", [
    # refused by spark-submit's check of its arguments, before the driver JVM's gateway is up
    ("spark.executor.memory", "lots", "SparkException: Executor memory must be a positive number",
     'Exception in thread "main" org.apache.spark.SparkException: Executor memory must be a positive number'),
    # refused by spark-submit as it prepares the JVM's gateway: the setting's own converter
    ("spark.buffer.size", "x", "IllegalArgumentException: spark.buffer.size should be int, but was x",
     'Exception in thread "main" java.lang.IllegalArgumentException: spark.buffer.size should be int, but was x'),
    # refused by the driver JVM, which spark-submit's launcher gives spark.driver.memory as its heap
    ("spark.driver.memory", "lots", "spark.driver.memory: Invalid maximum heap size: -Xmxlots", "Invalid maximum heap size: -Xmxlots"),
])
def test_a_setting_refused_before_the_jvm_of_a_session_built_in_process_is_up_is_a_spark_configuration_error(
        tmp_path, setting, value, refused, jvm_said) -> None:
    """A session built in this process (``nsreplay`` commands, notebooks: build_spark starts the JVM
    through spark-submit, as PySpark does) with a setting that spark-submit or the driver JVM refuses
    ended with PySpark's "PySparkRuntimeError: [JAVA_GATEWAY_EXITED] Java gateway process exited
    before sending its port number.", which says nothing of why. Now it is the SparkConfigError that
    spark-submit.sh says for the same setting, with spark-submit's or the JVM's words; the JVM's own
    lines still reach stderr."""
    result = subprocess.run([sys.executable, "-c", TRY_SESSIONS, json.dumps([{setting: value}])], cwd=tmp_path, capture_output=True,
                            text=True, timeout=300, env={**os.environ, "NSREPLAY_ENV": "test", "PYTHONPATH": str(ROOT)})
    said = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("[")]
    assert said == [["SparkConfigError", REFUSED + refused]], result.stdout + result.stderr[-3000:]
    assert jvm_said in result.stderr.splitlines(), result.stderr[-3000:]
