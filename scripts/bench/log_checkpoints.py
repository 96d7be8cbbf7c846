"""What the Delta log's checkpoint cadence costs a replay window: the window's metadata reads open
its tables ~200 times, and each open reads the table's last checkpoint and every commit after it.
delta-rs writes a checkpoint every 100 commits (delta-spark: every 10).

    .venv/bin/python scripts/bench/log_checkpoints.py --scratch DIR --rounds 2

Two parts, both printed:

1. **An open of the latest version** (``DeltaTable(uri)``, then its version), median of 40, on a
   table whose last checkpoint is ``d`` commits behind, for a few ``d``: the cost of one open as the
   log ages since its last checkpoint.
2. **Replay windows on an aged warehouse.** The tiny preset is ingested and its first two of six
   windows published, once. Each timed run gets a copy whose every table is then aged (commits
   that change no row: a compaction's mode, no file; the replay's bookkeeping ignores them) in one
   of two layouts, alternating: ``--depth`` commits since its last checkpoint (as a long-lived
   warehouse is on average under delta-rs's cadence: 0 to 99 behind), or the same commits with a
   checkpoint ``--depth-after`` commits before the end (as under a cadence of 10: 0 to 9 behind).
   Then, in a fresh process, the four remaining windows run one after the other (replay, gold
   check, publish), and their seconds are printed. The first window pays the JVM's warm-up; compare
   the others. ``--code`` picks the source tree (default: this one). Since the delta-rs backend
   writes a checkpoint itself every 10 commits, a table of the first layout that reaches a tenth
   commit during the windows gets one there: to measure the two layouts alone, give ``--code`` a
   tree from before that change (``docs/performance.md`` has the figures, measured so). And since
   the backend keeps the tables it opened (``nsreplay/storage/snapshots.py``), a process reads each
   log about once: with this tree the two layouts differ in a process's first opens only (windows
   4-6, 2026-11-29: 11.70 s and 11.65 s).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

from tiny_windows import WINDOWS, run_windows, tiny_capture

PREPARED_WINDOWS = 2


def tables(root: Path) -> list[Path]:
    """Every Delta table below a warehouse root."""
    return sorted(p.parent for p in root.rglob("_delta_log"))


def age(table: Path, commits: int) -> None:
    """``commits`` commits that change no row (no file; a compaction's mode, which the pipeline's
    bookkeeping does not take for a run's writes)."""
    from deltalake import CommitProperties, DeltaTable

    metadata = json.dumps({"mode": "compact", "job": "bench/age", "run_id": "bench-age"})
    for _ in range(commits):
        dt = DeltaTable(str(table))
        dt.create_write_transaction([], mode="append", schema=dt.schema(), partition_by=dt.metadata().partition_columns or None,
                                    commit_properties=CommitProperties(custom_metadata={"userMetadata": metadata}))


def last_checkpoint(table: Path) -> int:
    marker = table / "_delta_log" / "_last_checkpoint"
    return json.loads(marker.read_text())["version"] if marker.exists() else -1


def aged_copy(prepared: Path, target: Path, depth: int, checkpointed_at: int | None) -> None:
    """A copy of ``prepared`` whose every table's last checkpoint is ``depth`` commits behind its
    latest version, or ``checkpointed_at`` when given (a checkpoint written that many commits before
    the end, after ``depth - checkpointed_at`` commits)."""
    from deltalake import DeltaTable

    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(prepared, target)
    for table in tables(target):
        behind = DeltaTable(str(table)).version() - last_checkpoint(table)
        if checkpointed_at is None:
            age(table, max(0, depth - behind))
            continue
        age(table, max(0, depth - checkpointed_at - behind))
        DeltaTable(str(table)).create_checkpoint()
        age(table, checkpointed_at)


def open_costs(scratch: Path, depths: list[int]) -> None:
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    for depth in depths:
        table = scratch / f"open-{depth}"
        shutil.rmtree(table, ignore_errors=True)
        write_deltalake(str(table), pa.table({"a": [1]}))
        age(table, 5)
        DeltaTable(str(table)).create_checkpoint()
        age(table, depth)
        samples = []
        for _ in range(40):
            started = time.perf_counter()
            DeltaTable(str(table)).version()
            samples.append(time.perf_counter() - started)
        print(f"  {depth:3d} commits since the checkpoint: {statistics.median(samples) * 1000:6.2f} ms")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scratch", required=True, help="a directory for the captures and warehouses (emptied)")
    parser.add_argument("--code", default=".", help="the source tree to import nsreplay from (default: this one)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--depth", type=int, default=50, help="commits since the last checkpoint, delta-rs's cadence (mean of 0-99)")
    parser.add_argument("--depth-after", type=int, default=5, help="the same under the cadence of 10 (mean of 0-9)")
    args = parser.parse_args(argv)
    scratch = Path(args.scratch)
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    print("opening the latest version of a table (median of 40):")
    open_costs(scratch, [0, args.depth_after, 9, args.depth, 90])  # below 99: delta-rs checkpoints there itself

    capture, cuts = tiny_capture(scratch)
    prepared = scratch / "prepared"
    layouts = [None, args.depth_after]  # checkpointed at: never (within the depth), or that many commits before the end
    run_windows(args.code, prepared, capture, cuts[:PREPARED_WINDOWS], 0)
    print(f"replay windows {PREPARED_WINDOWS + 1}-{WINDOWS} of the tiny preset, seconds each (a fresh process per run):")
    for round_number in range(args.rounds):
        for after in layouts if round_number % 2 == 0 else list(reversed(layouts)):
            target = scratch / "run"
            aged_copy(prepared, target, args.depth, after)
            seconds = [w["seconds"] for w in run_windows(args.code, target, capture, cuts, PREPARED_WINDOWS)]
            behind = f"{args.depth} commits" if after is None else f"{after} commits (checkpointed)"
            print(f"  round {round_number + 1}, every table's last checkpoint {behind} behind: " + " / ".join(f"{s:.2f}" for s in seconds)
                  + f"; windows after the first: mean {statistics.mean(seconds[1:]):.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
