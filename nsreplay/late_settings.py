"""The Spark settings that Spark takes as a session starts but reads only when a job needs them, and
the kind of value each must hold.

Spark checks most settings as the session starts (the SparkContext's, and the session's
``spark.sql.*``: :func:`nsreplay.runtime.build_spark` names its refusal as a ``SparkConfigError``).
Those listed here it reads later, in the middle of a job, and a value of the wrong kind then fails
that job (a task, a stage, or the scheduler itself) with an error that looks like any other: the
DAG retried it twice, to fail the same way. Each was seen to fail so with Spark 4.0 (a job of a
range, a shuffle and a Python task under a local master). They are checked as the session starts
(:func:`late_refusals`), each as Spark will read it.

The list is kept to what fails late: a setting Spark reads as the session starts needs no entry
(``spark.speculation``, ``spark.executor.heartbeatInterval``, every ``spark.sql.*``); a setting that
Spark does not read under the master nsreplay runs on does not get one either (``spark.task.maxFailures``
under a local master, ``spark.locality.wait.process`` with no process-local tasks,
``spark.python.worker.memory`` without an aggregation of Python RDDs): refusing a value Spark never
reads would stop a job that runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Mapping

Kind = Literal["int", "boolean", "size", "duration"]


@dataclass(frozen=True)
class LateSetting:
    """How Spark reads a setting: as a value of ``kind``, through its entry in Spark's registry of
    settings (``ConfigEntry``: trims the value, then converts it), or, where Spark's code reads it
    through SparkConf's reader of that kind (``through_spark_conf``), as it is."""

    kind: Kind
    through_spark_conf: bool = False


#: Setting -> how Spark reads it, and (comment) when.
READ_LATE: Mapping[str, LateSetting] = {
    # the scheduler backend's defaultParallelism (SparkConf.getInt): spark.range, the replay's
    # partitions (pipelines/replay/run.py), the quality check's coalesce
    "spark.default.parallelism": LateSetting("int", through_spark_conf=True),
    # each Python task (pandas and Arrow UDFs, mapInArrow): the task fails
    "spark.python.worker.reuse": LateSetting("boolean"),
    "spark.python.worker.faulthandler.enabled": LateSetting("boolean"),
    # each shuffle: its write (the buffer, the choice of the bypass writer), its read
    "spark.shuffle.file.buffer": LateSetting("size"),
    "spark.shuffle.sort.bypassMergeThreshold": LateSetting("int"),
    "spark.reducer.maxSizeInFlight": LateSetting("size"),
    # each stage's task set: the scheduler's loop fails, and every job of the session is cancelled
    "spark.locality.wait": LateSetting("duration"),
}

#: SparkConf's reader of each kind, and a default to give it (the setting is set: never returned).
_READER = {"int": ("getInt", 0), "boolean": ("getBoolean", False), "size": ("getSizeAsBytes", "0"), "duration": ("getTimeAsMs", "0")}


def late_refusals(jvm: Any, settings: Mapping[str, str]) -> list[str]:
    """``key=value: SimpleName: message`` for each setting of :data:`READ_LATE` among ``settings``
    (a session's SparkConf) whose value Spark will refuse when it reads it, read as Spark reads it
    (:class:`LateSetting`) and in Spark's own words: its entry's converter (``spark.python.worker.reuse
    should be boolean, but was maybe``), or SparkConf's reader of its kind (``Illegal value for
    config key spark.default.parallelism: For input string: "abc"``). ``jvm``: py4j's view of the
    session's JVM."""
    entries = jvm.org.apache.spark.internal.config.ConfigEntry
    refused = []
    for key, how in READ_LATE.items():
        if key not in settings:
            continue
        value = settings[key]
        try:
            entry = None if how.through_spark_conf else entries.findEntry(key)
            if entry is not None:
                entry.valueConverter().apply(value)
            else:  # read as Spark's code reads it, or a Spark whose registry lacks it: SparkConf's reader
                reader, default = _READER[how.kind]
                getattr(jvm.org.apache.spark.SparkConf(False).set(key, value), reader)(key, default)
        except Exception as exc:  # noqa: BLE001 - py4j's error of the JVM's exception, or pyspark's converted one
            thrown = getattr(exc, "java_exception", None) or getattr(exc, "_origin", None)
            if thrown is None:
                raise
            message = " ".join(str(thrown.getMessage() or "").split())
            refused.append(f"{key}={value}: {thrown.getClass().getSimpleName()}: {message}")
    return refused
