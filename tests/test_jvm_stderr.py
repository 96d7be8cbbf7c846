"""nsreplay.jvm_stderr: a JVM's stderr passed on whole, its two ends kept to find a refusal of a
setting (tests/test_spark_submit_reason.py runs it under spark-submit.sh, and
tests/test_spark_refused_settings.py under a session built in-process)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from nsreplay.jvm_exit import submit_refusal
from nsreplay.jvm_stderr import KeptEnds, copy_stream

ROOT = Path(__file__).resolve().parents[1]

#: spark-submit's refusal of a setting, as it ends its stderr (its last lines).
REFUSAL = ('Exception in thread "main" org.apache.spark.SparkException: Executor memory must be a positive number\n'
           "\tat org.apache.spark.deploy.SparkSubmitArguments.error(SparkSubmitArguments.scala:640)\n"
           "\tat org.apache.spark.deploy.SparkSubmitArguments.validateSubmitArguments(SparkSubmitArguments.scala:268)\n")


def test_a_short_stream_is_kept_whole() -> None:
    kept = KeptEnds(limit=16)
    for chunk in (b"first line\n", b"second ", b"line\n"):
        kept.add(chunk)
    assert kept.text() == "first line\nsecond line\n"


def test_a_long_stream_keeps_its_first_and_last_bytes_from_a_whole_line_on() -> None:
    """The bytes between the two ends are left out, said with a line of their own; the tail starts at
    its first whole line (a regular expression anchored at a line's start must not match half of one)."""
    kept = KeptEnds(limit=12)
    for chunk in (b"head line 1\nhead line 2\n", b"x" * 1000 + b"\n", b"tail 1\ntail 2\n"):
        kept.add(chunk)
    assert kept.text() == "head line 1\n\n[... 1020 bytes of stderr left out ...]\ntail 2\n"
    assert kept.total == 24 + 1001 + 14


def test_the_tail_kept_is_bounded_whatever_the_stream_s_length() -> None:
    kept = KeptEnds(limit=1024)
    for i in range(100_000):
        kept.add(f"log line {i}\n".encode())
    assert len(kept.head) == 1024 and len(kept.tail) <= 2 * 1024
    assert kept.text().endswith("log line 99998\nlog line 99999\n")


def test_a_refusal_after_a_long_log_is_still_found_in_what_is_kept() -> None:
    kept = KeptEnds()
    for i in range(20_000):
        kept.add(f"2026-11-30T04:00:00.000Z WARN Something: line {i} of a long run\n".encode())
    kept.add(REFUSAL.encode())
    assert submit_refusal(kept.text()) == "SparkException: Executor memory must be a positive number"


def test_the_stream_is_still_read_and_kept_once_its_reader_has_gone() -> None:
    """A reader gone (``| head``) must not stop the copy: the JVM writing stderr would block, or die."""
    written: list[bytes] = []

    def write(chunk: bytes) -> None:
        if len(written) == 2:
            raise BrokenPipeError
        written.append(chunk)

    kept = KeptEnds()
    copy_stream([b"a\n", b"b\n", b"c\n", b"d\n"], write, kept)
    assert (written, kept.text()) == ([b"a\n", b"b\n"], "a\nb\nc\nd\n")


def run_copy(kept_file: Path, stdin: bytes) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nsreplay.jvm_stderr", str(kept_file)], input=stdin, capture_output=True, timeout=60,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_the_copy_passes_its_input_on_whole_and_writes_the_kept_ends_to_its_file(tmp_path) -> None:
    stream = b"".join(b"line %07d " % i + b"y" * 90 + b"\n" for i in range(10_000)) + REFUSAL.encode()
    kept_file = tmp_path / "kept"
    kept_file.touch()
    result = run_copy(kept_file, stream)
    assert (result.returncode, result.stdout, result.stderr) == (0, stream, b"")
    kept = kept_file.read_text()
    assert kept.startswith("line 0000000 ") and kept.endswith(REFUSAL) and len(kept.encode()) <= 2 * 64 * 1024 + 100
    assert submit_refusal(kept) == "SparkException: Executor memory must be a positive number"


def test_the_copy_does_not_create_a_file_its_caller_removed(tmp_path) -> None:
    """spark-submit.sh removes its files as it ends, by a signal too; the copy ends after it."""
    result = run_copy(tmp_path / "kept", b"the JVM's last line\n")
    assert (result.returncode, result.stdout) == (0, b"the JVM's last line\n")
    assert list(tmp_path.iterdir()) == []
