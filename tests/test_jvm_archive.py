"""The driver JVM's class archive (nsreplay/jvm_archive.py): named by the java binary and the class
path; mapped only for local masters, only when it exists, never when switched off or when the user
set the default Java options; written by a child run whose failure is remembered, not retried; and,
where the bootstrap wrote one, really mapped by this JDK for the class path the test session's
driver runs with."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from nsreplay import jvm_archive

ENV_KEYS = (jvm_archive.SWITCH, jvm_archive.DUMP)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for key in ENV_KEYS:
        monkeypatch.delenv(key, raising=False)
    return monkeypatch


def _archive_in(build_dir: Path, extra: str = "") -> Path:
    path = jvm_archive.archive_path(extra, build_dir)
    if path is None:
        pytest.skip("no java or no Spark jars here")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"archive")
    return path


def test_the_archive_is_named_by_the_class_path(tmp_path: Path) -> None:
    jar = tmp_path / "extra.jar"
    jar.write_bytes(b"one")
    first = jvm_archive.archive_path(str(jar), tmp_path)
    if first is None:
        pytest.skip("no java or no Spark jars here")
    assert first == jvm_archive.archive_path(str(jar), tmp_path)
    assert first != jvm_archive.archive_path("", tmp_path)
    jar.write_bytes(b"another build")
    assert first != jvm_archive.archive_path(str(jar), tmp_path)
    assert first.parent == tmp_path and first.suffix == ".jsa"


def test_an_existing_archive_is_mapped_for_local_masters_only(clean_env, tmp_path: Path) -> None:
    path = _archive_in(tmp_path)
    for master in ("local", "local[2]", "local[*]", "local-cluster[2,1,1024]"):
        options = jvm_archive.java_options(master, {}, tmp_path)
        assert options == f"-XX:SharedArchiveFile={path} {jvm_archive.QUIET}", master
    for master in ("yarn", "spark://host:7077", "k8s://https://api:443", None):
        assert jvm_archive.java_options(master, {}, tmp_path) is None, master


def test_nothing_is_added_without_an_archive_when_switched_off_or_when_the_user_set_default_options(clean_env, tmp_path: Path) -> None:
    assert jvm_archive.java_options("local[2]", {}, tmp_path) is None  # none built
    _archive_in(tmp_path)
    assert jvm_archive.java_options("local[2]", {jvm_archive.DEFAULT_OPTIONS: "-Xss4m"}, tmp_path) is None
    clean_env.setenv(jvm_archive.SWITCH, "off")
    assert jvm_archive.java_options("local[2]", {}, tmp_path) is None


def test_the_archive_of_another_class_path_is_not_used(clean_env, tmp_path: Path) -> None:
    jar = tmp_path / "extra.jar"
    jar.write_bytes(b"jar")
    _archive_in(tmp_path, "")
    assert jvm_archive.java_options("local[2]", {"spark.driver.extraClassPath": str(jar)}, tmp_path) is None
    with_jar = _archive_in(tmp_path, str(jar))
    assert str(with_jar) in jvm_archive.java_options("local[2]", {"spark.driver.extraClassPath": str(jar)}, tmp_path)


def test_the_build_child_dumps_instead_of_mapping(clean_env, tmp_path: Path) -> None:
    _archive_in(tmp_path)
    clean_env.setenv(jvm_archive.DUMP, str(tmp_path / "x.tmp"))
    assert jvm_archive.java_options("local[2]", {}, tmp_path) == f"-XX:ArchiveClassesAtExit={tmp_path / 'x.tmp'} {jvm_archive.QUIET}"


def test_spark_submit_gets_the_option_as_a_conf(clean_env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _archive_in(tmp_path)
    monkeypatch.setattr(jvm_archive, "BUILD_DIR", tmp_path)
    assert jvm_archive.submit_args("local[*]", {"spark.master": "local[*]"}) == ["--conf", f"{jvm_archive.DEFAULT_OPTIONS}=-XX:SharedArchiveFile={path} {jvm_archive.QUIET}"]
    assert jvm_archive.submit_args("yarn", {}) == []


def test_a_failed_build_leaves_no_archive_and_is_not_retried(clean_env, tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\necho run >> {calls}\necho 'the training run broke' >&2\nexit 3\n")
    python.chmod(0o755)
    build_dir = tmp_path / "build"
    if jvm_archive.archive_path("", build_dir) is None:
        pytest.skip("no java or no Spark jars here")
    assert jvm_archive.build(build_dir, python=str(python)) is None
    assert jvm_archive.build(build_dir, python=str(python)) is None
    assert calls.read_text() == "run\n"  # the second build did not run the child again
    assert not list(build_dir.glob("*.jsa")) and not list(build_dir.glob(".*.tmp"))
    (failed,) = build_dir.glob("*.failed")
    assert "exit 3" in failed.read_text() and "the training run broke" in failed.read_text()


def test_the_bootstrapped_archive_is_mapped_by_this_jdk_for_the_drivers_class_path(spark) -> None:
    """The test session's driver was started as every local job's is; if the bootstrap wrote the
    archive, the driver was given it, and a JVM on the same class path loads Spark's classes from
    it (``source: shared objects file (top)`` is the dynamic archive)."""
    jvm = spark.sparkContext._jvm
    class_path = jvm.java.lang.System.getProperty("java.class.path")
    extra = spark.sparkContext.getConf().get("spark.driver.extraClassPath", "")
    archive = jvm_archive.archive_path(extra)
    if archive is None or not archive.is_file():
        if os.environ.get("CI"):
            pytest.fail(f"CI: the bootstrap wrote no driver class archive ({archive})")
        pytest.skip("no driver class archive here (run scripts/bootstrap.sh)")
    arguments = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert f"-XX:SharedArchiveFile={archive}" in arguments
    java = jvm_archive.find_java()
    done = subprocess.run(
        [str(java), f"-XX:SharedArchiveFile={archive}", "-Xlog:class+load=info", "-cp", class_path,
         "org.apache.spark.deploy.SparkSubmit", "--version"],
        capture_output=True, text=True, timeout=120,
    )
    loaded = [line for line in done.stdout.splitlines() if "org.apache.spark.deploy.SparkSubmit " in line and "source:" in line]
    assert loaded and "shared objects file (top)" in loaded[0], (loaded, done.stdout[-2000:], done.stderr[-2000:])
