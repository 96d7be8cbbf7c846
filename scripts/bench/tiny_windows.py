"""Replay windows of the tiny preset in a fresh process of a chosen source tree: what the window
benches (``log_checkpoints.py``, ``table_opens.py``) share.

    capture, cuts = tiny_capture(scratch)         # the preset generated, its window cut in six
    windows = run_windows(code, root, capture, cuts, first=2)   # windows 3-6, one dict each

:func:`run_windows` runs, in a child process importing nsreplay from ``code``, an ingest of
``capture`` into the warehouse ``root`` when ``first`` is 0, then the replay (with its gold check
and publish) of each window from ``cuts[first]`` on, one after the other. Each window gives a dict
with its ``seconds`` and, per counter the child's ``prelude`` puts in ``counts`` (name → [calls,
seconds], reset before each window), that pair.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

WINDOWS = 6  # the tiny preset's window, cut in six

CHILD = r"""
import json, sys, time
counts = {}
PRELUDE
from nsreplay.config import load_settings
from nsreplay.runtime import build_spark
from nsreplay.storage import Warehouse
from pipelines.ingest.run import run_ingest
from pipelines.replay.run import run_replay

root, capture, cuts, first = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
settings = load_settings()
spark = build_spark(settings, "nsreplay-bench-windows")
warehouse = Warehouse(root, spark, settings.warehouse.backend)
if first == 0:
    run_ingest(spark, warehouse, settings, capture, "bench-windows-ingest")
windows = []
for i in range(first, len(cuts)):
    for pair in counts.values():
        pair[:] = [0, 0.0]
    started = time.perf_counter()
    run_replay(spark, warehouse, settings, f"bench-windows-{i}", window_from=cuts[i - 1] if i else None, window_to=cuts[i])
    windows.append({"seconds": time.perf_counter() - started, **{name: list(pair) for name, pair in counts.items()}})
print("json:" + json.dumps(windows))
"""


def tiny_capture(scratch: Path, overrides: dict | None = None) -> tuple[Path, list[int]]:
    """The tiny preset (with the generator's ``overrides``, dotted keys, if given) generated into
    ``scratch``/capture, and the ends of its :data:`WINDOWS` windows."""
    from nsreplay.generator import apply_overrides, generate, preset

    capture = scratch / "capture"
    generate(apply_overrides(preset("tiny"), overrides or {}), capture, workers=1)
    window = json.loads((capture / "_manifest.json").read_text())["window"]
    step = (window["last_ts"] - window["first_ts"]) // WINDOWS
    return capture, [window["first_ts"] + step * i for i in range(1, WINDOWS)] + [window["last_ts"]]


def run_windows(code: str, root: Path, capture: Path, cuts: list[int], first: int, *, prelude: str = "",
                env: dict[str, str] | None = None) -> list[dict]:
    """The windows from ``cuts[first]`` on, replayed in a child process of the tree ``code`` (see the
    module); ``prelude`` is Python run in the child before nsreplay is imported, ``env`` variables
    set in the child's environment on top of this process's."""
    env = {**os.environ, **(env or {}), "PYTHONPATH": os.path.abspath(code)}
    args = [sys.executable, "-c", CHILD.replace("PRELUDE", prelude), str(root), str(capture), json.dumps(cuts), str(first)]
    done = subprocess.run(args, env=env, cwd=os.path.abspath(code), capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"the run failed in {code}:\n{done.stderr[-3000:]}")
    return json.loads(next(ln for ln in done.stdout.splitlines() if ln.startswith("json:"))[len("json:"):])
