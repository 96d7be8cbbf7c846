"""CPU of the two Python stages of a rebuild, without Spark, in fresh processes of chosen source trees.

    .venv/bin/python scripts/bench/python_stages.py --code OLD --code . --rounds 2 FILE [FILE ...]

Two stages of a run execute nsreplay's own Python, and between them they take about half of the run's
task time (``docs/performance.md``): the read and parse of each capture file (the ``MapInArrow``
stage) and the replay of the units by the reference model (the ``FlatMapCoGroupsInArrow`` stage).
This measures each on its own, in one child process per run that imports nsreplay from ``--code``
(the trees alternate round by round), reading the CPU time of that process only:

* **parse**: each FILE read and parsed as a read-and-parse task does (``file_reader``: inflate,
  split, parse and check each line, the READ_LINE rows as Arrow batches), one task per file in
  the order given. The worker's parser memory is warm after the first file, as in a Spark worker.
* **model**: the well-formed records of the FILEs, grouped by NameServer, and the NameServer with the
  most records replayed by the reference model (``NamesrvReplay``) up to its last record, every
  scan tick's snapshot taken.

Use it to compare a change to the parser or the model with the code before it (two trees: a
``git worktree`` of the old commit and this one), or another build of the same code. bench-day's
files are the workload the speed goal is measured on (``nsreplay generate --preset bench-day``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import json, os, sys, time
files = json.loads(sys.argv[1])
from nsreplay.bench_oracle import records_by_namesrv
from nsreplay.config import load_settings
from nsreplay.model import NamesrvReplay
from pipelines.ingest.run import parse_options
from pipelines.ingest.transforms import FileToRead, ReadOptions, file_reader

settings = load_settings()
read = ReadOptions(settings.ingest.max_line_bytes, settings.ingest.quarantine_keep_bytes)
options = parse_options(settings)
parse, lines = [], 0
for path in files:
    started = time.process_time()
    for batch in file_reader(read, options)(FileToRead(path)):
        lines += batch.num_rows
    parse.append(time.process_time() - started)

namesrv, records = max(records_by_namesrv(files).items(), key=lambda item: len(item[1]))
profile, config = settings.replay.defaults_for(namesrv)
started = time.process_time()
ticks = sum(1 for _ in NamesrvReplay(namesrv, records, default_profile=profile, default_config=config).run(max(r["ts"] for r in records)))
model = time.process_time() - started
print("json:" + json.dumps({"parse": parse, "lines": lines, "model": model, "namesrv": namesrv, "records": len(records), "ticks": ticks}))
"""


def run_child(code: str, files: list[str]) -> dict:
    """One measurement in a fresh process of the tree ``code`` (see the module)."""
    env = {**os.environ, "PYTHONPATH": os.path.abspath(code)}
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps([os.path.abspath(f) for f in files])],
                          env=env, cwd=os.path.abspath(code), capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"the measurement failed in {code}:\n{done.stderr[-3000:]}")
    return json.loads(next(ln for ln in done.stdout.splitlines() if ln.startswith("json:"))[len("json:"):])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", help="capture files (bench-day's, for the figures of docs/performance.md)")
    parser.add_argument("--code", action="append", help="a source tree to import nsreplay from (repeat; default: this one)")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    codes = args.code or ["."]
    print(f"{len(args.files)} files, a fresh process per run; CPU seconds: parse (per file after the first, and all), model")
    for round_number in range(args.rounds):
        for code in codes if round_number % 2 == 0 else list(reversed(codes)):
            got = run_child(code, args.files)
            later = got["parse"][1:] or got["parse"]
            print(f"  round {round_number + 1}, {code}: parse {statistics.mean(later):.3f} s a file, {sum(got['parse']):.2f} s for "
                  f"{got['lines']} lines; model {got['model']:.2f} s for {got['records']} records of {got['namesrv']} "
                  f"({got['ticks']} ticks)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
