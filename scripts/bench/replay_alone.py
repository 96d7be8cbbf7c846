"""The replay stage alone (replay, gold check, publish) on an ingested warehouse, each run in a fresh
process, on one or more code trees alternating: what a change to the replay costs or saves.

    .venv/bin/python scripts/bench/replay_alone.py --source WAREHOUSE --scratch DIR --rounds 2
    .venv/bin/python scripts/bench/replay_alone.py --source WAREHOUSE --scratch DIR \\
        --code /tmp/old-tree --code . --resume-hours 6     # the last 6 hours, resumed from a published state

``--source`` is a warehouse whose ingest ran (``nsreplay bench rebuild --warehouse W`` leaves one):
each run gets a copy of its bronze and silver tables, without gold. With ``--resume-hours H`` the
copy first gets, once, with the first code tree, a published replay up to H hours before the last
record; each timed run then replays the window after it, resuming every unit from its state, as an
hourly schedule does. Each measurement is a fresh process (``--code`` picks the source tree it
imports, for the driver and Spark's Python workers), so every run pays the same JVM start and warm-up.
It prints, per run: the seconds of ``run_replay`` and of its stages, and the changes it wrote.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

HOUR = 3_600_000

CHILD = r"""
import json, sys, time
from nsreplay.config import load_settings
from nsreplay.runtime import build_spark, new_run_id
from nsreplay.storage import Warehouse
from pipelines.replay.run import run_replay

root, window_from, window_to = sys.argv[1], sys.argv[2], sys.argv[3]
settings = load_settings()
spark = build_spark(settings, "nsreplay-bench-replay")
warehouse = Warehouse(root, spark, settings.warehouse.backend)
bounds = {"window_from": int(window_from) if window_from != "-" else None, "window_to": int(window_to) if window_to != "-" else None}
started = time.perf_counter()
result = run_replay(spark, warehouse, settings, new_run_id("bench-replay"), **bounds)
print("json:" + json.dumps({"seconds": time.perf_counter() - started, "changes": result.changes, "stages": result.stages}))
"""


def last_record(root: Path) -> int:
    """The latest ``ts`` of silver.events (from its files, with pyarrow)."""
    import pyarrow.dataset as ds

    table = ds.dataset(str(root / "silver" / "events"), format="parquet", partitioning="hive").to_table(columns=["ts"])
    return int(table["ts"].to_numpy().max())


def fresh_copy(source: Path, target: Path, prepared: Path | None) -> None:
    shutil.rmtree(target, ignore_errors=True)
    if prepared is not None:
        shutil.copytree(prepared, target)
        return
    target.mkdir(parents=True)
    for layer in ("bronze", "silver"):
        shutil.copytree(source / layer, target / layer)


def run(code: str, root: Path, window_from: int | None, window_to: int | None) -> dict:
    env = {**os.environ, "PYTHONPATH": os.path.abspath(code)}
    args = [sys.executable, "-c", CHILD, str(root), "-" if window_from is None else str(window_from), "-" if window_to is None else str(window_to)]
    done = subprocess.run(args, env=env, cwd=os.path.abspath(code), capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"the replay failed in {code}:\n{done.stderr[-3000:]}")
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("json:"))
    return json.loads(line[len("json:"):])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", required=True, help="an ingested warehouse (its bronze and silver are copied)")
    parser.add_argument("--scratch", required=True, help="a directory for the copies (emptied)")
    parser.add_argument("--code", action="append", help="source tree to import nsreplay from (repeatable; default: this one)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--resume-hours", type=float, default=0.0, help="time only the last H hours, resumed from a published state")
    args = parser.parse_args(argv)
    here = str(Path(__file__).resolve().parents[2])
    codes = args.code or [here]
    source, scratch = Path(args.source), Path(args.scratch)
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    window_from = prepared = None
    if args.resume_hours > 0:
        window_from = last_record(source) - int(args.resume_hours * HOUR)
        prepared = scratch / "prepared"
        fresh_copy(source, prepared, None)
        run(codes[0], prepared, None, window_from)  # the history before the timed window (untimed)
        print(f"prepared: replayed and published up to {window_from} with {codes[0]}", flush=True)
    for r in range(args.rounds):
        for code in codes if r % 2 == 0 else list(reversed(codes)):
            root = scratch / "run"
            fresh_copy(source, root, prepared)
            figures = run(code, root, window_from, None)
            stages = "  ".join(f"{k} {v:.1f}" for k, v in figures["stages"].items())
            print(f"round {r + 1}  {code}  {figures['seconds']:.1f} s  changes {figures['changes']}  ({stages})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
