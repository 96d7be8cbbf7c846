"""The class-data archive of nsreplay's local driver JVM (the JDK's AppCDS, a dynamic archive).

A cold Spark driver spends seconds of a short run loading and verifying the classes of Spark, Hadoop,
Arrow and Parquet from their jars, and a run of nsreplay starts one JVM. The JDK can write the
classes one run loaded into an archive (``-XX:ArchiveClassesAtExit``) and map that archive at later
starts (``-XX:SharedArchiveFile``). Measured in ``docs/performance.md``.

Contract:

* :func:`archive_path` names the archive after what it depends on: the java binary that runs the
  driver and the driver's class path (Spark's jars and the extra class path). Another JDK, another
  Spark or another jar uses another archive; ``build/jvm/`` keeps them.
* :func:`java_options` gives the option that maps the archive, for local masters only (``local``,
  ``local[…]``, ``local-cluster[…]``; the driver runs on this machine), only when the archive exists,
  and never when ``NSREPLAY_JVM_ARCHIVE=off``. A JVM started without it is just as correct. A JVM
  that still refuses the archive runs without it; the ``cds`` log tags are silenced so that this
  costs no warning on the console. :func:`session_conf` (sessions started from Python) and
  :func:`submit_args` (``spark-submit.sh``) put that option in ``spark.driver.defaultJavaOptions``,
  which Spark puts before the user's ``spark.driver.extraJavaOptions``; a user who set
  ``defaultJavaOptions`` is left alone.
* :func:`build` writes the archive: it runs the rebuild job on the ``tiny`` preset in a child process
  whose driver dumps its classes into a temporary file when it exits, waits for that JVM to exit, and
  renames the file into place, so no JVM ever maps half an archive. ``scripts/bootstrap.sh`` runs it
  (``python -m nsreplay.jvm_archive build``) when the archive is missing; it takes about a minute,
  once per JDK and class path. A failed build fails nothing: runs go on without an archive, and a
  ``.failed`` file beside where it would be (the child's stderr) stops later bootstraps from trying
  again for the same class path.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Mapping, Sequence

from nsreplay.config import PROJECT_ROOT
from nsreplay.local_fs import ensure_jar, find_jdk_tool, is_local_master, spark_jars_dir

log = logging.getLogger(__name__)

BUILD_DIR = PROJECT_ROOT / "build" / "jvm"
#: Set to ``off`` to start every driver JVM without the archive.
SWITCH = "NSREPLAY_JVM_ARCHIVE"
#: Set by :func:`build` for its child: the file the driver JVM dumps its classes into.
DUMP = "NSREPLAY_JVM_ARCHIVE_DUMP"
DEFAULT_OPTIONS = "spark.driver.defaultJavaOptions"
#: The ``cds`` log tags off: a refused archive is not worth a console warning (the run is correct).
QUIET = "-Xlog:cds=off,cds+dynamic=off"


def find_java() -> Path | None:
    """The java binary Spark's launcher will run: ``$JAVA_HOME/bin/java``, else ``java`` on PATH."""
    found = find_jdk_tool("java")
    return Path(found).resolve() if found else None


def _fingerprint(path: Path) -> str:
    try:
        stat = path.stat()
    except OSError:
        return f"{path}:missing"
    return f"{path}:{stat.st_size}:{stat.st_mtime_ns}"


def archive_path(extra_class_path: str = "", build_dir: Path | None = None) -> Path | None:
    """The archive for the current java and Spark jars with ``extra_class_path`` before them; None
    when either cannot be found."""
    java, jars = find_java(), spark_jars_dir()
    if java is None or jars is None:
        return None
    parts = [_fingerprint(java), str(jars)]
    parts += sorted(_fingerprint(jar) for jar in jars.glob("*.jar"))
    parts += [_fingerprint(Path(entry)) for entry in extra_class_path.split(os.pathsep) if entry]
    digest = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
    return (build_dir or BUILD_DIR) / f"driver-classes-{digest}.jsa"


def java_options(master: str | None, conf: Mapping[str, str], build_dir: Path | None = None) -> str | None:
    """The driver JVM option that maps (or, in :func:`build`'s child, writes) the archive, or None."""
    if os.environ.get(SWITCH, "").lower() == "off" or not is_local_master(master) or DEFAULT_OPTIONS in conf:
        return None
    dump = os.environ.get(DUMP)
    if dump:
        return f"-XX:ArchiveClassesAtExit={dump} {QUIET}"
    path = archive_path(conf.get("spark.driver.extraClassPath", ""), build_dir)
    if path is None or not path.is_file():
        return None
    return f"-XX:SharedArchiveFile={path} {QUIET}"


def session_conf(master: str | None, conf: Mapping[str, str]) -> dict[str, str]:
    """Settings to add to ``conf`` (which already holds the class path) for a session whose JVM is
    about to start; {} when none apply."""
    options = java_options(master if master is not None else conf.get("spark.master"), conf)
    if options is None:
        return {}
    if os.environ.get(DUMP):
        atexit.register(_wait_for_driver_exit)
    return {DEFAULT_OPTIONS: options}


def submit_args(master: str | None, properties: Mapping[str, str], driver_class_path: str = "") -> list[str]:
    """spark-submit options to add for a run on ``master`` with these properties, the driver's extra
    class path being ``driver_class_path`` (what ``--driver-class-path`` gives it)."""
    conf = dict(properties)
    if driver_class_path:
        conf["spark.driver.extraClassPath"] = driver_class_path
    options = java_options(master, conf)
    return [] if options is None else ["--conf", f"{DEFAULT_OPTIONS}={options}"]


def _wait_for_driver_exit() -> None:
    """In :func:`build`'s child: end the driver JVM and wait until it has written its archive."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    if proc is None:
        return
    if SparkContext._active_spark_context is not None:
        SparkContext._active_spark_context.stop()
    if proc.stdin is not None:
        proc.stdin.close()  # the gateway exits when its stdin closes
    proc.wait(timeout=600)


def build(build_dir: Path | None = None, python: str = sys.executable) -> Path | None:
    """Write the archive for the current class path (see module docstring); returns it, or None when
    it could not be written (logged). Does nothing when it already exists."""
    jar = ensure_jar()
    target = archive_path(str(jar) if jar else "", build_dir)
    if target is None:
        log.warning("driver class archive: no java or no Spark jars found; runs go on without one")
        return None
    failed = target.with_suffix(".failed")
    if target.is_file() or failed.is_file():
        return target if target.is_file() else None
    target.parent.mkdir(parents=True, exist_ok=True)
    print("writing the driver JVM's class archive (once per JDK and Spark; about a minute)...", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="nsreplay-jvm-archive-") as tmp:
        from nsreplay.generator import generate, preset

        captures = Path(tmp) / "captures"
        generate(preset("tiny"), captures)
        dump = target.parent / f".{target.name}.{os.getpid()}.tmp"
        env = {**os.environ, DUMP: str(dump), "NSREPLAY_ENV": os.environ.get("NSREPLAY_ENV", "local")}
        env.pop("NSREPLAY_UNDER_SPARK_SUBMIT", None)
        command = [python, str(PROJECT_ROOT / "jobs" / "rebuild_routes.py"), "--captures", str(captures), "--warehouse", str(Path(tmp) / "warehouse")]
        try:
            done = subprocess.run(command, env=env, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=900)
            if done.returncode != 0 or not dump.is_file():
                failed.write_text(f"exit {done.returncode}\n{done.stderr[-4000:]}")
                log.warning("driver class archive: the training run failed (exit %s, see %s); runs go on without one", done.returncode, failed)
                return None
            os.replace(dump, target)
        finally:
            dump.unlink(missing_ok=True)
    return target


def main(argv: Sequence[str]) -> int:
    """``python -m nsreplay.jvm_archive build`` writes the archive when missing; ``… args MASTER
    PROPERTIES_FILE [DRIVER_CLASS_PATH]`` prints the spark-submit options to add, one per line."""
    if argv[:1] == ["build"]:
        if os.environ.get(SWITCH, "").lower() == "off":
            return 0
        path = build()
        if path is not None:
            print(path)
        return 0
    if argv[:1] == ["args"] and len(argv) in (3, 4):
        from nsreplay.runtime import read_spark_defaults

        master, properties = argv[1], argv[2]
        for arg in submit_args(master or None, read_spark_defaults([Path(properties)]), argv[3] if len(argv) == 4 else ""):
            print(arg)
        return 0
    print("usage: python -m nsreplay.jvm_archive build | args MASTER PROPERTIES_FILE [DRIVER_CLASS_PATH]", file=sys.stderr)
    return 2


if __name__ == "__main__":  # pragma: no cover - exercised through bootstrap.sh and spark-submit.sh
    logging.basicConfig(format="%(message)s", stream=sys.stderr)
    sys.exit(main(sys.argv[1:]))
