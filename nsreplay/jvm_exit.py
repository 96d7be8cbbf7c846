"""The one line ``spark-submit.sh`` says when the driver JVM ended a job before the job could say why.

Spark ends a JVM whose thread ran out of heap (``java.lang.OutOfMemoryError``) with status 52
(``SparkExitCode.OOM``, from its uncaught-exception handler). With a local master the tasks run in
the driver JVM, so a task short of heap (a Parquet write of wide rows, a cached partition) ends the
whole job there, the job's Python with it, before it writes its reason: stderr ended with the JVM's
own lines, hundreds of lines of traces whose last one was a task's abort, and named no setting.

The same goes for a JVM killed under the job (the kernel's out-of-memory killer picks the largest
process: SIGKILL, status 137), whose end bash reported as "line 122: 630 Killed", and for one that
could not start (its heap or class space not reserved), which said why on stdout only.

``python -m nsreplay.jvm_exit JOB STATUS PROPERTIES_FILE [spark-submit args…]`` prints the line
(``spark-submit.sh`` asks for it on status 52, or on a failure the job gave no reason for).
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Mapping, Sequence

from nsreplay.exit_reason import INTERRUPTED_STATUS

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


def exit_reason(job: str, status: int, memory: str | None) -> str | None:
    """``job``'s one-line reason for spark-submit's exit ``status`` when the job did not give one: the
    JVM ran out of memory (with the setting to raise), was killed by a signal (the kernel's
    out-of-memory killer sends SIGKILL), or ended otherwise before the job said why (a JVM that could
    not start: its own lines, on stdout, say why). ``None`` for success, for a Ctrl-C (130), which
    spark-submit.sh says itself, and for a job that stopped quietly as its stdout's reader went away (141)."""
    if status in (0, INTERRUPTED_STATUS, 128 + signal.SIGPIPE):  # SIGPIPE: the reader of stdout went away, quietly
        return None
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
    """``python -m nsreplay.jvm_exit JOB STATUS PROPERTIES_FILE [spark-submit args…]`` (module docstring)."""
    from nsreplay.runtime import read_spark_defaults

    job, status, properties, *cli_args = argv
    line = exit_reason(job, int(status), driver_memory(read_spark_defaults([Path(properties)]), cli_args))
    if line is not None:
        print(line)
    return 0


if __name__ == "__main__":  # pragma: no cover - exercised through spark-submit.sh
    sys.exit(main(sys.argv[1:]))
