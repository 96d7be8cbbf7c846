"""What opening Delta tables costs a replay window, and what keeping them open saves.

    .venv/bin/python scripts/bench/table_opens.py --scratch DIR --code OLD --code . --rounds 2

A replay window asks for its tables ~165 times (latest versions, schemas, app ids, file lists). An
open of a table (``DeltaTable(uri)``) reads the log's last checkpoint and every commit after it;
the delta-rs backend now keeps the tables it opened (``nsreplay/storage/snapshots.py``) and brings
them up to date with ``update_incremental``, which reads only the commits made since.

The tiny preset is generated, ingested and its first two of six windows published once (with the
first ``--code``). Each run gets a copy of that warehouse and runs the four remaining windows one
after the other (replay, gold check, publish) in a fresh process of one ``--code`` tree, the trees
alternating round by round. Printed per window: its seconds, how many times the process read a
table's log afresh (``DeltaTable(...)``) and the seconds those took, and how many incremental
updates ran and their seconds (on the driver; the writes' threads overlap, so these seconds may
exceed their share of the window's). The first window of a process pays the JVM's warm-up: compare
the others.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
from pathlib import Path

from tiny_windows import WINDOWS, run_windows, tiny_capture

PREPARED_WINDOWS = 2

#: Run in the child before nsreplay is imported: counts fresh opens of a table's log and incremental updates.
PRELUDE = r"""
import threading
from deltalake import DeltaTable
counts.update({"open": [0, 0.0], "update": [0, 0.0]})
lock = threading.Lock()

def counted(name, function):
    def wrapper(*args, **kwargs):
        started = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            with lock:
                counts[name][0] += 1
                counts[name][1] += time.perf_counter() - started
    return wrapper

DeltaTable.__init__ = counted("open", DeltaTable.__init__)
DeltaTable.update_incremental = counted("update", DeltaTable.update_incremental)
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scratch", required=True, help="a directory for the capture and warehouses (emptied)")
    parser.add_argument("--code", action="append", help="a source tree to import nsreplay from (repeat; default: this one)")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    codes = args.code or ["."]
    scratch = Path(args.scratch)
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)

    capture, cuts = tiny_capture(scratch)
    prepared = scratch / "prepared"
    run_windows(codes[0], prepared, capture, cuts[:PREPARED_WINDOWS], 0)
    print(f"replay windows {PREPARED_WINDOWS + 1}-{WINDOWS} of the tiny preset, a fresh process per run; per window: "
          "seconds [fresh opens, their seconds; incremental updates, their seconds]")
    for round_number in range(args.rounds):
        for code in codes if round_number % 2 == 0 else list(reversed(codes)):
            target = scratch / "run"
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(prepared, target)
            windows = run_windows(code, target, capture, cuts, PREPARED_WINDOWS, prelude=PRELUDE)
            shown = " / ".join(
                f"{w['seconds']:.2f} [{w['open'][0]}, {w['open'][1]:.2f} s; {w['update'][0]}, {w['update'][1]:.2f} s]" for w in windows
            )
            print(f"  round {round_number + 1}, {code}: {shown}; windows after the first: mean "
                  f"{statistics.mean(w['seconds'] for w in windows[1:]):.2f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
