"""What a Spark JVM says on stderr: passed on whole, and the two ends of it kept, to find the
refusal of a setting it ended with (:mod:`nsreplay.jvm_exit`).

spark-submit, or the driver JVM it starts, refuses some settings before any Spark session exists
(``spark.executor.memory=lots``: "Executor memory must be a positive number"; ``spark.driver.memory=lots``:
"Invalid maximum heap size: -Xmxlots") and says so on stderr only. To name that refusal the copy
needs the first lines (the JVM's own, the launcher's usage error) and the last ones (the main
thread's exception): :class:`KeptEnds` keeps the first and the last :data:`KEPT_BYTES` of the
stream, so that a job that logs gigabytes to stderr for hours keeps at most twice that, in memory,
and nothing on disk until the stream ends.

``python -m nsreplay.jvm_stderr KEPT_FILE`` copies its stdin to its stdout whole, as it comes, and
when its stdin ends writes the kept ends to ``KEPT_FILE`` if that file still exists (it is never
created: a caller that removed it, ended by a signal, gets no file back), or to the pipe
``/dev/fd/N`` it was given. It ignores SIGINT and SIGTERM: it ends when its writer does, so the
writer's last lines still pass (``spark-submit.sh`` pipes spark-submit's stderr through it).
:func:`launch_gateway` starts the JVM of a session built in-process (``nsreplay`` commands,
notebooks) with its stderr through it.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

#: The bytes kept of each end of the stream: spark-submit's refusal (its exception's first lines, or
#: the launcher's "Error: ..." and usage) and the JVM's refusal of its heap are a few KiB at most.
KEPT_BYTES = 64 * 1024

#: How long a launch that failed waits for the copy of the JVM's stderr (the JVM has ended: the copy
#: ends as soon as it has read what the JVM wrote).
_COPY_WAIT_SECONDS = 10


@dataclass
class KeptEnds:
    """The first and the last ``limit`` bytes of a stream fed to :meth:`add` in chunks."""

    limit: int = KEPT_BYTES
    head: bytearray = field(default_factory=bytearray)
    tail: bytearray = field(default_factory=bytearray)
    total: int = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > 2 * self.limit:  # trimmed now and then, not at every chunk
                del self.tail[: -self.limit]

    def text(self) -> str:
        """The kept ends as text (UTF-8, undecodable bytes replaced). When bytes between them were
        left out, the tail starts at its first whole line, after a line that says how many were."""
        tail = bytes(self.tail[-self.limit :])
        left_out = self.total - len(self.head) - len(tail)
        if left_out <= 0:
            return (bytes(self.head) + tail).decode("utf-8", errors="replace")
        cut = tail.find(b"\n") + 1
        left_out += cut
        marker = f"\n[... {left_out} bytes of stderr left out ...]\n".encode()
        return (bytes(self.head) + marker + tail[cut:]).decode("utf-8", errors="replace")


def copy_stream(chunks: Iterable[bytes], write: Callable[[bytes], Any], kept: KeptEnds) -> None:
    """Pass each of ``chunks`` to ``write`` whole and keep its ends in ``kept``. Once ``write`` fails
    (its reader went away: ``| head``, a closed terminal) the rest is still read and kept, never
    written: the writer of the stream must not block on, or die of, a pipe nobody reads."""
    passing = True
    for chunk in chunks:
        if passing:
            try:
                write(chunk)
            except OSError:
                passing = False
        kept.add(chunk)


def _chunks(fd: int) -> Iterable[bytes]:
    while chunk := os.read(fd, 65536):
        yield chunk


def _write_all(fd: int) -> Callable[[bytes], None]:
    def write(data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]

    return write


def write_if_there(path: str, text: str) -> None:
    """Write ``text`` over the file ``path`` if it exists; never create it. ``/dev/fd/N`` is the
    descriptor ``N`` this process was given (a pipe), written while its reader is there: not opened
    again, which for a pipe whose reader has gone would wait for one."""
    inherited = path.removeprefix("/dev/fd/")
    try:
        fd = int(inherited) if inherited.isdigit() else os.open(path, os.O_WRONLY | os.O_TRUNC)
    except OSError:  # removed by its owner (ended by a signal): nothing to hand back
        return
    try:
        _write_all(fd)(text.encode("utf-8"))
    except OSError:  # a pipe whose reader has gone (the JVM started: nobody asks)
        pass
    finally:
        os.close(fd)


def main(argv: list[str]) -> int:
    """``python -m nsreplay.jvm_stderr KEPT_FILE`` (module docstring)."""
    (kept_file,) = argv
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    kept = KeptEnds()
    copy_stream(_chunks(0), _write_all(1), kept)
    write_if_there(kept_file, kept.text())
    return 0


#: The copies of the stderr of the JVMs this process started.
_COPIES: list[subprocess.Popen] = []


def _ignore_interrupts() -> None:
    """In the copy's process, before it runs: a Ctrl-C or SIGTERM must not end it before the JVM."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def launch_gateway(conf: Any) -> Any:
    """PySpark's ``launch_gateway(conf)`` (spark-submit starting the driver JVM with ``conf``), with the
    JVM's stderr passed to this process's stderr through ``python -m nsreplay.jvm_stderr``, whose
    kept ends come back through a pipe (no file: nothing is left behind, however this process
    ends). When the JVM ends before it gives its port (PySpark's ``JAVA_GATEWAY_EXITED``, which says
    nothing of why), a refusal of a setting that spark-submit or the driver JVM made there
    (:func:`nsreplay.jvm_exit.submit_refusal`, :func:`~nsreplay.jvm_exit.heap_refusal`) is raised
    as :class:`nsreplay.runtime.SparkConfigError`, as ``spark-submit.sh`` says it; any other end
    stays PySpark's error. The copy lives as long as the JVM's stderr is open."""
    from pyspark.java_gateway import launch_gateway as pyspark_launch_gateway

    from nsreplay.jvm_exit import heap_refusal, submit_refusal
    from nsreplay.runtime import SPARK_REFUSED, SparkConfigError

    kept_read, kept_write = os.pipe()
    try:
        package_root = str(Path(__file__).resolve().parents[1])
        python_path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)
        copier = subprocess.Popen([sys.executable, "-m", "nsreplay.jvm_stderr", f"/dev/fd/{kept_write}"], stdin=subprocess.PIPE, stdout=2,
                                  pass_fds=(kept_write,), env={**os.environ, "PYTHONPATH": python_path}, preexec_fn=_ignore_interrupts)
        os.close(kept_write)
        kept_write = -1
        try:
            gateway = pyspark_launch_gateway(conf, popen_kwargs={"stderr": copier.stdin})
            _COPIES.append(copier)  # runs as long as the JVM: not a child left unwaited for when this returns
            return gateway
        except Exception as exc:
            if getattr(exc, "getCondition", lambda: None)() != "JAVA_GATEWAY_EXITED":
                raise
            copier.stdin.close()  # the JVM has ended: the copy's input ends with this process's end of the pipe
            said = _read_until_closed(kept_read, _COPY_WAIT_SECONDS)
            refused = None if said is None else submit_refusal(said) or heap_refusal(said)
            if refused is None:
                raise
            raise SparkConfigError(f"{SPARK_REFUSED}: {refused}") from exc
        finally:
            if not copier.stdin.closed:
                copier.stdin.close()  # the JVM has its own copy of the pipe
    finally:
        os.close(kept_read)
        if kept_write >= 0:
            os.close(kept_write)


def _read_until_closed(fd: int, seconds: float) -> str | None:
    """All that is written to the pipe ``fd`` until its writer closes it, as text; ``None`` when that
    takes more than ``seconds`` (a child of the JVM still holds the JVM's stderr open)."""
    deadline = time.monotonic() + seconds
    data = bytearray()
    while (left := deadline - time.monotonic()) > 0:
        if not select.select([fd], [], [], left)[0]:
            break
        chunk = os.read(fd, 65536)
        if not chunk:
            return data.decode("utf-8", errors="replace")
        data += chunk
    return None


if __name__ == "__main__":  # pragma: no cover - run by spark-submit.sh and launch_gateway
    sys.exit(main(sys.argv[1:]))
