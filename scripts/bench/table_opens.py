"""What opening Delta tables costs a replay window, and what keeping them open saves.

    .venv/bin/python scripts/bench/table_opens.py --scratch DIR --code OLD --code . --rounds 2

A replay window asks for its tables ~200 times (latest versions, schemas, app ids, file lists). An
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
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

WINDOWS = 6  # the tiny preset's window, cut in six
PREPARED_WINDOWS = 2

CHILD = r"""
import json, sys, threading, time
from deltalake import DeltaTable
from nsreplay.config import load_settings
from nsreplay.runtime import build_spark
from nsreplay.storage import Warehouse
from pipelines.ingest.run import run_ingest
from pipelines.replay.run import run_replay

counts = {"open": [0, 0.0], "update": [0, 0.0]}
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

root, capture, cuts, first = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
settings = load_settings()
spark = build_spark(settings, "nsreplay-bench-opens")
warehouse = Warehouse(root, spark, settings.warehouse.backend)
if first == 0:
    run_ingest(spark, warehouse, settings, capture, "bench-opens-ingest")
windows = []
for i in range(first, len(cuts)):
    for c in counts.values():
        c[:] = [0, 0.0]
    started = time.perf_counter()
    run_replay(spark, warehouse, settings, f"bench-opens-{i}", window_from=cuts[i - 1] if i else None, window_to=cuts[i])
    windows.append({"seconds": time.perf_counter() - started, **{k: list(v) for k, v in counts.items()}})
print("json:" + json.dumps(windows))
"""


def run_child(code: str, root: Path, capture: Path, cuts: list[int], first: int) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": os.path.abspath(code)}
    args = [sys.executable, "-c", CHILD, str(root), str(capture), json.dumps(cuts), str(first)]
    done = subprocess.run(args, env=env, cwd=os.path.abspath(code), capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"the run failed in {code}:\n{done.stderr[-3000:]}")
    return json.loads(next(ln for ln in done.stdout.splitlines() if ln.startswith("json:"))[len("json:"):])


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

    from nsreplay.generator import generate, preset

    capture = scratch / "capture"
    generate(preset("tiny"), capture, workers=1)
    window = json.loads((capture / "_manifest.json").read_text())["window"]
    step = (window["last_ts"] - window["first_ts"]) // WINDOWS
    cuts = [window["first_ts"] + step * i for i in range(1, WINDOWS)] + [window["last_ts"]]
    prepared = scratch / "prepared"
    run_child(codes[0], prepared, capture, cuts[:PREPARED_WINDOWS], 0)
    print(f"replay windows {PREPARED_WINDOWS + 1}-{WINDOWS} of the tiny preset, a fresh process per run; per window: "
          "seconds [fresh opens, their seconds; incremental updates, their seconds]")
    for round_number in range(args.rounds):
        for code in codes if round_number % 2 == 0 else list(reversed(codes)):
            target = scratch / "run"
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(prepared, target)
            windows = run_child(code, target, capture, cuts, PREPARED_WINDOWS)
            shown = " / ".join(
                f"{w['seconds']:.2f} [{w['open'][0]}, {w['open'][1]:.2f} s; {w['update'][0]}, {w['update'][1]:.2f} s]" for w in windows
            )
            print(f"  round {round_number + 1}, {code}: {shown}; windows after the first: mean "
                  f"{statistics.mean(w['seconds'] for w in windows[1:]):.2f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
