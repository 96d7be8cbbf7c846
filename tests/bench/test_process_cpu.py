"""The CPU of a process tree: the root and every live descendant, each with its ended children,
read from a /proc tree (built in a temporary directory) and from this machine's /proc."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from nsreplay.process_cpu import parent_pid, read_tree_cpu, tree_cpu, with_children_seconds


def _stat(pid: int, name: str, ppid: int, utime: int, stime: int, cutime: int = 0, cstime: int = 0) -> str:
    # fields 3-13 before utime; a name with spaces and a parenthesis, as /proc allows
    return f"{pid} ({name}) S {ppid} {pid} {pid} 0 -1 4194560 100 0 0 0 {utime} {stime} {cutime} {cstime} 20 0 1 0 5 0 0\n"


def test_fields_are_counted_from_the_end_of_the_name() -> None:
    stat = _stat(7, "python3 (worker) x", 3, 200, 100, 40, 10)
    assert parent_pid(stat) == 3
    assert with_children_seconds(stat, 100) == 3.5


def test_a_tree_sums_the_root_and_its_live_descendants_not_other_processes() -> None:
    stats = {
        10: _stat(10, "python", 1, 100, 0),  # the driver
        11: _stat(11, "java", 10, 5000, 500),  # its JVM
        12: _stat(12, "python3 -m pyspark.daemon", 11, 50, 0, 700, 100),  # the daemon, with ended workers
        13: _stat(13, "python3 -m pyspark.daemon", 12, 300, 0),  # a live worker
        20: _stat(20, "other", 1, 9999, 0),  # not in the tree
        21: _stat(21, "its child", 20, 9999, 0),
    }
    assert tree_cpu(stats, 10, 100) == (100 + 5500 + 850 + 300) / 100
    assert tree_cpu(stats, 12, 100) == (850 + 300) / 100
    assert tree_cpu(stats, 99, 100) is None


def test_a_proc_directory_reads_like_the_pure_function(tmp_path: Path) -> None:
    stats = {5: _stat(5, "root", 1, 10, 0), 6: _stat(6, "child", 5, 20, 5)}
    for pid, text in stats.items():
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(text)
    (tmp_path / "self").mkdir()  # not a pid: ignored
    ticks = os.sysconf("SC_CLK_TCK")
    assert read_tree_cpu(5, proc=tmp_path) == tree_cpu(stats, 5, ticks)
    assert read_tree_cpu(5, proc=tmp_path / "missing") is None


_BURN = "import time\nend = time.process_time() + 0.6\nwhile time.process_time() < end: pass\n"


#: The scenario of the test below, run in a fresh interpreter: this test process has other
#: descendants (the session's Spark JVM, its Python workers, servers other tests started), and one
#: of them ending unreaped by the tree takes its CPU out of the tree between two readings.
_SCENARIO = f"""
import json, os, subprocess, sys, time
from nsreplay.process_cpu import read_tree_cpu
BURN = {_BURN!r}
before = read_tree_cpu(os.getpid())
running = subprocess.Popen([sys.executable, "-c", BURN + "time.sleep(30)"])
try:
    deadline = time.monotonic() + 20
    while (read_tree_cpu(running.pid) or 0) < 0.5 and time.monotonic() < deadline:
        time.sleep(0.05)
    live = read_tree_cpu(os.getpid())
finally:
    running.kill()
    running.wait()
subprocess.run([sys.executable, "-c", BURN], check=True)  # ends and is waited for
after = read_tree_cpu(os.getpid())
print(json.dumps([before, live, after]))
"""


def test_this_process_counts_a_child_that_burned_cpu_and_ended() -> None:
    done = subprocess.run([sys.executable, "-c", _SCENARIO], cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True,
                          check=True, timeout=120)
    before, live, after = json.loads(done.stdout.splitlines()[-1])
    assert before is not None and live is not None and after is not None
    assert live - before >= 0.5  # the live child's time
    assert after - before >= 1.1  # both children, the ended ones in this process's share
