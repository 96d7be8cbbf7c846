"""interfaces.md §1: a failure is a non-zero exit with a one-line reason on stderr, usage errors
included (argparse alone would print its usage block first)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

from nsreplay import cli
from nsreplay.generator import cli as generator_cli
from interrupts import ctrl_c_at_import, default_sigint

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "argv",
    [
        ["--no-such-option"],
        ["serve", "--warehouse", "w", "--http-port", "abc"],
        ["backfill", "--warehouse", "w", "--from", "start", "--extra"],
        ["no-such-command"],
    ],
)
def test_a_usage_error_of_nsreplay_is_one_line_and_exit_2(argv, capsys) -> None:
    assert cli.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    # the prefix is the program's name (pytest's here); the reason says where to ask for help
    assert len(lines) == 1 and " (see nsreplay" in lines[0] and lines[0].endswith(" --help)"), err


@pytest.mark.parametrize("job", ["rebuild_routes.py", "ingest_captures.py"])
def test_a_usage_error_of_a_job_is_one_line_and_exit_2(job) -> None:
    result = subprocess.run([sys.executable, f"jobs/{job}", "--captures", "x", "--bogus", "1"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [f"{job}: unrecognized arguments: --bogus 1 (see {job} --help)"], result.stderr


@pytest.mark.parametrize("argv", [["--bogus"], ["--start", "yesterday"], ["--workers", "two"]])
def test_a_usage_error_of_the_standalone_generator_is_one_line_and_exit_2(argv, capsys) -> None:
    assert generator_cli.main(argv) == 2
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert out == "" and len(lines) == 1 and lines[0].endswith(" (see nsreplay generate --help)"), err


@pytest.mark.parametrize(
    "argv",
    [
        ["bench", "serve", "--warehouse", "w", "--rate", "0"],
        ["bench", "serve", "--warehouse", "w", "--duration", "nan"],
        ["bench", "incremental", "--captures", "x", "--rounds", "0"],
        ["bench", "scale", "--hours", "-1"],
        ["bench", "rebuild", "--captures", "x", "--samples", "-5"],
    ],
)
def test_arguments_out_of_their_range_are_usage_errors(argv, capsys) -> None:
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and " (see nsreplay" in err, err


@pytest.mark.parametrize(
    "argv, reason",
    [
        (["ingest", "--captures", "x", "--run-id", "a\nb"], "argument --run-id: a run id is printable text"),  # would split the summary
        (["ingest", "--captures", "x", "--run-id", ""], "argument --run-id: a run id cannot be empty"),
        (["stale", "--warehouse", ""], "an empty path: ''"),
        (["vacuum", "--warehouse", " ", "--dry-run"], "an empty path: ' '"),
        (["vacuum", "--warehouse", "w", "--retention-hours", "10000000000000000000000"], "is more than a century"),
        (["serve", "--warehouse", "w", "--reload-interval", "nan"], "--reload-interval must be a number of seconds >= 0, got nan"),
        (["serve", "--warehouse", "w", "--host", "999.1.1.1"], "--host 999.1.1.1: "),
        (["serve", "--warehouse", "w", "--host", "[::1"], "--host [::1: "),  # brackets are an IPv6 address's, whole
        (["serve", "--warehouse", "w", "--host", "[127.0.0.1]"], "--host [127.0.0.1]: "),
        (["serve", "--warehouse", "w", "--host", ""], "--host '': an empty address; give the one to bind"),
        (["serve", "--warehouse", "w", "--host", "[]"], "--host '[]': an empty address"),
    ],
)
def test_bad_values_fail_before_anything_is_read_with_one_line(argv, reason, capsys) -> None:
    assert cli.main(argv) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and reason in lines[0], lines


def test_an_empty_path_given_to_a_job_is_refused_not_taken_for_the_default(tmp_path) -> None:
    """``--captures ""`` is not "no captures" (the demo capture), ``--warehouse ""`` not the project root."""
    for args in (["--captures", ""], ["--captures", str(tmp_path), "--warehouse", ""]):
        result = subprocess.run([sys.executable, "jobs/rebuild_routes.py", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert (result.returncode, result.stderr.splitlines()) == (2, ["rebuild_routes.py: an empty path: ''"]), result.stderr


def test_maintenance_commands_refuse_a_warehouse_whose_tables_are_not_nsreplays(tmp_path, capsys) -> None:
    """Another tool's Delta table at one of nsreplay's table paths: no command reads, rewrites or
    vacuums it (a vacuum would delete the other tool's untracked files)."""
    import os

    import deltalake
    import pyarrow as pa

    root = tmp_path / "foreign"
    deltalake.write_deltalake(str(root / "silver" / "events"), pa.table({"a": [1, 2]}))
    notes = root / "silver" / "events" / "users-notes.txt"
    notes.write_text("mine")
    os.utime(notes, (0, 0))  # older than any retention
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    for argv in (["vacuum"], ["vacuum", "--dry-run"], ["stale"], ["compact", "--dry-run"], ["compact"], ["thin-states"], ["serve"]):
        assert cli.main([*argv, "--warehouse", str(root)]) == 1, argv
        lines = capsys.readouterr().err.splitlines()
        assert len(lines) == 1 and "not an nsreplay warehouse: its table silver.events is not nsreplay's" in lines[0], (argv, lines)
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before


def test_a_failure_after_ctrl_c_is_reported_as_interrupted(monkeypatch, capsys) -> None:
    """PySpark turns Ctrl-C into the failure of the JVM call the main thread waited on (a Py4JError):
    once a SIGINT was seen, the command says "interrupted" and exits 130, as for a KeyboardInterrupt."""
    import signal
    import threading

    from nsreplay import runtime

    monkeypatch.setattr(runtime, "_INTERRUPTED", threading.Event())
    previous = signal.getsignal(signal.SIGINT)

    def pyspark_like(signum, frame):  # what PySpark's handler does, less the job cancelling
        raise KeyboardInterrupt

    @runtime.guarded
    def main(argv):
        try:
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt:
            raise RuntimeError("An error occurred while calling o497.count") from None
        return 0

    try:
        signal.signal(signal.SIGINT, pyspark_like)
        runtime._note_interrupts()  # as build_spark does once the session (and PySpark's handler) is up
        assert main([]) == 130
    finally:
        signal.signal(signal.SIGINT, previous)
    assert capsys.readouterr().err.splitlines()[-1].endswith(": interrupted")


def test_a_ctrl_c_while_the_spark_session_starts_is_reported_as_interrupted(monkeypatch, capsys) -> None:
    """Before the session is up (its JVM starting, a few seconds of every job) no handler of ours
    noted a Ctrl-C: py4j turned the KeyboardInterrupt that cut its call short into a Py4JError, and
    the command reported that ("Py4JError: An error occurred while calling None.org.apache.spark.sql
    .classic.SparkSession") instead of "interrupted", with status 1."""
    import signal
    import threading

    from nsreplay import runtime

    monkeypatch.setattr(runtime, "_INTERRUPTED", threading.Event())
    previous = signal.getsignal(signal.SIGINT)

    @runtime.guarded
    def main(argv):
        try:  # what py4j does with a KeyboardInterrupt during a call to the JVM
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt:
            raise RuntimeError("An error occurred while calling None.org.apache.spark.sql.classic.SparkSession") from None
        return 0

    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # Python's own, as in a fresh command
        assert main([]) == 130
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back afterwards
    finally:
        signal.signal(signal.SIGINT, previous)
    assert capsys.readouterr().err.splitlines()[-1].endswith(": interrupted")


def test_py4j_and_pyspark_reports_of_what_a_ctrl_c_cut_short_are_left_out(monkeypatch) -> None:
    """After a Ctrl-C py4j may also log, with its traceback, the closing of the connection the cut
    call used (on its logger ``py4j.clientserver``, which a filter on the root logger does not see),
    and PySpark warns that the JVM, sent the same SIGINT, did not stop cleanly (``py.warnings``):
    under spark-submit both landed on stdout before "interrupted". Other records still pass."""
    import logging
    import signal
    import threading

    from nsreplay import runtime

    monkeypatch.setattr(runtime, "_INTERRUPTED", threading.Event())
    previous = signal.getsignal(signal.SIGINT)
    seen: list[logging.LogRecord] = []
    catch = logging.Handler()
    catch.emit = seen.append  # type: ignore[method-assign]
    logging.getLogger().addHandler(catch)
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        runtime._note_interrupts()
        runtime._INTERRUPTED.set()  # a Ctrl-C was seen
        try:
            raise BrokenPipeError(32, "Broken pipe")
        except BrokenPipeError:
            logging.getLogger("py4j.clientserver").exception("Exception occurred while shutting down connection")
        logging.getLogger("py.warnings").warning(
            "context.py:687: RuntimeWarning: Unable to cleanly shutdown Spark JVM process. It is possible that the process has crashed")
        logging.exception("KeyboardInterrupt while sending command.")
        logging.getLogger("py4j.clientserver").error("another failure")
    finally:
        signal.signal(signal.SIGINT, previous)
        logging.getLogger().removeHandler(catch)
    assert [r.getMessage() for r in seen] == ["another failure"]


INTERRUPTED_JOB = """
import sys
from nsreplay.config import load_settings
from nsreplay.runtime import build_spark, guarded

@guarded
def main(argv):
    spark = build_spark(load_settings(), "ctrl-c", master="local[1]")
    print("running", flush=True)
    spark.range(10 ** 13).selectExpr("sum(id * 7 % 13)").collect()  # hours
    print("finished", flush=True)
    return 0

sys.exit(main(None))
"""


def run_signalled(script: str, signal_it: Callable[[subprocess.Popen, str], None]) -> tuple[int, str, str]:
    """Run ``script`` (a Spark job) in a child process of its own session, call ``signal_it`` with the
    process and the first line it printed, 3 s later (the job under way), and return its status,
    stdout and stderr; the process group is killed if it has not ended 60 s after the signal."""
    import os
    import signal
    import time

    proc = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, env={**os.environ, "NSREPLAY_ENV": "test"})
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        time.sleep(3)
        signal_it(proc, first)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode, out, err


def test_ctrl_c_stops_a_spark_job_at_once() -> None:
    """Ctrl-C in a terminal (SIGINT to the process group) while the driver waits on a Spark job: the
    job is cancelled and the command ends "interrupted" with status 130. PySpark's own handler asked
    the JVM to cancel over the connection the main thread was waiting on: the call failed, py4j sent
    the waiting command again, and the job ran on to its end."""
    import os
    import signal

    def ctrl_c(proc: subprocess.Popen, first: str) -> None:
        assert first == "running\n"
        os.killpg(proc.pid, signal.SIGINT)

    status, out, err = run_signalled(INTERRUPTED_JOB, ctrl_c)
    assert status == 130, err[-3000:]
    assert "finished" not in out and err.splitlines()[-1].endswith(": interrupted"), err[-3000:]
    assert "Traceback" not in err, err[-3000:]  # neither py4j's retry nor its report of the call cut short


@pytest.mark.parametrize("stage", ["replay", "quality", "publish"])
def test_captures_given_to_a_stage_that_reads_none_is_refused_not_ignored(stage) -> None:
    """Only the ingest stage (or a whole run) reads ``--captures``; before, the others ignored it."""
    argv = [sys.executable, "jobs/rebuild_routes.py", "--captures", "captures/x", "--run-id", "r1", "--stage", stage]
    result = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"rebuild_routes.py: --stage {stage} reads no captures: --captures goes with --stage ingest (or no --stage)"
    ], result.stderr


def test_output_into_a_pipe_whose_reader_has_gone_ends_quietly() -> None:
    """``nsreplay … | head -1``: once the reader has gone, the command stops as a tool killed by
    SIGPIPE does (status 141), without a "BrokenPipeError" line on stderr."""
    import os

    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the command writes a byte
    try:
        result = subprocess.run([sys.executable, "-m", "nsreplay.cli", "generate", "--list-knobs"], cwd=ROOT,
                                stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    assert (result.returncode, result.stderr) == (141, "")


# what py4j renders for a failed Spark write (Py4JJavaError, wrapped by the storage layer): the
# headline, hundreds of frames, and the cause at the bottom
SPARK_WRITE_FAILURE = (
    "append to table 'silver.events' failed: An error occurred while calling o1363.parquet.\n"
    ": org.apache.spark.SparkException: [TASK_WRITE_FAILED] Task failed while writing rows to file:/w/silver/events/_staging/28d3. SQLSTATE: 58030\n"
    + "".join(f"\tat org.apache.spark.Frame{i}.run(Frame.scala:{i})\n" for i in range(300))
    + "Caused by: org.apache.spark.SparkException: [TASK_WRITE_FAILED] Task failed while writing rows.\n"
    "\tat org.apache.spark.Other.run(Other.scala:1)\n"
    "\tSuppressed: java.lang.IllegalStateException: a suppressed one\n"
    "\t\tat org.apache.spark.Other.run(Other.scala:2)\n"
    "\tCaused by: java.lang.RuntimeException: the suppressed one's cause\n"
    "Caused by: java.io.IOException: No space left on device\n"
    "\tat java.base/sun.nio.ch.FileDispatcherImpl.write0(Native Method)\n"
    "\t... 46 more\n"
)


def test_a_spark_failure_is_reported_with_its_root_cause(capsys) -> None:
    """A disk that filled up during an ingest: the one-line reason ended in the frames of the Java
    trace, cut at 500 characters, without the cause (``No space left on device``) that the trace's
    last ``Caused by:`` gives. Now the trace is cut at its first frame and its root cause added."""
    from nsreplay.runtime import guarded
    from nsreplay.storage import StorageError

    @guarded
    def main(argv):
        raise StorageError(SPARK_WRITE_FAILURE)

    assert main([]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].endswith(" (caused by java.io.IOException: No space left on device)"), lines[0]
    assert ": StorageError: append to table 'silver.events' failed: An error occurred while calling o1363.parquet. : " in lines[0]
    assert " at org.apache" not in lines[0] and "suppressed" not in lines[0], lines[0]


def test_a_lost_spark_jvm_is_named_as_such(capsys) -> None:
    """The JVM killed under a command (``kill -9``, the out-of-memory killer): the failing call's
    py4j network error was followed by ``spark.stop()`` failing in the command's ``finally``, and
    the command said only ``ConnectionRefusedError: [Errno 111] Connection refused``."""
    from py4j.protocol import Py4JNetworkError

    from nsreplay.runtime import guarded

    @guarded
    def main(argv):
        try:
            raise Py4JNetworkError("Answer from Java side is empty")
        finally:  # as spark.stop() in a job's finally
            raise ConnectionRefusedError(111, "Connection refused")

    assert main([]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and ": the Spark JVM is gone (killed, or it crashed" in lines[0], lines
    assert lines[0].endswith(": Py4JNetworkError: Answer from Java side is empty"), lines[0]


KILLED_JVM_JOB = """
import sys
from nsreplay.config import load_settings
from nsreplay.runtime import build_spark, guarded

@guarded
def main(argv):
    spark = build_spark(load_settings(), "killed-jvm", master="local[1]")
    try:
        print(spark.sparkContext._gateway.proc.pid, flush=True)
        spark.range(10 ** 13).selectExpr("sum(id * 7 % 13)").collect()  # hours
    finally:
        spark.stop()
    return 0

sys.exit(main(None))
"""


def test_a_spark_command_whose_jvm_is_killed_says_so_at_once() -> None:
    """``kill -9`` of the JVM of a command that runs Spark in-process (``nsreplay backfill``): the
    command ends at once, status 1, its last stderr line naming the lost JVM."""
    import os
    import signal

    status, _, err = run_signalled(KILLED_JVM_JOB, lambda proc, first: os.kill(int(first), signal.SIGKILL))
    assert status == 1, err[-3000:]
    assert ": the Spark JVM is gone (killed, or it crashed" in err.splitlines()[-1], err[-3000:]


def test_a_misspelt_environment_is_refused_not_run_on_the_base_settings(tmp_path) -> None:
    """``NSREPLAY_ENV=prdo`` ran on conf/base alone (its default warehouse, its Spark settings), as
    if no environment had been named. A named environment must have its folder; one without an
    ``nsreplay.toml`` is still an environment, and ``local``, the default, may be missing."""
    import os
    import shutil

    from nsreplay.config import ConfigError, load_settings

    conf = tmp_path / "conf"
    shutil.copytree(ROOT / "conf" / "base", conf / "base")
    (conf / "prod").mkdir()
    with pytest.raises(ConfigError, match=r"NSREPLAY_ENV=prdo: .*prdo is not a folder \(the environments of .*: prod\)"):
        load_settings("prdo", conf)
    assert load_settings("prod", conf).env == "prod"  # a folder without nsreplay.toml: base settings, on purpose
    assert load_settings(None, conf).env == "local"  # not named: local, whose folder this conf lacks
    done = subprocess.run([str(ROOT / ".venv" / "bin" / "nsreplay"), "thin-states", "--warehouse", str(tmp_path / "wh"), "--dry-run"],
                          env={**os.environ, "NSREPLAY_ENV": "prdo"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    assert done.returncode == 1 and done.stderr.splitlines() == [
        f"nsreplay: ConfigError: NSREPLAY_ENV=prdo: {ROOT / 'conf' / 'prdo'} is not a folder (the environments of {ROOT / 'conf'}: airflow, local, test)"
    ]



@pytest.mark.parametrize("job", ["rebuild_routes.py", "ingest_captures.py"])
def test_a_ctrl_c_while_a_job_loads_ends_it_as_interrupted(job, tmp_path) -> None:
    """A job's imports (PySpark, pyarrow, pandas, Great Expectations' loader) take a second or more
    before its ``main`` and :func:`~nsreplay.runtime.guarded` run: a Ctrl-C among them printed
    Python's ``KeyboardInterrupt`` traceback of the import it cut and killed the job by the signal.
    The Ctrl-C comes here as ``pyspark`` is imported (:func:`ctrl_c_at_import`)."""
    env = {**ctrl_c_at_import(tmp_path, "pyspark", job), "NSREPLAY_REASON_FILE": str(tmp_path / "reason")}
    result = subprocess.run([sys.executable, f"jobs/{job}", "--captures", "x"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
                            start_new_session=True, preexec_fn=default_sigint)
    assert result.returncode == 130, (result.returncode, result.stderr[-2000:])
    # as under spark-submit.sh: the line goes to its reason file only, which the script copies to its stderr
    assert result.stderr == "" and result.stdout == ""
    assert (tmp_path / "reason").read_text() == f"{job}: interrupted\n"


SESSION_CUT_SHORT = """
import logging, signal, sys
from nsreplay.runtime import guarded

@guarded
def main(argv):
    try:  # a Ctrl-C while the Spark session is built: py4j's call to the JVM cut short
        signal.raise_signal(signal.SIGINT)
    except KeyboardInterrupt:
        logging.exception("KeyboardInterrupt while sending command.")  # as py4j reports it
        raise RuntimeError("An error occurred while calling None.org.apache.spark.sql.classic.SparkSession") from None
    return 0

sys.exit(main(None))
"""


def test_py4j_report_of_the_session_call_a_ctrl_c_cut_short_is_left_out(tmp_path) -> None:
    """Before the session is up, py4j's report of the call a Ctrl-C cut short (with its traceback)
    was printed before "interrupted": the filter that leaves it out was installed with the session's
    handler only. Seen under spark-submit with a Ctrl-C 4.1-4.2 s into a job. In a process of its own:
    the filters are installed once per process."""
    job = tmp_path / "session_job.py"
    job.write_text(SESSION_CUT_SHORT)
    result = subprocess.run([sys.executable, str(job)], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120,
                            preexec_fn=default_sigint)  # a test runner's worker may ignore SIGINT, and its children with it
    assert (result.returncode, result.stderr, result.stdout) == (130, "session_job.py: interrupted\n", "")


def test_a_lost_python_worker_is_named_without_spark_s_hint_and_the_pipe(capsys) -> None:
    """Spark's account of a Python worker killed during a task (the out-of-memory killer): its hint
    (a fault handler, which a SIGKILL never reaches) and its root cause (the worker's pipe) are left out."""
    from nsreplay.runtime import guarded
    from nsreplay.storage import StorageError

    message = (
        "overwrite to table 'gold.route_changes' failed: An error occurred while calling o3311.parquet.\n"
        ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 3 in stage 82.0 failed 1 times, most recent failure: "
        "Lost task 3.0 in stage 82.0 (TID 133) (192.0.2.2 executor driver): org.apache.spark.SparkException: Python worker exited "
        "unexpectedly (crashed). Consider setting 'spark.sql.execution.pyspark.udf.faulthandler.enabled' or'spark.python.worker.faulthandler"
        ".enabled' configuration to 'true' for the better Python traceback.\n"
        "\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.read(PythonRunner.scala:612)\n"
        "Caused by: java.io.IOException: Connection reset by peer\n"
        "\tat java.base/sun.nio.ch.SocketDispatcher.read0(Native Method)\n"
    )

    @guarded
    def main(argv):
        raise StorageError(message)

    assert main([]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(": ", 1)[1] for line in lines] == [  # after the command's name
        "a Python worker of Spark died during a task (killed, as the kernel's out-of-memory killer does when memory "
        "runs short, or crashed): StorageError: overwrite to table 'gold.route_changes' failed: An error occurred while calling o3311.parquet. "
        ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 3 in stage 82.0 failed 1 times, most recent failure: "
        "Lost task 3.0 in stage 82.0 (TID 133) (192.0.2.2 executor driver): org.apache.spark.SparkException: Python worker exited unexpectedly (crashed)."
    ]


def test_a_python_worker_s_exception_is_reported_with_its_own_last_line(capsys) -> None:
    """A Python worker that ran out of memory (``spark.executor.pyspark.memory`` limits its address
    space): Spark's message holds the worker's whole traceback, and the one line, cut at 500
    characters, ended inside it, without ``MemoryError``, the line that says what went wrong."""
    from nsreplay.runtime import guarded

    traceback_text = "".join(
        f'  File "/p/pipelines/ingest/capture_reader.py", line {n}, in _raw_chunks\n    chunk = stream.read(CHUNK_BYTES)\n' for n in range(12)
    )

    class PythonException(Exception):  # as pyspark.errors.PythonException renders Spark's message
        pass

    @guarded
    def main(argv):
        raise PythonException("\n  An exception was thrown from the Python worker. Please see the stack trace below.\n"
                              f"Traceback (most recent call last):\n{traceback_text}MemoryError\n.\n")

    assert main([]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].endswith(
        " (caused by MemoryError in a Python worker: raise spark.executor.pyspark.memory if it is set, else give the machine or "
        "executors more memory)"), lines
    assert ": PythonException: An exception was thrown from the Python worker." in lines[0] and len(lines[0]) < 560, lines
