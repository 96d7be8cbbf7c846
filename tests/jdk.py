"""The JDK of this machine as a test's reference: run a Java source file of the tests over input lines."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from nsreplay.local_fs import find_jdk_tool


def run_java(source: Path, lines: list[str]) -> list[str]:
    """``java source`` (the JDK's source launcher) fed ``lines``, one answer line per input line.
    Without a ``java``, skips, but fails under CI (where .ci/run installs a JDK)."""
    java = find_jdk_tool("java")
    if java is None:
        if os.environ.get("CI"):
            pytest.fail("CI: no java found (.ci/run installs a JDK)")
        pytest.skip("no java here: the JDK is the reference of this test")
    done = subprocess.run([java, str(source)], input="".join(f"{line}\n" for line in lines), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    answers = done.stdout.splitlines()
    assert len(answers) == len(lines)
    return answers
