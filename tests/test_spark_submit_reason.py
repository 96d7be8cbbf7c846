"""interfaces.md §1: "non-zero with a one-line reason on standard error on failure" also through
``./spark-submit.sh``, whose PythonRunner merges the job's stderr into stdout."""

from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
import time
from pathlib import Path

import pytest

from interrupts import ctrl_c_at_import, default_sigint

ROOT = Path(__file__).resolve().parents[1]


def run_job_through_spark_submit(tmp_path: Path, name: str, source: str, *options: str) -> tuple[subprocess.CompletedProcess, str]:
    """Write the job ``source`` as ``name`` in ``tmp_path`` and run it through ``./spark-submit.sh``
    (with its ``options`` first; conf/test's short-lived JVMs): the result and stderr's last line."""
    job = tmp_path / name
    job.write_text(source)
    result = subprocess.run([str(ROOT / "spark-submit.sh"), *options, str(job)], cwd=ROOT, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "NSREPLAY_ENV": "test"})
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    return result, lines[-1] if lines else ""


def test_a_failing_job_run_through_spark_submit_says_why_on_stderr(tmp_path) -> None:
    result = subprocess.run(
        [str(ROOT / "spark-submit.sh"), "jobs/rebuild_routes.py", "--captures", str(tmp_path / "nothing-here"), "--warehouse", str(tmp_path / "wh")],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode != 0
    last = [line for line in result.stderr.splitlines() if line.strip()][-1]
    assert last.startswith("rebuild_routes.py: ") and "nothing-here" in last, result.stderr[-2000:]
    assert not (tmp_path / "wh").exists(), "a wrong capture path must fail before the warehouse is touched"


def test_a_job_ended_by_ctrl_c_says_interrupted_whatever_reason_it_wrote(tmp_path) -> None:
    """Status 130 is a Ctrl-C's. One that comes while the JVM or the Spark session starts (the first
    seconds of every job) may end the JVM before the job writes its reason, or the job may write the
    lost JVM as its failure ("Py4JError: An error occurred while calling None.org.apache.spark.sql
    .classic.SparkSession"): stderr's last line was that, or a JVM warning, not "interrupted"."""
    job = tmp_path / "stopped_job.py"
    job.write_text(
        "import os, sys\n"
        "with open(os.environ['NSREPLAY_REASON_FILE'], 'w') as out:\n"
        "    out.write('stopped_job.py: Py4JError: An error occurred while calling None.org.apache.spark.sql.classic.SparkSession\\n')\n"
        "sys.exit(130)\n"
    )
    result = subprocess.run([str(ROOT / "spark-submit.sh"), str(job)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 130, result.stderr[-2000:]
    last = [line for line in result.stderr.splitlines() if line.strip()][-1]
    assert last == "stopped_job.py: interrupted", result.stderr[-2000:]


@pytest.mark.parametrize(
    "module, token, said",
    [
        # the bootstrap's check of the driver's class archive (a minute the first time)
        ("nsreplay.jvm_archive", "build", "spark-submit.sh: interrupted"),
        # spark-submit.sh's helpers: the JVM's locale, then those that build spark-submit's options
        ("nsreplay.jvm_locale", "nsreplay.jvm_locale", "spark-submit.sh: interrupted"),
        ("nsreplay.local_fs", "nsreplay.local_fs", "rebuild_routes.py: interrupted"),
        ("nsreplay.jvm_archive", "args", "rebuild_routes.py: interrupted"),
        # the job's own imports, under spark-submit (its JVM sent the same SIGINT)
        ("pyspark", "rebuild_routes.py", "rebuild_routes.py: interrupted"),
    ],
)
def test_a_ctrl_c_before_the_job_runs_ends_it_as_interrupted(tmp_path, module, token, said) -> None:
    """A Ctrl-C in the first seconds of ``./spark-submit.sh`` (the bootstrap, the helpers that build
    spark-submit's options, the job's imports) cut a Python helper short: its KeyboardInterrupt
    traceback, the script killed by the signal with no reason, or spark-submit's "Invalid properties
    file" once the script had removed the file under a helper. Now it ends with one line, status 130,
    and spark-submit is not started after a helper was interrupted."""
    env = ctrl_c_at_import(tmp_path, module, token)
    result = subprocess.run([str(ROOT / "spark-submit.sh"), "jobs/rebuild_routes.py", "--warehouse", str(tmp_path / "wh")],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, start_new_session=True, preexec_fn=default_sigint)
    assert (tmp_path / "ctrl-c-sent").exists(), "the Ctrl-C was not sent"
    # the JVM's own warnings may come first (it starts only for the job's case); nothing else may
    said_lines = [line for line in result.stderr.splitlines() if line.strip() and " WARN " not in line and "incubator modules" not in line]
    assert (result.returncode, said_lines) == (130, [said]), result.stderr[-3000:]
    assert "Traceback" not in result.stdout, result.stdout[-3000:]
    assert not (tmp_path / "wh").exists()


def test_a_driver_jvm_that_runs_out_of_memory_says_so_and_names_the_setting(tmp_path) -> None:
    """With a local master the tasks run in the driver JVM: a task short of heap made Spark end that
    JVM with status 52, the job's Python with it, before the job wrote its reason. stderr ended with
    the JVM's own lines (bench-day at spark.driver.memory=512m: 477 lines, 370 of them stack frames,
    the last a task's abort) and named nothing to change. Now its last line says what ran out and
    the setting to raise."""
    # an array of 300 million longs (2.4 GB) in a task: not a constant, so not built by the planner
    result, last = run_job_through_spark_submit(
        tmp_path, "greedy_job.py",
        "import sys\n"
        "from nsreplay.config import load_settings\n"
        "from nsreplay.runtime import build_spark, guarded\n"
        "@guarded\n"
        "def main(argv=None):\n"
        "    build_spark(load_settings(), 'greedy').range(1).selectExpr('size(sequence(1L, id + 300000000L))').collect()\n"
        "    return 0\n"
        "sys.exit(main())\n",
        "--driver-memory", "512m",
    )
    assert (result.returncode, last) == (52, (
        "greedy_job.py: the Spark driver JVM ran out of memory (java.lang.OutOfMemoryError: Spark ended it with status 52; "
        "its lines above say where): raise spark.driver.memory (now 512m) with --driver-memory or in conf/<env>/spark-defaults.conf"
    )), result.stderr[-3000:]


def test_a_python_worker_killed_during_a_task_is_named_as_such(tmp_path) -> None:
    """The kernel's out-of-memory killer sends a Python worker SIGKILL in the middle of a task (simulated:
    the task kills its own worker). The job's line was Spark's whole account, cut at 500 characters:
    "Python worker exited unexpectedly (crashed). Consider setting '...faulthandler.enabled'", and
    "(caused by java.io.IOException: Broken pipe)", which misleads. Now it says that a worker died
    and how, without the hint and the pipe."""
    result, last = run_job_through_spark_submit(
        tmp_path, "killed_worker_job.py",
        "import os, signal, sys\n"
        "from nsreplay.config import load_settings\n"
        "from nsreplay.runtime import build_spark, guarded\n"
        "def killed(batches):\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "    yield from batches\n"
        "@guarded\n"
        "def main(argv=None):\n"
        "    spark = build_spark(load_settings(), 'killed-worker')\n"
        "    spark.range(1).mapInArrow(killed, 'id long').collect()\n"
        "    return 0\n"
        "sys.exit(main())\n",
    )
    assert result.returncode == 1, result.stderr[-3000:]
    assert last.startswith("killed_worker_job.py: a Python worker of Spark died during a task (killed, as the kernel's out-of-memory killer "
                           "does when memory runs short, or crashed): Py4JJavaError: "), last
    assert last.endswith(": org.apache.spark.SparkException: Python worker exited unexpectedly (crashed)."), last


def test_a_java_that_cannot_start_for_want_of_memory_is_said_not_silent(tmp_path) -> None:
    """Under an address-space limit (``ulimit -v``, ``prlimit --as``; a small VM without overcommit
    behaves alike) ``java -version`` cannot start a JVM: the bootstrap's check of the JDK read its
    version through a pipe under ``set -o pipefail``, and the script ended there with status 1 and
    nothing on stdout or stderr. Now it says that java cannot start, with the JVM's own reason."""
    limit = 3_000_000_000  # the JVM reserves 1 GB of class space and its heap up front: more than this leaves

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    result = subprocess.run([str(ROOT / "spark-submit.sh"), "jobs/rebuild_routes.py", "--warehouse", str(tmp_path / "wh")], cwd=ROOT,
                            capture_output=True, text=True, timeout=120, preexec_fn=limited)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 1 and len(lines) == 1, (result.returncode, result.stderr[-3000:])
    assert re.fullmatch(r"spark-submit\.sh: \S*java cannot start a JVM \(too little memory or address space for it\? ulimit -v\): "
                        r"Error occurred during initialization of VM; .+", lines[0]), lines[0]
    assert not (tmp_path / "wh").exists()


def test_a_driver_jvm_killed_under_the_job_is_said_with_the_signal(tmp_path) -> None:
    """The kernel's out-of-memory killer picks the largest process, the driver JVM (simulated: the job
    sends it SIGKILL). The script's stderr ended with bash's own "line 122: 630 Killed
    "$VENV/bin/spark-submit" ...", status 137, when the job had not said why before it went."""
    result, last = run_job_through_spark_submit(
        tmp_path, "killed_jvm_job.py",
        "import os, signal, sys, time\n"
        "from nsreplay.config import load_settings\n"
        "from nsreplay.runtime import build_spark\n"
        "spark = build_spark(load_settings(), 'killed-jvm')\n"
        "os.kill(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid(), signal.SIGKILL)\n"
        "time.sleep(3)\n"
        "os._exit(1)\n",
    )
    assert (result.returncode, last) == (137, (
        "killed_jvm_job.py: the Spark driver JVM was killed by SIGKILL (status 137; the kernel's out-of-memory killer sends SIGKILL "
        "to the largest process when memory runs short, and dmesg names it; spark.driver.memory is 4g)"
    )), result.stderr[-3000:]


@pytest.mark.parametrize("setting, refused", [
    # a spark.sql setting: Spark checks it as the session's SQL state is made, lazily, at the first query
    ("spark.sql.shuffle.partitions=abc", "IllegalArgumentException: spark.sql.shuffle.partitions should be int, but was abc"),
    # a core setting: the SparkContext refuses it (Py4JJavaError on JavaSparkContext), in words that name no
    # setting: the line names it (the one given value that its setting refuses with those very words)
    ("spark.driver.maxResultSize=abc", "spark.driver.maxResultSize: NumberFormatException: Size must be specified as bytes (b), kibibytes (k), mebibytes (m), "
                                       "gibibytes (g), tebibytes (t), or pebibytes(p). E.g. 50b, 100k, or 250m. Failed to parse byte string: abc"),
    # the SparkContext's check of a task's cores against the master's: not an IllegalArgumentException, and
    # words that name no setting (the line names the settings the check reads, as given)
    ("spark.task.cpus=0", "spark.master=local[*], spark.task.cpus=0: ArithmeticException: / by zero"),
    # refused by spark-submit itself, before the job runs (its own words, from its stderr)
    ("spark.executor.memory=lots", "SparkException: Executor memory must be a positive number"),
    # refused by spark-submit as it prepares the job: the setting's own converter (Hadoop's io.file.buffer.size is made from it)
    ("spark.buffer.size=x", "IllegalArgumentException: spark.buffer.size should be int, but was x"),
    # a --conf without a value, refused by spark-submit's launcher as it reads its options
    ("spark.executor.memory", "Invalid argument to --conf: spark.executor.memory"),
    # refused by the driver JVM, which the launcher gives spark.driver.memory as its heap
    ("spark.driver.memory=lots", "spark.driver.memory: Invalid maximum heap size: -Xmxlots"),
    # taken by Spark, which reads them only when a job needs them (nsreplay.late_settings): refused as the session starts
    ("spark.default.parallelism=abc", 'spark.default.parallelism=abc: NumberFormatException: Illegal value for config key '
                                      'spark.default.parallelism: For input string: "abc"'),
    ("spark.python.worker.reuse=maybe", "spark.python.worker.reuse=maybe: IllegalArgumentException: spark.python.worker.reuse should be "
                                        "boolean, but was maybe"),
])
def test_a_setting_spark_refuses_is_named_as_a_spark_configuration_error(tmp_path, setting, refused) -> None:
    """A value Spark cannot parse (a mistyped --conf, the DAG's spark_args, conf/<env>/spark-defaults.conf)
    ended the real job with "IllegalArgumentException: Error while instantiating
    'org.apache.spark.sql.internal.SessionStateBuilder':", which does not say what is wrong, or
    "Py4JJavaError: An error occurred while calling None.org.apache.spark.api.java.JavaSparkContext",
    neither of which the DAG knows as a failure that the same settings meet again; spark.task.cpus=0
    ended it with "Py4JJavaError: ... java.lang.ArithmeticException: / by zero", and the settings
    spark-submit or the driver JVM refuse before the job runs (spark.executor.memory=lots,
    spark.driver.memory=lots) with "spark-submit ended with status 1 before the job said why". Now
    the line names Spark's own reason under one type, SparkConfigError, before any table is touched."""
    result = subprocess.run(
        [str(ROOT / "spark-submit.sh"), "--conf", setting, "jobs/ingest_captures.py", "--captures", str(tmp_path),
         "--warehouse", str(tmp_path / "wh"), "--run-id", "r1"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env={**os.environ, "NSREPLAY_ENV": "test"},
    )
    last = [line for line in result.stderr.splitlines() if line.strip()][-1]
    assert (result.returncode, last) == (1, "ingest_captures.py: SparkConfigError: Spark refused its settings (spark-submit options, "
                                             f"the DAG's spark_args, conf/<env>/spark-defaults.conf): {refused}"), result.stderr[-3000:]
    assert not (tmp_path / "wh").exists()


#: A job that writes ``lines`` lines of 1 KiB to its driver JVM's stderr (as Spark's own logging does,
#: for hours), then prints the size of the largest file in spark-submit.sh's temporary directory (its
#: own files are there: the reason file's), then waits ``wait`` seconds.
NOISY_JOB = """
import glob, os, sys, time
from nsreplay.config import load_settings
from nsreplay.runtime import build_spark
lines, wait = int(sys.argv[1]), float(sys.argv[2])
spark = build_spark(load_settings(), "noisy")
err = spark.sparkContext._jvm.java.lang.System.err
err.print("".join(f"line {i:07d} " + "x" * 1010 + "\\n" for i in range(lines)))
err.flush()
time.sleep(2)  # what spark-submit.sh keeps of stderr has what it was sent
here = os.path.dirname(os.environ["NSREPLAY_REASON_FILE"])
print("largest", max(os.path.getsize(p) for p in glob.glob(os.path.join(here, "*")) if os.path.isfile(p)), flush=True)
time.sleep(wait)
"""


def test_what_spark_submit_sh_keeps_of_a_long_stderr_is_capped_and_the_stderr_passed_on_whole(tmp_path) -> None:
    """spark-submit.sh copied spark-submit's stderr to a temporary file whole, to find a setting
    spark-submit refused there: a job that logs a lot to stderr for hours filled it without bound
    (20 MiB of stderr, a 20 MiB file). Now at most its first and last 64 KiB are kept, in memory
    until spark-submit ends, and the stderr the script passes on is still all of it."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    (tmp_path / "noisy_job.py").write_text(NOISY_JOB)
    result = subprocess.run([str(ROOT / "spark-submit.sh"), str(tmp_path / "noisy_job.py"), "8192", "0"], cwd=ROOT, capture_output=True,
                            text=True, timeout=300, env={**os.environ, "NSREPLAY_ENV": "test", "TMPDIR": str(temp)})
    assert result.returncode == 0, result.stderr[-3000:]
    largest = [int(line.split()[1]) for line in result.stdout.splitlines() if line.startswith("largest ")]
    assert len(largest) == 1 and largest[0] <= 2 * 64 * 1024 + 100, (largest, result.stdout[-2000:])
    passed = [line for line in result.stderr.splitlines() if line.startswith("line ")]
    assert passed == [f"line {i:07d} " + "x" * 1010 for i in range(8192)], len(passed)
    assert [p.name for p in temp.iterdir() if p.is_file()] == []


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_spark_submit_sh_leaves_no_temporary_file_when_stopped(tmp_path, stop) -> None:
    """Airflow stops a task with SIGTERM to its process group, a user with Ctrl-C (SIGINT): the
    script's temporary files (its properties, the job's reason, the kept ends of spark-submit's
    stderr) are removed either way, and the copy of stderr, which ends after the script, does not
    write its file again."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    (tmp_path / "noisy_job.py").write_text(NOISY_JOB)
    script = subprocess.Popen([str(ROOT / "spark-submit.sh"), str(tmp_path / "noisy_job.py"), "256", "300"], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True,
                              preexec_fn=default_sigint, env={**os.environ, "NSREPLAY_ENV": "test", "TMPDIR": str(temp)})
    try:
        for line in script.stdout:
            if line.startswith("largest "):
                break
        assert [p for p in temp.iterdir() if p.is_file()], "the script's files are there while the job runs"
        os.killpg(script.pid, stop)
        script.wait(120)
    finally:
        if script.poll() is None:
            os.killpg(script.pid, signal.SIGKILL)
            script.wait()
    time.sleep(3)  # the copy of stderr ends once the JVM has
    assert [p.name for p in temp.iterdir() if p.is_file()] == []
