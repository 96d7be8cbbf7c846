"""CPU seconds of a process and everything it started: the benchmark's measure of work done.

Wall time depends on what else the machine runs; CPU is the work itself, and what a cluster pays
for (the floor's CPU on bench-day: 58.4-59.3 s in three runs in a row). A driver process starts the JVM, and the JVM
starts Spark's Python worker daemon, which forks the workers; Linux keeps in
``/proc/<pid>/stat`` each process's own user + system time (fields 14, 15) and that of its
children that have ended and been waited for (fields 16, 17, e.g. a Python worker that exited).
The CPU of a tree is the sum of both over the root and every live descendant, so a worker that
ends between two readings still counts (in its parent's share) as long as its parent lives on.

:func:`read_tree_cpu` is the only I/O; the rest is pure.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from nsreplay.jvm_threads import cpu_seconds


def parent_pid(stat: str) -> int:
    """The parent's pid from the text of a ``/proc/<pid>/stat`` file (field 4)."""
    return int(stat.rsplit(")", 1)[1].split()[1])


def with_children_seconds(stat: str, clock_ticks: int) -> float:
    """User + system CPU seconds of a process and of its ended, waited-for children (fields 14-17)."""
    fields = stat.rsplit(")", 1)[1].split()
    return cpu_seconds(stat, clock_ticks) + (int(fields[13]) + int(fields[14])) / clock_ticks


def tree_cpu(stats: Mapping[int, str], root: int, clock_ticks: int) -> float | None:
    """CPU seconds of ``root`` and its live descendants, from ``pid → stat text`` of every process
    (None when ``root`` is not among them)."""
    if root not in stats:
        return None
    children: dict[int, list[int]] = {}
    for pid, stat in stats.items():
        children.setdefault(parent_pid(stat), []).append(pid)
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += with_children_seconds(stats[pid], clock_ticks)
        todo += children.get(pid, [])
    return round(total, 2)


def read_tree_cpu(root: int, proc: str | Path = "/proc") -> float | None:
    """:func:`tree_cpu` of ``root`` read from ``proc``; None where that cannot be read (not Linux).
    Processes that end during the reading are skipped."""
    stats: dict[int, str] = {}
    try:
        entries = [p for p in Path(proc).iterdir() if p.name.isdigit()]
    except OSError:
        return None
    for entry in entries:
        try:
            stats[int(entry.name)] = (entry / "stat").read_text()
        except OSError:
            continue
    return tree_cpu(stats, root, os.sysconf("SC_CLK_TCK"))


__all__ = ["parent_pid", "read_tree_cpu", "tree_cpu", "with_children_seconds"]
