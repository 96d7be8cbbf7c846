"""Where a JVM's CPU went, by kind of thread: Spark's tasks, the JIT compilers, the garbage collector.

A Spark event log gives task time, which hides the JVM's own work outside the task threads. On a
machine with few cores that work competes with the tasks: on bench-day (2 cores) the JIT compiler
threads alone used about a quarter of the driver JVM's CPU. Linux keeps each thread's CPU time in
``/proc/<pid>/task/<tid>/stat`` and its name (cut to 15 characters) in ``.../comm``; this module sums
them by kind:

* ``tasks`` — Spark's task threads (``Executor task launch worker ...``); in local mode the executor
  runs in the driver's JVM, so these are the tasks' JVM side (not their Python workers);
* ``jit compiler`` — HotSpot's C1 and C2 compiler threads;
* ``gc`` — the collector's worker threads and the VM thread that runs its safepoint operations;
* ``other`` — every other live thread (Spark's driver, shuffle and RPC threads, py4j, ...);
* ``exited threads`` — the process's CPU time minus that of its live threads (threads that ended
  before the reading, such as idle task threads that Spark's pool let go).

:func:`read_jvm_cpu` is the only I/O; the rest is pure.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

KINDS = ("tasks", "jit compiler", "gc", "other", "exited threads")

_PREFIXES = (
    ("tasks", ("Executor task l",)),
    ("jit compiler", ("C1 CompilerThre", "C2 CompilerThre")),
    ("gc", ("GC Thread#", "ParGC Thread#", "G1 ", "VM Thread")),
)


def thread_kind(name: str) -> str:
    """The kind of a JVM thread from its (possibly cut) name; ``other`` when none applies."""
    for kind, prefixes in _PREFIXES:
        if name.startswith(prefixes):
            return kind
    return "other"


def cpu_seconds(stat: str, clock_ticks: int) -> float:
    """User + system CPU seconds from the text of a ``/proc/.../stat`` file. The name field may hold
    spaces and parentheses, so the fields are counted from its closing parenthesis."""
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / clock_ticks  # utime and stime: fields 14 and 15


@dataclass(frozen=True)
class JvmCpu:
    """CPU seconds of one JVM by kind of thread (every kind of :data:`KINDS`, 0.0 when absent)."""

    seconds: Mapping[str, float] = field(default_factory=lambda: {k: 0.0 for k in KINDS})

    @property
    def total(self) -> float:
        return sum(self.seconds.values())

    def since(self, earlier: JvmCpu) -> JvmCpu:
        """The CPU used between ``earlier`` and this reading, per kind. The total is exact; a thread
        that ended in between moves its earlier time from its kind to ``exited threads``, so that
        kind then shows less than it used (even less than zero)."""
        return JvmCpu({k: round(self.seconds.get(k, 0.0) - earlier.seconds.get(k, 0.0), 2) for k in KINDS})

    def text(self) -> str:
        """E.g. ``104.2 s (tasks 61.0, jit compiler 30.5, gc 4.1, other 8.6, exited threads 0.0)``."""
        parts = ", ".join(f"{k} {self.seconds.get(k, 0.0):.1f}" for k in KINDS)
        return f"{self.total:.1f} s ({parts})"


def jvm_cpu(process_stat: str, threads: Iterable[tuple[str, str]], clock_ticks: int) -> JvmCpu:
    """:class:`JvmCpu` from the process's stat text and the (name, stat text) of its live threads."""
    by_kind = {k: 0.0 for k in KINDS}
    for name, stat in threads:
        by_kind[thread_kind(name)] += cpu_seconds(stat, clock_ticks)
    live = sum(by_kind.values())
    by_kind["exited threads"] = max(0.0, cpu_seconds(process_stat, clock_ticks) - live)
    return JvmCpu({k: round(v, 2) for k, v in by_kind.items()})


def read_jvm_cpu(pid: int, proc: str | Path = "/proc") -> JvmCpu | None:
    """The CPU of process ``pid`` by kind of thread, read from ``proc``; None where that cannot be
    read (not Linux, no such process). Threads that end during the reading are skipped."""
    root = Path(proc) / str(pid)
    try:
        process_stat = (root / "stat").read_text()
        tids = [p.name for p in (root / "task").iterdir()]
    except OSError:
        return None
    threads: list[tuple[str, str]] = []
    for tid in tids:
        try:
            threads.append(((root / "task" / tid / "comm").read_text().rstrip("\n"), (root / "task" / tid / "stat").read_text()))
        except OSError:  # the thread ended meanwhile: its time is in "exited threads"
            continue
    return jvm_cpu(process_stat, threads, os.sysconf("SC_CLK_TCK"))


__all__ = ["KINDS", "JvmCpu", "cpu_seconds", "jvm_cpu", "read_jvm_cpu", "thread_kind"]
