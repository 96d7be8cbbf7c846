"""The one line ``spark-submit.sh`` says when the driver JVM ended a job before the job could say why.

Spark ends a JVM whose thread ran out of heap (``java.lang.OutOfMemoryError``) with status 52
(``SparkExitCode.OOM``, from its uncaught-exception handler). With a local master the tasks run in
the driver JVM, so a task short of heap (a Parquet write of wide rows, a cached partition) ends the
whole job there, the job's Python with it, before it writes its reason: stderr ended with the JVM's
own lines, hundreds of lines of traces whose last one was a task's abort, and named no setting.

``python -m nsreplay.jvm_exit JOB STATUS PROPERTIES_FILE [spark-submit args…]`` prints that line for
such a status, nothing for any other (the job's own reason stands then).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Mapping, Sequence

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
    """``job``'s one-line reason for spark-submit's exit ``status``, when that status says it itself
    (the JVM ran out of memory), with the setting to raise; ``None`` for any other status."""
    if status != SPARK_OOM_STATUS:
        return None
    now = memory if memory else f"{SPARK_DEFAULT_DRIVER_MEMORY}, Spark's default"
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
