"""A replay window's cost as the fleet of NameServers grows: the tiny preset with ``--namesrvs K``
NameServers (the same brokers, each registering with all of them), its window cut in six, replayed
window after window in a fresh process per run, one or more code trees alternating.

    .venv/bin/python scripts/bench/fleet_windows.py --namesrvs 12 --scratch /tmp/fleet \\
        --code /tmp/old-tree --code . --rounds 2

Each run ingests the capture into a fresh warehouse, then replays the six windows (each with its
gold check and publish). It prints, per run, the seconds of each window and the sum of windows 3-6
(the JVM warm, as in a long-lived session or a scheduled run's later windows).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tiny_windows import run_windows, tiny_capture  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--namesrvs", type=int, default=12, help="NameServers in the capture (the tiny preset has 2)")
    parser.add_argument("--scratch", type=Path, required=True, help="a directory for the capture and the warehouses")
    parser.add_argument("--code", action="append", help="a source tree to run (repeatable; default: this one)")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    if args.namesrvs < 1 or args.rounds < 1:
        parser.error("--namesrvs and --rounds must be at least 1")
    codes = args.code or [str(Path(__file__).resolve().parents[2])]
    args.scratch.mkdir(parents=True, exist_ok=True)
    capture, cuts = tiny_capture(args.scratch, {"topology.namesrvs": args.namesrvs})
    print(f"capture: tiny preset, {args.namesrvs} NameServers, {capture}")
    for round_no in range(1, args.rounds + 1):
        for code in codes:
            root = args.scratch / "wh"
            shutil.rmtree(root, ignore_errors=True)
            windows = run_windows(code, root, capture, cuts, first=0)
            seconds = [w["seconds"] for w in windows]
            print(f"round {round_no} {code}: windows {' / '.join(f'{s:.2f}' for s in seconds)} s; windows 3-6 {sum(seconds[2:]):.2f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
