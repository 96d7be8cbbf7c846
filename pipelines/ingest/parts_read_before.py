"""What earlier runs read of the files a run is to read: the parts each file may continue.

A capture file continues a part an earlier run read (a :class:`CompletePart`, kept in
``bronze.ingest_files``) when it starts with that part's bytes: the same file grown since (a log
still being written), or a file renamed (a log rolling over: ``ns.jsonl`` read at noon, renamed
``ns.jsonl.1`` at one, grown meanwhile, and a new ``ns.jsonl`` begun). Its read then resumes after
the part (``capture_reader.read_capture_raw``), so the lines read before are neither parsed nor
quarantined again, under either name.

Which parts a file may continue: its own path's latest part (recorded under its path, or under
another scheme of its store that an earlier version named it by: ``s3://`` for an ``s3a://`` file,
``nsreplay.storage.filesystem.object_uri_aliases``), and the latest part of every other
path whose first ``capture_reader.HEAD_BYTES`` bytes were the same as the file's now (their SHA-256,
``complete_head_sha256``; the driver reads those bytes of each file to read, on its own, before the
tasks start; a part shorter than that is fingerprinted by its first half, quarter, … of them,
``capture_reader.head_length``, and the driver hashes each file's first bytes at each of those
lengths too); in both cases only a part no longer than the file. The largest parts first, at most
:data:`MAX_PARTS` of them: the reader tries them in turn, and one that shares the head but not the
rest costs a read of its bytes. A file exactly as long as one of its parts (renamed and not grown
since, as the older files are each time a numbered log rolls over; or touched) has no line to read
if it is that part: a task per such file hashes it first (:func:`same_bytes`), and it is then not
read, only listed with the part it repeats. (A read that resumes yields at least one line, which
carries how the file was read.)

A log may also be compressed as it rolls over (logrotate's ``compress``: ``ns.jsonl`` read at noon
becomes ``ns.jsonl.1.gz`` at one; with ``delaycompress``, ``ns.jsonl.1`` becomes ``ns.jsonl.2.gz``
a turn later). A gzip file's head is then also taken from its inflated text: the plain parts
recorded with it are ``inflated`` parts of the file, whatever their size (the file's size says
nothing of its text's), at most :data:`MAX_PARTS` more. Its read resumes after the largest such
part its text starts with, if any. When that yields no line (its text is the part exactly: the log
was read to its end before it rolled), a task inflates it again to tell which part it is
(:func:`same_bytes`): it is listed with that part and its own (the whole compressed file, which its
renamed copies then repeat byte for byte). A file whose text is longer is so inflated once, not
twice.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import BinaryIO, Callable, Iterable, Mapping

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from nsreplay.runtime import local_frame
from nsreplay.storage import Warehouse
from nsreplay.storage.filesystem import object_uri, object_uri_aliases
from pipelines.ingest.capture_files import CaptureFile, open_capture
from pipelines.ingest.capture_reader import CompletePart, head_sha256s, inflates_to, starts_with
from pipelines.ingest.transforms import PartReadBefore
from schemas.bronze import INGEST_FILES
from schemas.silver import INGEST_RUNS

#: At most this many parts are tried per file (the largest).
MAX_PARTS = 4
#: Files whose heads the driver reads at once (an object store answers each after a round trip).
HEAD_READERS = 8


@dataclass(frozen=True)
class FileHeads:
    """A file's head fingerprints (``capture_reader.head_sha256s``): of its bytes, and, for a gzip
    file, of its inflated text (None otherwise)."""

    raw: tuple[str, ...]
    text: tuple[str, ...] | None = None


def file_heads(files: Iterable[CaptureFile], opener: Callable[[str], BinaryIO]) -> dict[str, FileHeads]:
    """The head fingerprints of each of ``files`` that is not empty; a file that cannot be read now
    has none (its task reports why)."""

    def head(file: CaptureFile) -> FileHeads | None:
        try:
            with opener(file.path) as stream:
                return FileHeads(*head_sha256s(stream))
        except OSError:
            return None

    long_enough = [f for f in files if f.size_bytes > 0]
    if not long_enough:
        return {}
    with ThreadPoolExecutor(min(HEAD_READERS, len(long_enough))) as pool:
        heads = list(pool.map(head, long_enough))
    return {f.path: h for f, h in zip(long_enough, heads) if h is not None}


def _first_of_each(parts: list[PartReadBefore]) -> list[PartReadBefore]:
    """``parts`` with each part once, where it comes first."""
    return list({p.part: p for p in reversed(parts)}.values())[::-1]


def parts_to_try(file: CaptureFile, heads: Iterable[str], own: CompletePart | None,
                 by_head: Mapping[str, Iterable[PartReadBefore]], text_heads: Iterable[str] = ()) -> tuple[PartReadBefore, ...]:
    """The parts ``file`` may continue (see the module contract), largest first: ``own``, its path's
    latest part, and the parts of other paths recorded with one of its ``heads`` (fingerprints,
    longest first; ``by_head``: latest read first). The same part recorded for several paths (a file
    renamed twice) is given once, as the file's own or else as the file's that read it last: the file
    it was renamed from. Then, for a gzip file, the parts recorded with one of its inflated text's
    heads (``text_heads``), ``inflated``, likewise."""
    parts = [PartReadBefore(file.path, own)] if own is not None else []
    parts += [p for head in heads for p in by_head.get(head, ()) if object_uri(p.source_file) != file.path]
    fit = sorted((p for p in _first_of_each(parts) if p.part.size <= file.size_bytes), key=lambda p: -p.part.size)  # stable: ties keep that order
    of_text = [PartReadBefore(p.source_file, p.part, inflated=True) for head in text_heads for p in by_head.get(head, ())]
    inflated = sorted(_first_of_each(of_text), key=lambda p: -p.part.size)
    return tuple(fit[:MAX_PARTS]) + tuple(inflated[:MAX_PARTS])


@dataclass(frozen=True)
class Repeated:
    """A file that is a part read before whole (``before``; an ``inflated`` one: the file's text is
    it), and the file's own complete part (``complete``: ``before``'s, or a gzip file's whole)."""

    before: PartReadBefore
    complete: CompletePart


def same_bytes(spark: SparkSession, files: Mapping[str, Iterable[PartReadBefore]]) -> dict[str, Repeated]:
    """Of ``files`` (a path, and parts read before as long as it is, or ``inflated`` ones: a gzip
    file's read that yielded no line), those that are one of their parts whole: each file is hashed
    in a task (one per file; no line is split or parsed), a gzip file with ``inflated`` parts
    inflated as far as the largest and a byte. A file that is a part read before, whole, has no line
    to read (see the module contract)."""
    if not files:
        return {}
    rows = [(path, [(p.part.size, p.part.lines, p.part.sha256, p.part.head_sha256, p.inflated) for p in parts]) for path, parts in files.items()]

    def first_same(row: tuple[str, list[tuple]]) -> tuple[str, int | None, tuple | None]:
        path, parts = row
        for i, (size, lines, sha, head, inflated) in enumerate(parts):
            if not inflated and starts_with(path, open_capture, CompletePart(size, lines, sha, head)):
                return path, i, None
        of_text = [(i, CompletePart(size, lines, sha, head)) for i, (size, lines, sha, head, inflated) in enumerate(parts) if inflated]
        found = inflates_to(path, open_capture, [part for _, part in of_text]) if of_text else None
        if found is None:
            return path, None, None
        at, own = found
        return path, of_text[at][0], (own.size, own.lines, own.sha256, own.head_sha256)

    found = spark.sparkContext.parallelize(rows, len(rows)).map(first_same).collect()  # one small tuple per file
    parts_of = {path: list(parts) for path, parts in files.items()}
    repeated = {}
    for path, i, own in found:
        if i is not None:
            before = parts_of[path][i]
            repeated[path] = Repeated(before, CompletePart(*own) if own is not None else before.part)
    return repeated


def parts_read_before(warehouse: Warehouse, files: list[CaptureFile], read_before: set[str],
                      opener: Callable[[str], BinaryIO]) -> dict[str, tuple[PartReadBefore, ...]]:
    """For each of ``files`` (to be read; ``read_before``: the paths among them an earlier run read),
    the parts it may continue (file metadata and the files' first bytes only). Files without any
    are left out. Nothing is read while no run has read a file."""
    if not warehouse.files(INGEST_FILES):  # the Delta log alone says so
        return {}
    heads = file_heads(files, opener)
    own_paths = sorted({name for f in files if f.path in read_before for name in object_uri_aliases(f.path)})
    if not own_paths and not heads:
        return {}
    fingerprints = {sha for h in heads.values() for sha in (*h.raw, *(h.text or ()))}
    table = warehouse.read(INGEST_FILES)
    # the rows recorded under one of the paths or with one of the fingerprints: joined with a local
    # frame of them, not filtered by isin (N values are N calls to the JVM: ~1 s per 1,000)
    wanted = local_frame(table.sparkSession, [(key,) for key in sorted({*own_paths, *fingerprints})], "key string")
    recorded = (table.where(F.col("complete_bytes").isNotNull())
                .withColumn("key", F.explode(F.array("source_file", "complete_head_sha256")))
                .join(F.broadcast(wanted), "key", "left_semi").drop("key"))  # a row matching both keys twice: the same part
    started = warehouse.read(INGEST_RUNS).select("run_id", "started_ms")
    when = F.struct("started_ms", "run_id")
    latest = (
        recorded.join(started, "run_id")
        .groupBy("source_file", "complete_head_sha256")
        .agg(F.max_by(F.struct("complete_bytes", "complete_lines", "complete_sha256"), when).alias("part"), F.max(when).alias("at"))
    )
    own: dict[str, tuple[object, CompletePart]] = {}
    by_head: dict[str, list[tuple[tuple, PartReadBefore]]] = {}
    for r in latest.collect():
        part = CompletePart(r.part.complete_bytes, r.part.complete_lines, r.part.complete_sha256, r.complete_head_sha256)
        path = object_uri(r.source_file)  # recorded under s3:// by an earlier version: the s3a:// file's own
        if path in read_before and (path not in own or tuple(r.at) > own[path][0]):
            own[path] = (tuple(r.at), part)
        if r.complete_head_sha256 is not None:
            by_head.setdefault(r.complete_head_sha256, []).append((tuple(r.at), PartReadBefore(r.source_file, part)))
    latest_first = {head: [p for _, p in sorted(parts, key=lambda x: x[0], reverse=True)] for head, parts in by_head.items()}

    def parts_of(file: CaptureFile) -> tuple[PartReadBefore, ...]:
        head = heads.get(file.path, FileHeads(()))
        return parts_to_try(file, head.raw, own[file.path][1] if file.path in own else None, latest_first, head.text or ())

    chosen = {f.path: parts_of(f) for f in files}
    return {path: parts for path, parts in chosen.items() if parts}
