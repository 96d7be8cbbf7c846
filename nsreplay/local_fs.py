"""The local file system nsreplay gives Spark: Hadoop's own, without a process per permission change.

pyspark ships no Hadoop native library, so Hadoop's local file system sets each permission by
starting a ``chmod`` process, and it sets one for every directory it makes and every file it
creates. A bench-day run starts 1,442 of them (~5 ms of CPU each). ``jvm/src/…/NioLocalFileSystem.java``
is the same file system with permissions set through ``java.nio`` (same modes).

Contract:

* :func:`ensure_jar` compiles that one class against the Spark jars into
  ``build/jvm/nsreplay-hadoop-<source hash>.jar`` the first time (a second or two) and returns the
  jar; it returns None, with a warning, when no ``javac`` is found, compiling fails or the build
  directory cannot be written.
* :func:`session_conf` (sessions started from Python) and :func:`submit_args` (``spark-submit.sh``)
  put the jar on the driver's and executors' class paths and name the class for ``file://``, only
  for local masters (``local``, ``local[…]``, ``local-cluster[…]``: executors on this machine) and
  only when the user set none of ``spark.hadoop.fs.file.impl`` and the two ``extraClassPath``
  settings. Otherwise they add nothing, and Spark runs on Hadoop's default, as before.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Mapping, Sequence

from nsreplay.config import PROJECT_ROOT

log = logging.getLogger(__name__)

FS_CLASS = "nsreplay.hadoop.NioLocalFileSystem"
SOURCE = PROJECT_ROOT / "jvm" / "src" / "nsreplay" / "hadoop" / "NioLocalFileSystem.java"
BUILD_DIR = PROJECT_ROOT / "build" / "jvm"
#: Settings that, set by the user, mean: leave the local file system and class paths alone.
USER_KEYS = ("spark.hadoop.fs.file.impl", "spark.driver.extraClassPath", "spark.executor.extraClassPath")


def is_local_master(master: str | None) -> bool:
    """True for masters whose executors run on this machine (they can share a jar path)."""
    return master is not None and (master == "local" or master.startswith(("local[", "local-cluster[")))


def jar_path(source: Path = SOURCE, build_dir: Path | None = None) -> Path:
    """Where the jar of ``source`` is built (named by the source's content: an edit rebuilds it);
    ``build_dir`` defaults to :data:`BUILD_DIR`."""
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:12]
    return (build_dir or BUILD_DIR) / f"nsreplay-hadoop-{digest}.jar"


def find_jdk_tool(name: str) -> str | None:
    """``$JAVA_HOME/bin/<name>``, else ``name`` on PATH, else None (where Spark's launcher looks)."""
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", name), os.X_OK):
        return os.path.join(home, "bin", name)
    return shutil.which(name)


def find_javac() -> str | None:
    """``$JAVA_HOME/bin/javac``, else ``javac`` on PATH, else None."""
    return find_jdk_tool("javac")


def spark_jars_dir() -> Path | None:
    """The Spark jars to compile against: ``$SPARK_HOME/jars``, else the pyspark package's."""
    candidates = [Path(os.environ["SPARK_HOME"]) / "jars"] if os.environ.get("SPARK_HOME") else []
    try:
        import pyspark

        candidates.append(Path(pyspark.__file__).parent / "jars")
    except ImportError:  # pragma: no cover - pyspark is a dependency
        pass
    return next((c for c in candidates if any(c.glob("hadoop-client-api-*.jar"))), None)


def ensure_jar(source: Path = SOURCE, build_dir: Path | None = None) -> Path | None:
    """The built jar (compiled now if missing), or None when it cannot be built (warning logged)."""
    target = jar_path(source, build_dir)
    build_dir = target.parent
    if target.is_file():
        return target
    javac, jars = find_javac(), spark_jars_dir()
    if javac is None or jars is None:
        log.warning("local file system: %s; Spark keeps Hadoop's (a chmod process per file written)",
                    "no javac found (install a JDK, not only a JRE)" if javac is None else "no Spark jars found")
        return None
    try:
        build_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=build_dir) as tmp:
            classes = Path(tmp) / "classes"
            done = subprocess.run(
                [javac, "-nowarn", "-encoding", "UTF-8", "-cp", str(jars / "*"), "-d", str(classes), str(source)],
                capture_output=True, text=True,
            )
            if done.returncode != 0:
                log.warning("local file system: javac failed (%s); Spark keeps Hadoop's", done.stderr.strip()[-500:])
                return None
            built = Path(tmp) / "nsreplay-hadoop.jar"
            with zipfile.ZipFile(built, "w", zipfile.ZIP_DEFLATED) as jar:
                for path in sorted(classes.rglob("*.class")):
                    jar.write(path, path.relative_to(classes).as_posix())
            os.replace(built, target)  # atomic: a concurrent build leaves one whole jar
    except OSError as exc:  # e.g. a read-only checkout: run without it rather than not at all
        log.warning("local file system: cannot build %s (%s); Spark keeps Hadoop's", target, exc)
        return None
    return target


def _user_set(conf: Mapping[str, str], cli_args: Sequence[str] = ()) -> bool:
    if any(key in conf for key in USER_KEYS) or "--driver-class-path" in cli_args:
        return True
    return any(arg.startswith(tuple(f"{key}=" for key in USER_KEYS)) for arg in cli_args)


def _settings(master: str | None, conf: Mapping[str, str], cli_args: Sequence[str] = ()) -> dict[str, str]:
    if not is_local_master(master) or _user_set(conf, cli_args):
        return {}
    jar = ensure_jar()
    if jar is None:
        return {}
    return {"spark.driver.extraClassPath": str(jar), "spark.executor.extraClassPath": str(jar), "spark.hadoop.fs.file.impl": FS_CLASS}


def session_conf(master: str | None, conf: Mapping[str, str]) -> dict[str, str]:
    """Settings to add to ``conf`` for a session whose JVM is about to start ({} if none apply)."""
    return _settings(master if master is not None else conf.get("spark.master"), conf)


def submit_args(master: str | None, properties: Mapping[str, str], cli_args: Sequence[str]) -> list[str]:
    """spark-submit options to add for a run on ``master`` with these properties and arguments."""
    settings = _settings(master, properties, cli_args)
    if not settings:
        return []
    return ["--driver-class-path", settings.pop("spark.driver.extraClassPath"),
            *[arg for key, value in settings.items() for arg in ("--conf", f"{key}={value}")]]


def main(argv: Sequence[str]) -> int:
    """``python -m nsreplay.local_fs MASTER PROPERTIES_FILE [spark-submit args…]``: the options to
    add, one per line (nothing when none apply)."""
    from nsreplay.runtime import read_spark_defaults

    master, properties, *cli_args = argv
    for arg in submit_args(master or None, read_spark_defaults([Path(properties)]), cli_args):
        print(arg)
    return 0


if __name__ == "__main__":  # pragma: no cover - exercised through spark-submit.sh
    logging.basicConfig(format="%(message)s", stream=sys.stderr)
    sys.exit(main(sys.argv[1:]))
