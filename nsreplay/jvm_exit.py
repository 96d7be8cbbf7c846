"""The one line ``spark-submit.sh`` says when the driver JVM ended a job before the job could say why.

Spark ends a JVM whose thread ran out of heap (``java.lang.OutOfMemoryError``) with status 52
(``SparkExitCode.OOM``, from its uncaught-exception handler). With a local master the tasks run in
the driver JVM, so a task short of heap (a Parquet write of wide rows, a cached partition) ends the
whole job there, the job's Python with it, before it writes its reason: stderr ended with the JVM's
own lines, hundreds of lines of traces whose last one was a task's abort, and named no setting.

The same goes for a JVM killed under the job (the kernel's out-of-memory killer picks the largest
process: SIGKILL, status 137), whose end bash reported as "line 122: 630 Killed", and for one that
could not start (its heap or class space not reserved), which said why on stdout only.

And for the settings spark-submit itself refuses before the job starts (``spark.executor.memory=lots``:
"Executor memory must be a positive number", ``spark.master=foo``), and a ``spark.driver.memory``
that the driver JVM cannot take as its heap (``-Xmxlots``): spark-submit ended with status 1 and
its own lines, which said nothing the DAG knows as final, so it ran the same command twice more.
They are a ``SparkConfigError``, as the settings a Spark session refuses are
(:func:`nsreplay.runtime.build_spark`).

``python -m nsreplay.jvm_exit JOB STATUS PROPERTIES_FILE STDERR_FILE [spark-submit args…]`` prints the
line (``spark-submit.sh`` asks for it on status 52, or on a failure the job gave no reason for;
``STDERR_FILE``: a copy of what spark-submit wrote to stderr).
"""

from __future__ import annotations

import re
import signal
import sys
from pathlib import Path
from typing import Mapping, Sequence

from nsreplay.exit_reason import INTERRUPTED_STATUS
from nsreplay.runtime import SPARK_REFUSED, read_spark_defaults

#: The status Spark ends a JVM with when one of its threads ran out of memory (SparkExitCode.OOM).
SPARK_OOM_STATUS = 52

#: spark.driver.memory when nothing sets it.
SPARK_DEFAULT_DRIVER_MEMORY = "1g"


def driver_memory(properties: Mapping[str, str], cli_args: Sequence[str]) -> str | None:
    """The driver's memory a spark-submit run was given: the last ``--driver-memory M`` or ``--conf
    spark.driver.memory=M`` among ``cli_args`` before the job's file (``*.py``; those after it are
    the job's own), else the properties' ``spark.driver.memory``; ``None`` when nothing sets it. The
    options are spelled ``--opt value``, as spark-submit.sh passes them on."""
    memory = properties.get("spark.driver.memory")
    for option, value in zip(cli_args, cli_args[1:]):
        if option.endswith(".py"):
            break
        if option == "--driver-memory":
            memory = value
        elif option == "--conf" and value.startswith("spark.driver.memory="):
            memory = value.partition("=")[2]
    return memory


#: spark-submit refusing an option or setting: its main thread ends with a SparkException raised by
#: the ``error`` of its arguments' check (SparkSubmitArguments: memory, cores, executors, ...) or of
#: its own (SparkSubmit: the master, the deploy mode): checks of the arguments, the settings and the
#: environment (HADOOP_CONF_DIR), which fail the same way again; or with the exception of a setting's
#: own converter, thrown in Spark's settings code (``org.apache.spark.internal.config``) as
#: spark-submit reads the setting (``spark.buffer.size=x``: "spark.buffer.size should be int, but
#: was x", as it makes the job's Hadoop configuration). Any other end of spark-submit (a package that
#: could not be fetched, a cluster that refused the application) is not one.
_SUBMIT_REFUSAL = re.compile(
    r'^Exception in thread "main" (?:[\w$]+\.)*(?P<kind>[\w$]+): (?P<message>.*)\n'
    r"\s+at org\.apache\.spark\.(?:deploy\.SparkSubmit(?:Arguments)?\.error\(|internal\.config\.)",
    re.MULTILINE,
)
#: spark-submit's launcher refusing an option it cannot parse (``--conf key`` without ``=value``, an
#: unknown option): its ``Error: ...`` line, then spark-submit's usage.
_SUBMIT_USAGE_ERROR = re.compile(r"^Error: (?P<message>.+)\n(?:.*\n)*?Usage: spark-submit ", re.MULTILINE)
#: What the driver JVM says on stderr, before it ends, of the heap size spark-submit's launcher gave
#: it from spark.driver.memory (--driver-memory), when it cannot read it.
_INVALID_HEAP = re.compile(r"^Invalid maximum heap size: -Xmx\S*$", re.MULTILINE)


def submit_refusal(stderr: str) -> str | None:
    """spark-submit's refusal of its options or settings in ``stderr`` (what it wrote there): its check's
    ``SimpleName: message`` (:data:`_SUBMIT_REFUSAL`), or its launcher's message (an option it cannot
    parse: :data:`_SUBMIT_USAGE_ERROR`); ``None`` when it holds neither."""
    found = list(_SUBMIT_REFUSAL.finditer(stderr))
    if found:
        return f"{found[-1]['kind']}: {' '.join(found[-1]['message'].split())}"
    usage = _SUBMIT_USAGE_ERROR.search(stderr)
    return " ".join(usage["message"].split()) if usage else None


def heap_refusal(stderr: str) -> str | None:
    """``spark.driver.memory: Invalid maximum heap size: -Xmx<memory>`` when ``stderr`` (what spark-submit
    wrote there) holds the JVM's refusal of the heap size (:data:`_INVALID_HEAP`): the launcher gives
    spark.driver.memory to the driver JVM as its -Xmx, and refuses an -Xmx among its Java options.
    ``None`` otherwise (a heap that the JVM reads but cannot reserve may be there next time)."""
    found = _INVALID_HEAP.findall(stderr)
    return f"spark.driver.memory: {found[-1]}" if found else None


def exit_reason(job: str, status: int, memory: str | None, refused: str | None = None) -> str | None:
    """``job``'s one-line reason for spark-submit's exit ``status`` when the job did not give one: Spark
    refused its settings before the job ran (``refused``, status 1: :func:`submit_refusal`,
    :func:`heap_refusal`: a ``SparkConfigError``), the JVM ran out of memory (with the setting to
    raise), was killed by a signal (the kernel's out-of-memory killer sends SIGKILL), or ended
    otherwise before the job said why (a JVM that could not start: its own lines, on stdout, say
    why). ``None`` for success, for a Ctrl-C (130), which spark-submit.sh says itself, and for a job
    that stopped quietly as its stdout's reader went away (141)."""
    if status in (0, INTERRUPTED_STATUS, 128 + signal.SIGPIPE):  # SIGPIPE: the reader of stdout went away, quietly
        return None
    if status == 1 and refused:
        return f"{job}: SparkConfigError: {SPARK_REFUSED}: {refused}"
    now = memory if memory else f"{SPARK_DEFAULT_DRIVER_MEMORY}, Spark's default"
    if status > 128:
        try:
            name = signal.Signals(status - 128).name
        except ValueError:
            name = f"signal {status - 128}"
        return (f"{job}: the Spark driver JVM was killed by {name} (status {status}; the kernel's out-of-memory killer sends SIGKILL "
                f"to the largest process when memory runs short, and dmesg names it; spark.driver.memory is {now})")
    if status != SPARK_OOM_STATUS:
        return f"{job}: spark-submit ended with status {status} before the job said why (the JVM's own lines, on stdout or stderr, may say why)"
    return (f"{job}: the Spark driver JVM ran out of memory (java.lang.OutOfMemoryError: Spark ended it with status "
            f"{SPARK_OOM_STATUS}; its lines above say where): raise spark.driver.memory (now {now}) with --driver-memory "
            f"or in conf/<env>/spark-defaults.conf")


def main(argv: Sequence[str]) -> int:
    """``python -m nsreplay.jvm_exit JOB STATUS PROPERTIES_FILE STDERR_FILE [spark-submit args…]`` (module docstring)."""
    job, status, properties, stderr_file, *cli_args = argv
    memory = driver_memory(read_spark_defaults([Path(properties)]), cli_args)
    try:
        stderr = Path(stderr_file).read_text(encoding="utf-8", errors="replace")
    except OSError:
        stderr = ""
    refused = submit_refusal(stderr) or heap_refusal(stderr)
    line = exit_reason(job, int(status), memory, refused)
    if line is not None:
        print(line)
    return 0


if __name__ == "__main__":  # pragma: no cover - exercised through spark-submit.sh
    sys.exit(main(sys.argv[1:]))
