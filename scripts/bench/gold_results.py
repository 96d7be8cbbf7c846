"""What a replay retry pays to find its run's gold quality results (``pipelines.replay.run._gold_results``,
which every retry of a run id whose run row is written calls, to tell whether its attempt failed).

    .venv/bin/python scripts/bench/gold_results.py --dir /tmp/gold-results --runs 200,400 --rounds 3

Builds ``silver.quality_results`` as ``--runs`` scheduled windows leave it (kept in ``--dir``; each
window one ingest check and one gold check, each its own delta-rs append of one small file, as the
pipeline's are), then, per size, times in one Spark session, the two ways alternating:

* ``before``: the run's results read as the code before read them (``run_rows``: the files of its
  gold-quality commit when that is among the table's newest 100 commits, else a filter over the
  whole table);
* ``now``: ``_gold_results`` as it stands.

for three runs: ``pending`` (its replay wrote, its quality stage never ran: an Airflow retry of the
replay task), ``oldest`` (checked long ago: a cleared window of last month) and ``newest``. Prints
the table's files and each lookup's seconds; checks that both ways find the same rows.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from nsreplay.config import load_settings
from nsreplay.runtime import build_spark, local_frame
from nsreplay.storage import CommitInfo, Warehouse
from pipelines.replay.attempts import attempt_job
from pipelines.replay.run import GOLD_QUALITY_JOB, _gold_results, run_rows
from schemas.silver import QUALITY_RESULTS

INGEST_CHECKS, GOLD_CHECKS = 8, 11


def _rows(run_id: str, suite: str, checks: int, attempt: int | None) -> list[tuple]:
    return [(run_id, suite, f"expect_{k}", "ts", True, 1000, 0, 0.0, "{}", attempt) for k in range(checks)]


def build(warehouse: Warehouse, spark, start: int, runs: int) -> None:
    for i in range(start, runs):
        warehouse.append(QUALITY_RESULTS, local_frame(spark, _rows(f"ingest-{i:05d}", "silver.events", INGEST_CHECKS, None), QUALITY_RESULTS.schema),
                         CommitInfo(run_id=f"ingest-{i:05d}", job="ingest-quality"))
        warehouse.append(QUALITY_RESULTS, local_frame(spark, _rows(f"routes-{i:05d}", "gold.route_changes", GOLD_CHECKS, 1), QUALITY_RESULTS.schema),
                         CommitInfo(run_id=f"routes-{i:05d}", job=GOLD_QUALITY_JOB))


def before(warehouse: Warehouse, run_id: str, attempt: int) -> list[dict[str, Any]]:
    """``_gold_results`` as it was: the run's rows, then the gold ones of ``attempt``."""
    if not warehouse.exists(QUALITY_RESULTS):
        return []
    rows = run_rows(warehouse, QUALITY_RESULTS, attempt_job(GOLD_QUALITY_JOB, attempt), run_id)
    return [r for r in rows if r["suite"].startswith("gold.") and (r.get("attempt") or 1) == attempt]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default="200,400")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", default="/tmp/gold-results")
    args = parser.parse_args()
    spark = build_spark(load_settings(), "gold-results-bench", master="local[2]")
    Path(args.dir).mkdir(parents=True, exist_ok=True)
    warehouse = Warehouse(args.dir, spark, "delta-rs")
    built = 0
    if warehouse.exists(QUALITY_RESULTS):
        built = len({h["run_id"] for h in warehouse.history(QUALITY_RESULTS) if (h["run_id"] or "").startswith("routes-")})
    for runs in [int(n) for n in args.runs.split(",")]:
        build(warehouse, spark, built, runs)
        built = max(built, runs)
        print(f"{runs} windows: silver.quality_results has {len(warehouse.files(QUALITY_RESULTS))} files", flush=True)
        # `pending`: a run whose replay wrote and whose quality stage has not run (no rows of it)
        lookups = {"pending": f"routes-{runs:05d}", "oldest": "routes-00000", "newest": f"routes-{runs - 1:05d}"}
        for name, run_id in lookups.items():
            for r in range(args.rounds):
                found = {}
                for way in ("before", "now") if r % 2 == 0 else ("now", "before"):
                    started = time.perf_counter()
                    found[way] = (before if way == "before" else _gold_results)(warehouse, run_id, 1)
                    print(f"  {name:<7} round {r} {way:<6}: {time.perf_counter() - started:.2f} s", flush=True)
                assert sorted(found["before"], key=str) == sorted(found["now"], key=str), name
                assert len(found["now"]) == (0 if name == "pending" else GOLD_CHECKS), (name, len(found["now"]))
    spark.stop()


if __name__ == "__main__":
    main()
