"""nsreplay.jvm_exit: the line spark-submit.sh says for a driver JVM that ran out of memory, with the
memory it was given (tests/test_spark_submit_reason.py runs it through the script)."""

from __future__ import annotations

import pytest

from nsreplay.jvm_exit import driver_memory, exit_reason, heap_refusal, submit_refusal


@pytest.mark.parametrize(
    "properties, args, memory",
    [
        ({"spark.driver.memory": "4g"}, ["jobs/rebuild_routes.py", "--captures", "c"], "4g"),
        ({"spark.driver.memory": "4g"}, ["--driver-memory", "1g", "jobs/rebuild_routes.py"], "1g"),
        ({"spark.driver.memory": "4g"}, ["--conf", "spark.driver.memory=768m", "jobs/rebuild_routes.py"], "768m"),
        ({}, ["--driver-memory", "1g", "--conf", "spark.driver.memory=2g", "job.py"], "2g"),  # the last one wins, as in spark-submit
        ({"spark.driver.memory": "4g"}, ["job.py", "--driver-memory", "1g"], "4g"),  # after the job's file: the job's own argument
        ({"spark.driver.memoryOverhead": "1g"}, ["--conf", "spark.driver.memoryOverhead=2g", "job.py"], None),
    ],
)
def test_the_driver_memory_is_the_last_one_set_before_the_job(properties, args, memory) -> None:
    assert driver_memory(properties, args) == memory


def test_only_spark_s_out_of_memory_status_has_a_line_of_its_own() -> None:
    assert exit_reason("rebuild_routes.py", 52, "512m") == (
        "rebuild_routes.py: the Spark driver JVM ran out of memory (java.lang.OutOfMemoryError: Spark ended it with status 52; "
        "its lines above say where): raise spark.driver.memory (now 512m) with --driver-memory or in conf/<env>/spark-defaults.conf"
    )
    assert "(now 1g, Spark's default)" in exit_reason("j.py", 52, None)
    # a Ctrl-C is said by spark-submit.sh; a reader of stdout gone (`| head`) ends a job quietly
    assert [exit_reason("j.py", status, "4g") for status in (0, 130, 141)] == [None, None, None]


def test_a_jvm_killed_or_that_could_not_start_has_a_line_too() -> None:
    assert exit_reason("rebuild_routes.py", 137, "4g") == (
        "rebuild_routes.py: the Spark driver JVM was killed by SIGKILL (status 137; the kernel's out-of-memory killer sends SIGKILL "
        "to the largest process when memory runs short, and dmesg names it; spark.driver.memory is 4g)"
    )
    assert exit_reason("j.py", 143, None).startswith("j.py: the Spark driver JVM was killed by SIGTERM (status 143;")
    assert exit_reason("j.py", 1, "4g") == (
        "j.py: spark-submit ended with status 1 before the job said why (the JVM's own lines, on stdout or stderr, may say why)"
    )


def test_only_spark_submit_s_refusal_of_its_settings_is_a_spark_configuration_error() -> None:
    """What spark-submit wrote to stderr when it ended before the job ran: its check of its arguments
    (the job's line is a SparkConfigError, not retried), or anything else, e.g. a package it could
    not fetch, which may be there next time (the line as before, retried)."""
    refused = ('WARNING: Using incubator modules: jdk.incubator.vector\n'
               'Exception in thread "main" org.apache.spark.SparkException: Executor memory must be a positive number\n'
               '\tat org.apache.spark.deploy.SparkSubmitArguments.error(SparkSubmitArguments.scala:640)\n'
               '\tat org.apache.spark.deploy.SparkSubmitArguments.validateSubmitArguments(SparkSubmitArguments.scala:268)\n')
    unfetched = ('Exception in thread "main" java.lang.RuntimeException: [unresolved dependency: io.delta#delta-spark_2.13;4.0.0: not found]\n'
                 '\tat org.apache.spark.deploy.SparkSubmitUtils$.resolveMavenCoordinates(SparkSubmit.scala:1410)\n')
    not_created = "Error occurred during initialization of VM\nCould not reserve enough space for object heap\n"
    unparsed = ("Error: Invalid argument to --conf: spark.executor.memory\n\nWARNING: Using incubator modules: jdk.incubator.vector\n"
                "Usage: spark-submit [options] <app jar | python file | R file> [app arguments]\n")
    # a setting's own converter, called by spark-submit as it prepares the job (spark.buffer.size=x)
    converted = ('Exception in thread "main" java.lang.IllegalArgumentException: spark.buffer.size should be int, but was x\n'
                 '\tat org.apache.spark.internal.config.ConfigHelpers$.toNumber(ConfigBuilder.scala:36)\n'
                 '\tat org.apache.spark.internal.config.ConfigBuilder.$anonfun$intConf$1(ConfigBuilder.scala:252)\n')
    assert [submit_refusal(text) for text in (refused, unparsed, converted, unfetched, not_created)] == [
        "SparkException: Executor memory must be a positive number", "Invalid argument to --conf: spark.executor.memory",
        "IllegalArgumentException: spark.buffer.size should be int, but was x", None, None]
    assert [heap_refusal(text) for text in ("Invalid maximum heap size: -Xmx4gb\nError: Could not create the Java Virtual Machine.\n",
                                            not_created)] == ["spark.driver.memory: Invalid maximum heap size: -Xmx4gb", None]
    assert exit_reason("j.py", 1, "4g", "SparkException: Executor memory must be a positive number") == (
        "j.py: SparkConfigError: Spark refused its settings (spark-submit options, the DAG's spark_args, conf/<env>/spark-defaults.conf): "
        "SparkException: Executor memory must be a positive number")
