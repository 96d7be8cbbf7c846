"""The driver JVM's CPU by kind of thread: from a /proc tree written here (exact values), and from
the real session JVM of this test run (its HotSpot thread names are the ones the kinds expect)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nsreplay.jvm_threads import KINDS, JvmCpu, cpu_seconds, jvm_cpu, read_jvm_cpu, thread_kind


def _stat(tid: int, name: str, utime: int, stime: int) -> str:
    # the layout of /proc/<pid>/stat: pid (comm) state ppid ... with utime and stime as fields 14, 15
    rest = ["S", "1", "1", "1", "0", "-1", "4194560", "10", "0", "0", "0", str(utime), str(stime), "0", "0", "20", "0", "30", "0"]
    return f"{tid} ({name}) " + " ".join(rest) + "\n"


def _write_proc(root: Path, pid: int, process: tuple[int, int], threads: dict[int, tuple[str, int, int]]) -> None:
    (root / str(pid) / "task").mkdir(parents=True)
    (root / str(pid) / "stat").write_text(_stat(pid, "java", *process))
    for tid, (name, utime, stime) in threads.items():
        folder = root / str(pid) / "task" / str(tid)
        folder.mkdir()
        (folder / "comm").write_text(name + "\n")
        (folder / "stat").write_text(_stat(tid, name, utime, stime))


def test_thread_names_map_to_kinds() -> None:
    assert [thread_kind(n) for n in (
        "Executor task l", "C2 CompilerThre", "C1 CompilerThre", "GC Thread#0", "VM Thread", "G1 Conc#0", "main", "Thread-3", "C2 Sweeper",
    )] == ["tasks", "jit compiler", "jit compiler", "gc", "gc", "gc", "other", "other", "other"]


def test_cpu_seconds_counts_fields_after_the_name_even_with_spaces_and_parentheses() -> None:
    assert cpu_seconds(_stat(7, "a (b) c)", 250, 50), 100) == 3.0


def test_a_proc_tree_sums_live_threads_by_kind_and_the_rest_as_exited(tmp_path: Path) -> None:
    _write_proc(tmp_path, 41, (9000, 1000), {
        41: ("java", 100, 0),
        42: ("Executor task l", 3000, 500),
        43: ("Executor task l", 1000, 0),
        44: ("C2 CompilerThre", 2500, 0),
        45: ("C1 CompilerThre", 400, 0),
        46: ("GC Thread#0", 300, 100),
        47: ("VM Thread", 100, 0),
    })
    cpu = read_jvm_cpu(41, proc=tmp_path)
    ticks = os.sysconf("SC_CLK_TCK")
    assert cpu == JvmCpu({k: round(v / ticks, 2) for k, v in {
        "tasks": 4500, "jit compiler": 2900, "gc": 500, "other": 100, "exited threads": 10000 - 8000,
    }.items()})
    assert cpu.seconds.keys() == set(KINDS)


def test_no_such_process_reads_as_none(tmp_path: Path) -> None:
    assert read_jvm_cpu(99, proc=tmp_path) is None


def test_since_is_the_difference_per_kind_and_text_names_every_kind() -> None:
    before = jvm_cpu(_stat(1, "java", 100, 0), [("Executor task l", _stat(2, "x", 50, 0)), ("C2 CompilerThre", _stat(3, "x", 30, 0))], 10)
    after = jvm_cpu(_stat(1, "java", 400, 0), [("C2 CompilerThre", _stat(3, "x", 130, 0)), ("GC Thread#0", _stat(4, "x", 20, 0))], 10)
    # the task thread ended: its 5 s before move to "exited threads" (25 s after, of which 20 are new)
    assert after.since(before) == JvmCpu({"tasks": -5.0, "jit compiler": 10.0, "gc": 2.0, "other": 0.0, "exited threads": 23.0})
    assert after.since(before).total == pytest.approx(30.0)
    assert after.text() == "40.0 s (tasks 0.0, jit compiler 13.0, gc 2.0, other 0.0, exited threads 25.0)"


def test_the_session_jvm_reads_with_its_compiler_and_task_threads(spark) -> None:
    spark.range(200_000).selectExpr("sum(id * 3)").collect()
    pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    cpu = read_jvm_cpu(pid)
    assert cpu is not None
    # HotSpot's compiler threads and Spark's task threads exist under the names the kinds expect
    assert cpu.seconds["jit compiler"] > 0 and cpu.seconds["tasks"] > 0
    assert all(v >= 0 for v in cpu.seconds.values())
