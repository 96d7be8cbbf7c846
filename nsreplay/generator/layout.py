"""How sequenced records are cut into files: time slices, shuffled blocks and re-shipped duplicates.

Contract of :func:`lay_out`:

* The window is cut into ``output.shards`` equal time slices. With layout "mixed" each slice is one file
  holding every NameServer's records of that slice; with "per_namesrv" one file per (NameServer, slice).
* Inside a file, records start in (ts, NameServer, seq) order; the file is then cut into blocks of
  ``shuffle_block_lines`` lines written in a seeded shuffled order, so files are not sorted by time.
* Duplicate batches: a run of consecutive valid (non-junk) records of one file is copied, unchanged,
  into another file (with probability ``duplicate_other_file_fraction``) or the same file, at a random
  position -- what at-least-once shipping produces. Junk lines are never duplicated.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import itemgetter

from .config import GeneratorConfig
from .records import JUNK, Record
from .world import rng

__all__ = ["Shard", "DuplicateBatch", "lay_out"]


@dataclass
class Shard:
    """One output file: its name and its records in write order."""

    name: str
    records: list[Record] = field(default_factory=list)


@dataclass(frozen=True)
class DuplicateBatch:
    """Records shipped twice: copied from file ``source`` into file ``target``."""

    source: int
    target: int
    records: tuple[Record, ...]


def _file_name(config: GeneratorConfig, ns: int | None, index: int) -> str:
    suffix = ".jsonl.gz" if config.output.compress else ".jsonl"
    if ns is None:
        return f"{config.output.file_prefix}-{index:05d}{suffix}"
    return f"{config.output.file_prefix}-ns{ns}-{index:05d}{suffix}"


def lay_out(config: GeneratorConfig, per_namesrv: list[list[Record]]) -> tuple[list[Shard], list[DuplicateBatch]]:
    """Assign every record to a file, shuffle blocks and add duplicate batches."""
    out = config.output
    start, end = config.timing.start_ms, config.end_ms
    slices = out.shards
    slice_ms = max(1, -(-(end - start) // slices))
    shards: list[Shard] = []
    if out.layout == "mixed":
        shards = [Shard(_file_name(config, None, i)) for i in range(slices)]
        for records in per_namesrv:
            for rec in records:
                shards[min(slices - 1, (rec[1] - start) // slice_ms)].records.append(rec)
    else:
        for ns, records in enumerate(per_namesrv):
            own = [Shard(_file_name(config, ns, i)) for i in range(slices)]
            for rec in records:
                own[min(slices - 1, (rec[1] - start) // slice_ms)].records.append(rec)
            shards.extend(own)
    for shard in shards:
        shard.records.sort(key=itemgetter(1, 0, 2))

    r = rng(config.seed, "layout")
    junk = config.junk
    batches: list[DuplicateBatch] = []
    nonempty = [i for i, s in enumerate(shards) if s.records]
    for _ in range(junk.duplicate_batches if nonempty else 0):
        source = r.choice(nonempty)
        records = shards[source].records
        lo, hi = junk.duplicate_batch_lines
        length = r.randint(min(lo, hi), max(lo, hi))
        pos = r.randrange(len(records))
        batch = tuple(rec for rec in records[pos : pos + length] if rec[3] != JUNK)
        if not batch:
            continue
        target = source
        if len(shards) > 1 and r.random() < junk.duplicate_other_file_fraction:
            target = r.choice([i for i in range(len(shards)) if i != source])
        batches.append(DuplicateBatch(source, target, batch))

    block = out.shuffle_block_lines
    for shard in shards:
        if block > 0 and len(shard.records) > block:
            blocks = [shard.records[i : i + block] for i in range(0, len(shard.records), block)]
            r.shuffle(blocks)
            shard.records = [rec for b in blocks for rec in b]

    inserts: dict[int, list[tuple[float, tuple[Record, ...]]]] = {}
    for b in batches:
        inserts.setdefault(b.target, []).append((r.random(), b.records))
    for target, items in inserts.items():
        records = shards[target].records
        base = len(records)
        pieces: list[Record] = []
        cursor = 0
        for frac, recs in sorted(items, key=itemgetter(0)):
            at = int(frac * base)
            pieces.extend(records[cursor:at])
            pieces.extend(recs)
            cursor = at
        pieces.extend(records[cursor:])
        shards[target].records = pieces
    return shards, batches
