"""Spark's cache of generated code (``spark.sql.codegen.cache.maxEntries``) against the windows of
one process: the tiny preset cut in six windows, replayed one after the other in a fresh process
per run, each run with another cache size, the sizes alternating.

    .venv/bin/python scripts/bench/codegen_cache.py --scratch /tmp/codegen \\
        --entries 100 --entries 1000 --rounds 2

Spark compiles (Janino) the code it generates for each stage and expression and keeps the compiled
classes in one cache per JVM, shared by every query. A run's settings are conf/base's with only
``spark.sql.codegen.cache.maxEntries`` changed (a copy of ``conf/`` in the scratch directory,
through ``NSREPLAY_CONF_DIR``). It prints, per run, the seconds of each window, the sum of windows
3-6 (the JVM warm, as in a backfill or any long-lived session) and the classes Spark compiled in
each window (``CodegenMetrics``: one count per compilation, cache hits not counted).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tiny_windows import run_windows, tiny_capture  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SETTING = "spark.sql.codegen.cache.maxEntries"

#: Run in the child before nsreplay is imported: counts Spark's compilations during each window.
PRELUDE = r"""
import pipelines.replay.run as _replay_run
counts.update({"compiles": [0, 0.0]})
_run_replay = _replay_run.run_replay

def _counted(spark, *args, **kwargs):
    compilations = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
    before = compilations.getCount()
    try:
        return _run_replay(spark, *args, **kwargs)
    finally:
        counts["compiles"][0] += compilations.getCount() - before

_replay_run.run_replay = _counted
"""


def conf_with(scratch: Path, entries: int) -> Path:
    """A copy of the project's ``conf/`` whose base Spark defaults set the cache to ``entries``."""
    target = scratch / f"conf-{entries}"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(ROOT / "conf", target)
    defaults = target / "base" / "spark-defaults.conf"
    kept = [line for line in defaults.read_text().splitlines() if not line.startswith(SETTING)]
    defaults.write_text("\n".join(kept + [f"{SETTING} {entries}"]) + "\n")
    return target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scratch", type=Path, required=True, help="a directory for the capture, conf copies and warehouses")
    parser.add_argument("--entries", type=int, action="append", help="a cache size to run (repeatable; default: 100 and 1000)")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    sizes = args.entries or [100, 1000]
    if args.rounds < 1 or any(n < 0 for n in sizes):
        parser.error("--rounds must be at least 1 and --entries at least 0")
    args.scratch.mkdir(parents=True, exist_ok=True)
    capture, cuts = tiny_capture(args.scratch)
    confs = {n: conf_with(args.scratch, n) for n in sizes}
    print(f"capture: tiny preset, {capture}")
    for round_no in range(1, args.rounds + 1):
        for entries in sizes:
            root = args.scratch / "wh"
            shutil.rmtree(root, ignore_errors=True)
            windows = run_windows(str(ROOT), root, capture, cuts, first=0, prelude=PRELUDE,
                                  env={"NSREPLAY_CONF_DIR": str(confs[entries])})
            seconds = [w["seconds"] for w in windows]
            compiles = [w["compiles"][0] for w in windows]
            print(f"round {round_no}, {SETTING}={entries}: windows {' / '.join(f'{s:.2f}' for s in seconds)} s; "
                  f"windows 3-6 {sum(seconds[2:]):.2f} s; compilations {' / '.join(map(str, compiles))}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
