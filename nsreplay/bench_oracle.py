"""The rebuild benchmark's check against the reference model, independent of the ingest.

The capture files are read with ``json`` (not Spark), each NameServer is replayed by
:class:`nsreplay.model.NamesrvReplay`, and the published state at a seeded random sample of its ticks
must equal the model's (:meth:`nsreplay.history.PublishedHistory.snapshots_at`).

It runs in two rounds on a pool of worker processes, so a day of captures takes minutes, not the
better part of an hour:

1. **read**: each file is read once (not once per NameServer), and its records are spilled to a
   scratch directory by NameServer, one pickle per (file, NameServer);
2. **check**: each NameServer's replay loads its own pickles, runs the model and compares: the five
   tables at the sampled ticks, and the published scan-tick grid (``gold.scan_ticks``) whole, each
   of the model's ticks with its profile and the number of live entries its scan removed.

A repeated body text (a bench-day heartbeat body is ~40 KB, sent ~a million times) is parsed once
per file and pickled once per (file, NameServer).
"""

from __future__ import annotations

import gzip
import json
import os
import pickle
import random
import tempfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import astuple, dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import quote

KINDS = frozenset(("request", "response", "channel", "namesrv_start"))
_BODY = b',"body":'
_MAX_CACHED_BODIES = 100_000
_GZIP_MAGIC = b"\x1f\x8b"


def file_records(path: str) -> Iterator[dict[str, Any]]:
    """The well-formed records of one capture file, in file order, each with its ``_file`` and
    ``_line``: a JSON object with an integer ``ts``, a known ``kind`` and a string ``namesrv``. Lines
    that are not UTF-8 or not JSON are skipped (the ingest quarantines them). A gzip file is
    decompressed whatever its name (``X.JSONL.GZ``, or gzip under ``.jsonl``), as the ingest takes
    it: by its first bytes (:func:`_is_gzip`)."""
    bodies: dict[bytes, Any] = {}
    opener = gzip.open if _is_gzip(path) else open
    with opener(path, "rb") as fh:
        for line_no, raw in enumerate(fh, start=1):
            raw = raw.rstrip(b"\r\n")
            at = raw.rfind(_BODY)
            tail = raw[at + len(_BODY):-1] if at > 0 and raw.endswith(b"}") else None
            try:
                if tail is not None and tail in bodies:
                    record = json.loads(raw[:at] + b"}")
                    if isinstance(record, dict):
                        record["body"] = bodies[tail]
                else:
                    record = json.loads(raw)
                    if tail is not None and isinstance(record, dict) and isinstance(record.get("body"), dict) and len(bodies) < _MAX_CACHED_BODIES and _is_text_of(tail, record["body"]):
                        bodies[tail] = record["body"]
            except ValueError:  # not JSON, or not UTF-8 (UnicodeDecodeError is a ValueError)
                continue
            if isinstance(record, dict) and type(record.get("ts")) is int and record.get("kind") in KINDS and isinstance(record.get("namesrv"), str):
                record["_file"], record["_line"] = path, line_no
                yield record


def _is_gzip(path: str) -> bool:
    """Whether the file at ``path`` starts with gzip's magic bytes, the ingest's test
    (``pipelines.ingest.capture_reader.GZIP_MAGIC``), not its name's."""
    with open(path, "rb") as fh:
        return fh.read(len(_GZIP_MAGIC)) == _GZIP_MAGIC


def _is_text_of(tail: bytes, body: Any) -> bool:
    """Whether ``tail`` (what follows the line's last ``,"body":``) is the text of the record's body.
    It is not when that marker belongs to an object nested in the body: the tail then ends inside it
    and does not parse, and caching it would hand a later line with the same tail the wrong body."""
    try:
        return json.loads(tail) == body
    except ValueError:
        return False


def records_by_namesrv(paths: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Every well-formed record of ``paths``, grouped by NameServer (file order kept), in one pass."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for path in paths:
        for record in file_records(path):
            groups.setdefault(record["namesrv"], []).append(record)
    return groups


def samples_per_namesrv(samples: int, namesrvs: int) -> list[int]:
    """``samples`` split over ``namesrvs`` NameServers as evenly as possible, summing to ``samples``
    (the first ones take the remainder): 1000 over 3 is 334, 333, 333, not 333 each."""
    if namesrvs <= 0:
        return []
    return [samples // namesrvs + (1 if i < samples % namesrvs else 0) for i in range(namesrvs)]


def _spill_dir(scratch: str, namesrv: str) -> Path:
    return Path(scratch) / quote(namesrv, safe="")


def _spill_file(task: tuple[int, str, str]) -> int:
    """Round 1: one file's records, one pickle per NameServer. Returns how many records it held."""
    index, path, scratch = task
    groups = records_by_namesrv([path])
    for namesrv, records in groups.items():
        target = _spill_dir(scratch, namesrv)
        target.mkdir(exist_ok=True)
        with open(target / f"{index:06d}.pickle", "wb") as fh:
            pickle.dump(records, fh, protocol=pickle.HIGHEST_PROTOCOL)
    return sum(len(r) for r in groups.values())


@dataclass(frozen=True)
class ModelCheck:
    """What :func:`check_sampled_ticks` compared and how much of it differed."""

    sampled: int  # ticks whose five tables were compared with the published state
    mismatched: int  # of those, the ticks whose published tables differ from the model's
    ticks: int  # ticks of the published scan-tick grid compared: every one of the model's
    grid_mismatched: int  # ticks on one side only, or with another profile or removal count

    def __add__(self, other: "ModelCheck") -> "ModelCheck":
        return ModelCheck(*(a + b for a, b in zip(astuple(self), astuple(other))))


def _grid_differences(model: list[tuple[int, str, int]], published: list[tuple[int, str, int]]) -> int:
    """Ticks whose (profile, removals) differ between the two grids, or that only one of them has."""
    a, b = {t: rest for t, *rest in model}, {t: rest for t, *rest in published}
    return sum(a.get(t) != b.get(t) for t in a.keys() | b.keys())


def _check_namesrv(task: tuple[str, str, str, int, int, int, int]) -> ModelCheck:
    """Round 2: replay one NameServer's spilled records with the model and compare ``samples`` of its
    ticks (drawn with a generator seeded by ``seed`` and the NameServer) with the published state,
    and its ticks up to the end of its coverage (``covered_to``) with the published grid."""
    from nsreplay.config import load_settings
    from nsreplay.history import PublishedHistory
    from nsreplay.model import NamesrvReplay

    scratch, root, namesrv, until, covered_to, samples, seed = task
    records: list[dict[str, Any]] = []
    spilled = _spill_dir(scratch, namesrv)
    for part in sorted(spilled.glob("*.pickle")) if spilled.is_dir() else []:
        with open(part, "rb") as fh:
            records.extend(pickle.load(fh))
    settings = load_settings()
    profile, config = settings.replay.defaults_for(namesrv)
    run = NamesrvReplay(namesrv, records, default_profile=profile, default_config=config)
    del records
    expected: dict[int, Any] = {}
    grid: list[tuple[int, str, int]] = []
    for state in run.run(until):
        expected[state.tick] = state.snapshot
        if state.tick <= covered_to:
            grid.append((state.tick, state.profile, sum(1 for r in state.removals if r.liveRemoved)))
    chosen = sorted(random.Random(f"{seed}:{namesrv}").sample(sorted(expected), min(samples, len(expected))))
    history = PublishedHistory(root)
    mismatched = sum(published != expected[tick] for tick, published in history.snapshots_at(namesrv, chosen))
    published_grid = [row for row in history.scan_ticks(namesrv) if row[0] <= covered_to]
    return ModelCheck(len(chosen), mismatched, len(grid), _grid_differences(grid, published_grid))


def check_sampled_ticks(paths: list[str], root: str, samples: int, seed: int, *, workers: int | None = None) -> ModelCheck:
    """Compare the published state of warehouse ``root`` with the reference model's, the model
    replaying ``paths``: the five tables at ``samples`` ticks drawn at random (seeded) across its
    NameServers, and every scan tick of the published grid. ``workers`` defaults to the machine's
    cores."""
    from nsreplay.history import PublishedHistory

    coverage = PublishedHistory(root).coverage()
    until = max(c.to_ts for c in coverage)
    workers = max(1, min(workers or os.cpu_count() or 1, max(len(paths), len(coverage))))
    # spawn, not fork: the caller runs a JVM gateway and its threads
    with tempfile.TemporaryDirectory(prefix="nsreplay-oracle-") as scratch, ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
        list(pool.map(_spill_file, [(i, path, scratch) for i, path in enumerate(paths)]))
        tasks = [(scratch, root, c.namesrv, until, c.to_ts, n, seed) for c, n in zip(coverage, samples_per_namesrv(samples, len(coverage)))]
        return sum(pool.map(_check_namesrv, tasks), ModelCheck(0, 0, 0, 0))


__all__ = ["KINDS", "ModelCheck", "check_sampled_ticks", "file_records", "records_by_namesrv", "samples_per_namesrv"]
