"""Renders the planned files, in parallel worker processes, and writes the manifest.

Contract:

* Each file is rendered by one worker from the shared plan (inherited by ``fork``; rebuilt from the
  config where ``fork`` is unavailable), so the bytes of a file do not depend on the number of workers.
* Gzip files are single gzip members with a fixed header (mtime 0). Ordinary lines are deflated as a
  stream at ``output.gzip_level``; each distinct REGISTER_BROKER tail (extFields + body, the bulk of
  the bytes) of at least ``output.splice_min_bytes`` is deflated once per worker at
  ``output.body_gzip_level`` and spliced in (see :mod:`gzip_splice`); smaller tails are streamed.
  Identical plans give identical bytes.
* :func:`write_manifest` writes ``_manifest.json`` (sorted keys, no wall-clock values) beside the files.
"""

from __future__ import annotations

import json
import multiprocessing
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from .config import GeneratorConfig, config_to_dict
from .gzip_splice import DeflatedPiece, GzipSplicer, deflate_piece
from .junk import render_junk
from .plan import CapturePlan, build_plan
from .records import REGISTER, Record
from .render import Renderer

__all__ = ["FileResult", "write_files", "write_manifest", "MANIFEST_NAME"]

MANIFEST_NAME = "_manifest.json"

_PLAN: CapturePlan | None = None
_RENDERER: Renderer | None = None
_OUT_DIR: Path | None = None
#: Deflated register tails of this process, keyed like Renderer.register_parts' tail key.
_PIECES: dict[tuple[int, int, int, int, bool], DeflatedPiece | bytes] = {}


@dataclass(frozen=True)
class FileResult:
    """What was written to one file."""

    index: int
    name: str
    lines: int
    bytes: int
    uncompressed_bytes: int


def _renderer() -> Renderer:
    global _RENDERER
    if _RENDERER is None:
        assert _PLAN is not None
        _RENDERER = Renderer(_PLAN.config, _PLAN.world, _PLAN.lineages)
        _RENDERER.junk_renderer = render_junk
    return _RENDERER


def _init_worker(config: GeneratorConfig, out_dir: str) -> None:
    global _PLAN, _OUT_DIR
    if _PLAN is None or _PLAN.config != config:  # not inherited through fork: rebuild (deterministic)
        _PLAN = build_plan(config)
    _OUT_DIR = Path(out_dir)


def _write_shard(index: int) -> FileResult:
    assert _PLAN is not None and _OUT_DIR is not None
    shard = _PLAN.shards[index]
    out = _PLAN.config.output
    renderer = _renderer()
    path = _OUT_DIR / shard.name
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb", buffering=1 << 20) as fh:
        if out.compress:
            written, raw_total = _write_gzip(fh, shard.records, renderer, out.gzip_level, out.body_gzip_level,
                                             out.splice_min_bytes, max(1 << 16, out.chunk_bytes))
        else:
            written = raw_total = _write_plain(fh, shard.records, renderer, max(1 << 16, out.chunk_bytes))
    os.replace(tmp, path)
    return FileResult(index, shard.name, len(shard.records), written, raw_total)


def _write_gzip(fh: BinaryIO, records: list[Record], renderer: Renderer, level: int, body_level: int,
                splice_min: int, buffer_bytes: int) -> tuple[int, int]:
    """Stream ``records`` as one gzip member.

    A register tail of at least ``splice_min`` bytes is deflated once per process and spliced; a
    smaller one is streamed (it then compresses against the previous lines, inside zlib's 32 KB window).
    """
    gz = GzipSplicer(fh, level, buffer_bytes)
    pieces = _PIECES
    for rec in records:
        if rec[3] == REGISTER:
            head, key = renderer.register_parts(rec)
            gz.write(head)
            piece = pieces.get(key)
            if piece is None:
                tail = renderer.register_tail(key)
                piece = deflate_piece(tail, body_level) if len(tail) >= splice_min else tail
                pieces[key] = piece
            if isinstance(piece, bytes):
                gz.write(piece)
            else:
                gz.splice(piece)
        else:
            gz.write(renderer.line(rec))
    gz.close()
    return gz.written, gz.size


def _write_plain(fh: BinaryIO, records: list[Record], renderer: Renderer, buffer_bytes: int) -> int:
    buf: list[bytes] = []
    size = total = 0
    for rec in records:
        n = renderer.render_into(rec, buf)
        size += n
        total += n
        if size >= buffer_bytes:
            fh.write(b"".join(buf))
            buf.clear()
            size = 0
    fh.write(b"".join(buf))
    return total


def write_files(plan: CapturePlan, out_dir: Path, workers: int) -> list[FileResult]:
    """Render every planned file into ``out_dir``; returns one result per file, in file order."""
    global _PLAN, _RENDERER, _OUT_DIR, _PIECES
    _PLAN, _RENDERER, _OUT_DIR, _PIECES = plan, None, out_dir, {}
    # Biggest files first (register lines dominate) so the workers finish together.
    weight = [sum(1 for rec in s.records if rec[3] == REGISTER) + len(s.records) // 50 for s in plan.shards]
    order = sorted(range(len(plan.shards)), key=lambda i: (-weight[i], i))
    try:
        if workers <= 1 or len(plan.shards) <= 1:
            results = [_write_shard(i) for i in order]
        else:
            methods = multiprocessing.get_all_start_methods()
            ctx = multiprocessing.get_context("fork" if "fork" in methods else None)
            with ctx.Pool(min(workers, len(plan.shards)), initializer=_init_worker,
                          initargs=(plan.config, str(out_dir))) as pool:
                results = list(pool.imap_unordered(_write_shard, order, chunksize=1))
    finally:
        _PLAN, _RENDERER, _OUT_DIR, _PIECES = None, None, None, {}
    return sorted(results, key=lambda r: r.index)


def manifest_dict(plan: CapturePlan, files: list[FileResult]) -> dict[str, Any]:
    """The manifest's content (deterministic: no timings, no absolute paths)."""
    st = plan.stats
    cfg = plan.config
    return {
        "format": "nsreplay-capture-v1",
        "generator": "nsreplay.generator/1",
        "preset": cfg.preset,
        "seed": cfg.seed,
        "config": config_to_dict(cfg),
        "window": {"start_ms": cfg.timing.start_ms, "end_ms": cfg.end_ms,
                   "first_ts": st.first_ts, "last_ts": st.last_ts},
        "namesrvs": st.per_namesrv,
        "lines_total": st.lines,
        "records": {
            "total": st.records,
            "by_kind": dict(sorted(st.by_kind.items())),
            "by_code": dict(sorted(st.by_code.items(), key=lambda kv: int(kv[0]))),
            "by_channel_event": dict(sorted(st.by_channel_event.items())),
        },
        "register_bodies": {
            "distinct": st.distinct_register_bodies,
            "by_form": dict(sorted(st.register_bodies_by_form.items())),
        },
        "responses": st.responses,
        "junk": {"total": st.junk_lines, "by_reason": dict(sorted(st.junk_by_reason.items()))},
        "duplicates": {
            "lines": st.duplicate_lines,
            "batches": st.duplicate_batches,
            "lines_in_other_file": st.duplicate_lines_other_file,
            "by_kind": dict(sorted(st.duplicates_by_kind.items())),
        },
        "files": [{"name": f.name, "lines": f.lines, "bytes": f.bytes, "uncompressed_bytes": f.uncompressed_bytes}
                  for f in files],
        "bytes_total": sum(f.bytes for f in files),
        "uncompressed_bytes_total": sum(f.uncompressed_bytes for f in files),
        "topology": {
            "clusters": list(plan.world.clusters),
            "groups": [
                {"brokerName": g.name, "cluster": g.cluster, "line": "5.x" if g.is_v5 else "4.9",
                 "version": g.version_code, "body_form": g.body_form, "forceRegister": g.force_register,
                 "enableActingMaster": g.acting_master if g.is_v5 else None,
                 "members": [m.addr for m in g.members], "topics_at_start": len(g.initial_topics)}
                for g in plan.world.groups
            ],
        },
        "incidents": plan.scenario.describe(plan.world),
    }


def write_manifest(plan: CapturePlan, files: list[FileResult], out_dir: Path) -> Path:
    """Write ``_manifest.json`` into ``out_dir`` and return its path."""
    path = out_dir / MANIFEST_NAME
    path.write_text(json.dumps(manifest_dict(plan, files), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path
