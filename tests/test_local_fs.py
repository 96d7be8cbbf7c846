"""nsreplay's local file system (nsreplay/local_fs.py, jvm/src/…/NioLocalFileSystem.java): the test
session writes through it; it gives every directory and file the mode Hadoop's own local file system
gives (checksum files included); a mode java.nio cannot express goes to Hadoop's code; the jar is
built from the source and named by it; without javac nothing is added; and the options reach Spark
only for local masters the user did not configure otherwise."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from nsreplay import local_fs

ROOT = Path(__file__).resolve().parents[1]


def _jar_or_skip() -> Path:
    jar = local_fs.ensure_jar()
    if jar is None:
        if os.environ.get("CI"):
            pytest.fail("CI: nsreplay's local file system could not be built (no javac?)")
        pytest.skip("no javac here: nsreplay's local file system cannot be built")
    return jar


def test_the_session_writes_files_through_nsreplay_local_file_system(spark, tmp_path: Path) -> None:
    _jar_or_skip()
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    fs = jvm.org.apache.hadoop.fs.FileSystem.get(jvm.java.net.URI(tmp_path.as_uri()), conf)
    assert fs.getClass().getName() == local_fs.FS_CLASS
    frame = spark.createDataFrame([(i, i % 3) for i in range(30)], "id long, part long")
    frame.write.partitionBy("part").parquet(str(tmp_path / "t"))
    assert sorted(spark.read.parquet(str(tmp_path / "t")).collect()) == sorted(frame.collect())


def _modes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): stat.S_IMODE(p.stat().st_mode) for p in sorted(root.rglob("*"))}


def test_directories_and_files_get_the_modes_hadoop_gives_them(spark, tmp_path: Path) -> None:
    _jar_or_skip()
    jvm = spark.sparkContext._jvm
    hadoop = jvm.org.apache.hadoop
    conf = hadoop.conf.Configuration()
    modes = {}
    for name, fs in (("hadoop", hadoop.fs.LocalFileSystem()), ("nio", jvm.nsreplay.hadoop.NioLocalFileSystem())):
        root = tmp_path / name
        fs.initialize(jvm.java.net.URI("file:///"), conf)
        fs.mkdirs(hadoop.fs.Path(str(root / "a" / "b")))
        out = fs.create(hadoop.fs.Path(str(root / "a" / "b" / "data.bin")))
        out.write(bytearray(b"x" * 100))
        out.close()
        fs.mkdirs(hadoop.fs.Path(str(root / "c")), hadoop.fs.permission.FsPermission(0o700))
        fs.create(hadoop.fs.Path(str(root / "c" / "f")), hadoop.fs.permission.FsPermission(0o640), True, 4096, 1, 1 << 20, None).close()
        fs.setPermission(hadoop.fs.Path(str(root / "a" / "b" / "data.bin")), hadoop.fs.permission.FsPermission(0o604))
        modes[name] = _modes(root)
    assert modes["nio"] == modes["hadoop"]
    assert modes["nio"]["a/b/data.bin"] == 0o604 and modes["nio"]["c"] == 0o700 & ~_umask()
    assert "a/b/.data.bin.crc" in modes["nio"]  # still Hadoop's checksummed local file system


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def test_a_mode_with_the_sticky_bit_is_left_to_hadoop(spark, tmp_path: Path) -> None:
    _jar_or_skip()
    jvm = spark.sparkContext._jvm
    hadoop = jvm.org.apache.hadoop
    fs = jvm.nsreplay.hadoop.NioLocalFileSystem()
    fs.initialize(jvm.java.net.URI("file:///"), hadoop.conf.Configuration())
    (tmp_path / "shared").mkdir()
    fs.setPermission(hadoop.fs.Path(str(tmp_path / "shared")), hadoop.fs.permission.FsPermission(0o1777))
    assert stat.S_IMODE((tmp_path / "shared").stat().st_mode) == 0o1777


def test_the_jar_is_built_from_the_source_and_named_by_its_content(tmp_path: Path) -> None:
    _jar_or_skip()
    source = tmp_path / "NioLocalFileSystem.java"
    source.write_text(local_fs.SOURCE.read_text() + "\n// edited\n")
    built = local_fs.ensure_jar(source, tmp_path / "build")
    assert built == local_fs.jar_path(source, tmp_path / "build") != local_fs.jar_path()
    import zipfile

    with zipfile.ZipFile(built) as jar:
        assert sorted(jar.namelist()) == ["nsreplay/hadoop/NioLocalFileSystem$Raw.class", "nsreplay/hadoop/NioLocalFileSystem.class"]
    assert local_fs.ensure_jar(source, tmp_path / "build") == built  # built once
    assert [p.name for p in (tmp_path / "build").iterdir()] == [built.name]  # no leftovers


def test_without_javac_no_jar_and_no_setting_is_added(tmp_path: Path, monkeypatch, caplog) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    monkeypatch.setattr(local_fs, "BUILD_DIR", tmp_path / "build")
    assert local_fs.ensure_jar() is None
    assert "no javac found" in caplog.text
    assert local_fs.session_conf("local[2]", {}) == {}
    assert local_fs.submit_args("local[*]", {}, []) == []


def test_a_build_directory_that_cannot_be_written_gives_no_jar(tmp_path: Path, caplog) -> None:
    _jar_or_skip()
    (tmp_path / "a-file").write_text("")
    assert local_fs.ensure_jar(local_fs.SOURCE, tmp_path / "a-file" / "build") is None
    assert "cannot build" in caplog.text


@pytest.mark.parametrize("master", ["local", "local[*]", "local[2]", "local-cluster[2,1,1024]"])
def test_local_masters_get_the_jar_on_both_class_paths_and_the_class_for_file_urls(master: str) -> None:
    jar = str(_jar_or_skip())
    assert local_fs.session_conf(master, {}) == {
        "spark.driver.extraClassPath": jar,
        "spark.executor.extraClassPath": jar,
        "spark.hadoop.fs.file.impl": local_fs.FS_CLASS,
    }
    assert local_fs.submit_args(master, {}, ["jobs/rebuild_routes.py"]) == [
        "--driver-class-path", jar,
        "--conf", f"spark.executor.extraClassPath={jar}",
        "--conf", f"spark.hadoop.fs.file.impl={local_fs.FS_CLASS}",
    ]


def test_the_master_of_the_settings_counts_when_none_is_given() -> None:
    _jar_or_skip()
    assert local_fs.session_conf(None, {"spark.master": "local[*]"})
    assert local_fs.session_conf(None, {"spark.master": "yarn"}) == {}


@pytest.mark.parametrize("master", ["yarn", "spark://host:7077", "k8s://https://host:6443", None])
def test_cluster_masters_get_nothing(master) -> None:
    assert local_fs.session_conf(master, {}) == {}
    assert local_fs.submit_args(master, {}, []) == []


@pytest.mark.parametrize(
    "properties, cli",
    [
        ({"spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.LocalFileSystem"}, []),
        ({"spark.driver.extraClassPath": "/opt/x.jar"}, []),
        ({"spark.executor.extraClassPath": "/opt/x.jar"}, []),
        ({}, ["--driver-class-path", "/opt/x.jar", "jobs/rebuild_routes.py"]),
        ({}, ["--conf", "spark.hadoop.fs.file.impl=org.apache.hadoop.fs.LocalFileSystem", "jobs/rebuild_routes.py"]),
        ({}, ["--conf", "spark.executor.extraClassPath=/opt/x.jar", "jobs/rebuild_routes.py"]),
    ],
)
def test_what_the_user_set_is_left_alone(properties, cli) -> None:
    _jar_or_skip()
    assert local_fs.submit_args("local[2]", properties, cli) == []
    if properties:  # a session has no command line, only settings
        assert local_fs.session_conf("local[2]", properties) == {}


def test_spark_submit_sh_gets_its_options_one_per_line(tmp_path: Path) -> None:
    jar = str(_jar_or_skip())
    props = tmp_path / "props.conf"
    props.write_text("spark.master local[*]\nspark.app.name nsreplay\n")
    run = lambda *args: subprocess.run([sys.executable, "-m", "nsreplay.local_fs", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.splitlines()  # noqa: E731
    assert run("local[*]", str(props), "jobs/rebuild_routes.py") == [
        "--driver-class-path", jar, "--conf", f"spark.executor.extraClassPath={jar}", "--conf", f"spark.hadoop.fs.file.impl={local_fs.FS_CLASS}",
    ]
    assert run("yarn", str(props), "jobs/rebuild_routes.py") == []
    props.write_text("spark.driver.extraClassPath /opt/x.jar\n")
    assert run("local[*]", str(props)) == []
