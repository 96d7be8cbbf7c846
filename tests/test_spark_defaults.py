"""The JVM settings in conf/ reach the JVMs: every environment runs the Parallel collector (an env's
spark-defaults.conf replaces a key of base's whole, so an env that sets the Java options must repeat
it), and the session JVM of this test run, configured from conf/base, does run it; the session
caches frames uncompressed, as conf/base says, and does not send the Python call site of every
expression to the JVM; the driver JVM of a real run uses the C2 compile
thresholds conf/base names, and this session's JVM does run with them."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from nsreplay.runtime import read_spark_defaults

CONF = Path(__file__).resolve().parents[1] / "conf"
ENVS = sorted(p.parent.name for p in CONF.glob("*/spark-defaults.conf") if p.parent.name != "base")
COLLECTOR = "-XX:+UseParallelGC"
C2_THRESHOLDS = ("Tier4InvocationThreshold", "Tier4MinInvocationThreshold", "Tier4CompileThreshold", "Tier4BackEdgeThreshold")
OTHER_COLLECTORS = ("-XX:+UseG1GC", "-XX:+UseSerialGC", "-XX:+UseZGC", "-XX:+UseShenandoahGC")


@pytest.mark.parametrize("env", ["base", *ENVS])
def test_every_environment_selects_the_parallel_collector_for_driver_and_executors(env: str) -> None:
    files = [CONF / "base" / "spark-defaults.conf"] + ([] if env == "base" else [CONF / env / "spark-defaults.conf"])
    settings = read_spark_defaults(files)
    for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
        options = settings.get(key, "").split()
        assert COLLECTOR in options, f"conf/{env}: {key} = {settings.get(key)!r}"
        assert not set(options) & set(OTHER_COLLECTORS), f"conf/{env}: {key} names two collectors"


def test_the_session_jvm_runs_the_collector_conf_base_names(spark) -> None:
    beans = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    assert {bean.getName() for bean in beans} == {"PS Scavenge", "PS MarkSweep"}


def test_the_session_caches_frames_uncompressed_as_conf_base_says(spark) -> None:
    base = read_spark_defaults([CONF / "base" / "spark-defaults.conf"])
    assert base["spark.sql.inMemoryColumnarStorage.compressed"] == "false"
    assert spark.conf.get("spark.sql.inMemoryColumnarStorage.compressed") == "false"


def _xx_values(options: str) -> dict[str, str]:
    """``-XX:Name=value`` options of a Java command line, by name."""
    return dict(o[4:].split("=", 1) for o in options.split() if o.startswith("-XX:") and "=" in o)


def test_base_raises_every_c2_threshold_above_the_jdk_default_for_the_driver() -> None:
    defaults = {"Tier4InvocationThreshold": 5000, "Tier4MinInvocationThreshold": 600, "Tier4CompileThreshold": 15000, "Tier4BackEdgeThreshold": 40000}
    options = _xx_values(read_spark_defaults([CONF / "base" / "spark-defaults.conf"])["spark.driver.extraJavaOptions"])
    assert {name: int(options[name]) > defaults[name] for name in C2_THRESHOLDS} == dict.fromkeys(C2_THRESHOLDS, True)


def test_the_session_jvm_compiles_with_the_c2_thresholds_conf_base_names(spark) -> None:
    jvm = spark.sparkContext._jvm
    bean = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean"))
    wanted = _xx_values(read_spark_defaults([CONF / "base" / "spark-defaults.conf"])["spark.driver.extraJavaOptions"])
    assert {name: bean.getVMOption(name).getValue() for name in C2_THRESHOLDS} == {name: wanted[name] for name in C2_THRESHOLDS}


def test_the_session_builds_expressions_without_sending_their_call_sites(spark, monkeypatch) -> None:
    """conf/base turns PySpark's DataFrame debugging off, and this session has it off: building an
    expression costs the JVM calls of the expression only, not the ~10 more that send its Python call
    site first."""
    from py4j.clientserver import ClientServerConnection
    from pyspark.errors.utils import is_debugging_enabled
    from pyspark.sql import functions as F

    base = read_spark_defaults([CONF / "base" / "spark-defaults.conf"])
    assert base["spark.python.sql.dataFrameDebugging.enabled"] == "false"
    assert spark.conf.get("spark.python.sql.dataFrameDebugging.enabled") == "false"
    assert not is_debugging_enabled()

    commands: list[str] = []
    send = ClientServerConnection.send_command
    this_thread = threading.current_thread()

    def counted(self, command: str, *args, **kwargs):
        # this thread's calls only: py4j's finalizer thread may release proxies meanwhile
        if threading.current_thread() is this_thread:
            commands.append(command)
        return send(self, command, *args, **kwargs)

    F.col("warm")  # the first call may resolve the functions class once
    monkeypatch.setattr(ClientServerConnection, "send_command", counted)
    F.col("namesrv")
    monkeypatch.undo()
    assert not [c for c in commands if "PySparkCurrentOrigin" in c], commands
    assert len(commands) <= 4, commands
