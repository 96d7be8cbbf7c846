"""What the shim's reads of published files cost in memory: the peak resident memory of one process
answering route histories and broker-live lookups, one after the other and from many threads.

    .venv/bin/python scripts/bench/shim_reads.py --warehouse W                    # both measurements
    .venv/bin/python scripts/bench/shim_reads.py --warehouse W --stored-reads 8   # more reads at once

One process per call (the peak is ``VmHWM``, reset before each measurement through
``/proc/self/clear_refs``), so compare calls run one after the other, alternating. W: a published
warehouse (``nsreplay bench rebuild``'s, or one compacted and published again).
"""

from __future__ import annotations

import argparse
import random
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

DAY = 86_400_000


def _peak_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--warehouse", required=True)
    parser.add_argument("--stored-reads", type=int, default=None, help="reads of published files at once (default: the index's)")
    parser.add_argument("--lookups", type=int, default=20)
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args()

    import pyarrow as pa

    from nsreplay.serving.index import RouteIndex

    kwargs = {} if args.stored_reads is None else {"stored_reads": args.stored_reads}
    index = RouteIndex.load(args.warehouse, **kwargs)
    rnd = random.Random(11)
    asks = []
    for _ in range(args.lookups):
        cov = rnd.choice(index.coverage())
        asks.append((cov.namesrv, rnd.choice(index.topic_names(cov.namesrv)), rnd.randint(cov.from_ts, cov.to_ts), cov))
    kinds = {
        "broker-live rows": lambda ns, topic, t, cov: index.table_rows(ns, "brokerLiveTable", t),
        "route history over a day": lambda ns, topic, t, cov: index.route_history(ns, topic, max(cov.from_ts, t - DAY), t),
    }
    for name, call in kinds.items():
        pa.default_memory_pool().release_unused()
        _reset_peak()
        base = _peak_mb()
        started = time.perf_counter()
        for ask in asks:
            call(*ask)
        print(f"{name}, one after the other: {base:.0f} -> peak {_peak_mb():.0f} MB, "
              f"{(time.perf_counter() - started) / len(asks) * 1000:.0f} ms each", flush=True)
    pa.default_memory_pool().release_unused()
    _reset_peak()
    base = _peak_mb()
    started = time.perf_counter()
    with ThreadPoolExecutor(args.threads) as pool:
        list(pool.map(lambda ask: kinds["route history over a day"](*ask), asks))
    print(f"route history over a day, {args.threads} threads: {base:.0f} -> peak {_peak_mb():.0f} MB, "
          f"{time.perf_counter() - started:.2f} s for {len(asks)}; most reads at once: {index._changes.most_concurrent}")


if __name__ == "__main__":
    main()
