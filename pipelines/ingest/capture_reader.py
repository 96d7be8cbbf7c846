"""Reading capture files into numbered lines, robust to whatever the files hold.

Contract:

* A file is gzip when it starts with the gzip magic bytes (whatever its name), plain otherwise.
  Concatenated gzip members are read one after the other; zero bytes after the last member (padding,
  which ``gzip -t`` accepts) are ignored. Zero bytes with more after them are a hole (blocks a crash
  left zeroed, the writing having gone on after it), not the end: see the gap below.
* Lines are split at ``\\n`` (a trailing ``\\r`` is dropped) and numbered from 1. A last line without a
  newline is still a line, marked ``unterminated``: a writer may still have been writing it (the
  ingest quarantines such a line that does not parse as ``incomplete_line``). A file of zero bytes
  yields no line.
* Nothing is lost silently. Every problem becomes a :class:`CaptureLine` with a ``read_error``:
  ``line_too_long`` (longer than ``max_line_bytes`` without its trailing ``\\r``; only the first
  ``keep_bytes``, at most ``max_line_bytes``, are kept; ``line_bytes`` is the full length),
  ``truncated_gzip`` (every complete line inflated before the cut comes out as usual, then the bytes
  decoded after the last complete line, possibly none, as one final line), ``corrupt_gzip``,
  ``not_gzipped`` and ``zero_bytes`` (below), and ``unreadable_file`` (the file could not be opened or
  read at all).
* A member that fails its integrity check (deflate data it cannot decode, or a CRC or length trailer
  that does not match) may have garbled any of its lines: deflate detects damage only some way after
  it, and the CRC only at the member's end. Every line it inflated before the byte where the damage
  showed comes out, then the reading goes on at the next gzip member header, looked for from
  :data:`RESYNC_LOOKBACK_BYTES` before that byte (deflate may read a damaged member past its end) but
  after the failed member's start. The line in progress when the damage showed, which holds the first
  bytes of the member found next (the bytes between are lost), is flagged ``corrupt_gzip``; when the
  file ends before that line does (no member found, or only members with no newline), its last line
  is the flagged one, empty if need be. The flagged line says
  where the damage began: ``damaged_from`` is the number of the first line holding a byte of the
  failed member (its newline included), or of the first of several failing in a row, and never a
  line flagged before; lines ``damaged_from`` to the flagged one are suspect, and the caller decides
  what to do with them (the ingest quarantines them:
  ``pipelines.ingest.transforms.quarantine_damaged_members``). A member found after damage is
  trusted only once its check passes: cut by the end of the file, it is a failed member too (its
  bytes may only look like a member).
* A cut (``truncated_gzip``) alone garbles nothing: ``damaged_from`` is ``None``, and the cut member's
  lines are kept, though its CRC went with the cut and they cannot be checked (a cut is how a file
  copied while it was written ends, and its member is often the whole file).
* A gap after a member that passed its check (zero bytes with more after them, or bytes that cannot
  start a member) runs to the next member header, or to the end of the file. Its bytes from its first
  non-zero one are no member's, but they are the file's (text appended to a gzipped file, or junk):
  they come out as they are, read as plain text, and every line holding one of them (its newline
  included) is flagged ``not_gzipped``; the reading goes on at the member after the gap. Zero bytes
  at the gap's start are a hole that may have taken bytes of a member: the line in progress there is
  flagged ``corrupt_gzip``, its range being itself alone (``damaged_from`` is its own number, unless
  the range of a failed member is still open there), as the hole may have taken its end or the next
  member's start; none of the earlier lines is suspect.
* A run of zero bytes in the text (a hole: blocks a crash left zeroed in a plain file, or in one gzipped
  later) is no part of any line, since JSON holds no NUL byte. It ends the line in progress, if that
  holds any byte, as a newline would (whatever the line then holds is judged as any other line), and
  comes out as a line of its own, flagged ``zero_bytes``, with no data and ``line_bytes`` the run's
  length; the text after it starts a new line. A line cut by a hole so keeps both its parts and, more
  to the point, a record after a hole is read as a record, not lost in one long line of zeros.
* ``text`` is the line decoded as UTF-8 with invalid bytes replaced; ``raw_bytes`` holds the exact
  bytes whenever the text alone would lose something (invalid UTF-8, a cut line).
* The text is UTF-8 (the contract). A text in UTF-16 or UTF-32 (what Windows tools write, e.g.
  PowerShell's ``>``) is recognised at its start (:func:`_wide_starts`: the zero bytes around the
  ``{`` a record starts with, or a byte-order mark and then ``{`` or a blank) and read as the same
  text in UTF-8 (:func:`_as_utf8`), not as one ``zero_bytes`` line per character. Its lines are
  those of the UTF-8 form, a byte-order mark included (the parse skips it, as it skips a UTF-8 one):
  ``line_bytes`` and ``raw_bytes`` count and hold UTF-8 bytes, and a code unit that does not decode
  (a lone surrogate, an odd byte at the end) is kept as bytes that are not UTF-8, so that its line
  is ``invalid_utf8`` with those bytes. After damage in a gzipped UTF-16/32 text, the text read on
  at the next member may be out of step with its code units: its lines are then quarantined as
  garbled, not misread.

:func:`read_capture_raw` yields the same lines undecoded (:class:`RawLine`), for a caller that looks
at the bytes first (the ingest compares repeated register bodies byte for byte); :func:`decoded`
turns a raw line into its :class:`CaptureLine`.

A file that grows (a log still being written) need not be read again whole. A read of a plain UTF-8
file reports its complete part (:class:`CompletePart`: the bytes up to its last newline, their line
count and SHA-256) in a :class:`ReadOutcome`; a later read given that part (``resume``) reads the
file's first bytes only to hash them and, when they are the same, yields just the lines after them,
numbered on from there: exactly the lines a whole read would yield after that point (a newline leaves
the reader at the start of a line, with nothing pending). When the file no longer starts with those
bytes (written anew, or cut), it is read whole. The part may be another file's: a log that rolls over
is renamed, and the file under the new name starts with what was read under the old one. A part
also records the SHA-256 of the file's first :data:`HEAD_BYTES` bytes (of its first half, quarter, …
of them for a shorter part: :func:`head_length`, all of it under the shortest; :func:`head_sha256s`
reads a file's, at each of those lengths and at the end of each of its first lines shorter than the
shortest), which tells the parts a file may continue without reading it.
A UTF-16/32 text, a file whose bytes after its last newline hold a zero byte and one whose last
newline comes within its first :data:`_START_BYTES` bytes (what tells a UTF-16/32 text) report no
complete part: they are read whole. A gzip file reports the whole file as its part, whatever it
held: it is never read on after it (a grown gzip file is read whole), but a file that is that part,
byte for byte (a compressed log renamed as it rolls over), is known to hold the lines read. A gzip
file whose inflated text starts with a plain file's part (a log compressed as it rolls over:
logrotate's ``compress``) is read on after that part, in its inflated text
(:func:`head_sha256s`, ``resume_inflated``), or is known to hold just its lines when it inflates
to that part exactly (:func:`inflates_to`).
"""

from __future__ import annotations

import codecs
import hashlib
import itertools
import re
import zlib
from collections import deque
from dataclasses import dataclass, replace
from typing import BinaryIO, Callable, Generator, Iterator, Protocol, Sequence

try:  # zlib-ng inflates the same streams about twice as fast as zlib (same API, same results)
    from zlib_ng import zlib_ng as _inflate
except ImportError:  # pragma: no cover - zlib-ng is a declared dependency; zlib is the fallback
    _inflate = zlib  # type: ignore[assignment]

GZIP_MAGIC = b"\x1f\x8b"
CHUNK_BYTES = 4 * 1024 * 1024
#: How many of a file's first bytes its head fingerprint covers (:attr:`CompletePart.head_sha256`): two
#: or three records, whose times alone tell apart the files of one writer.
HEAD_BYTES = 64 * 1024
#: A part shorter than :data:`HEAD_BYTES` is fingerprinted by its first ``HEAD_BYTES`` / 2, / 4, … bytes
#: (the longest that it holds; :func:`head_length`), down to / 2 ** this: a file that grew after such a
#: part and was renamed shows the same first bytes.
HEAD_HALVINGS = 7


def head_lengths() -> tuple[int, ...]:
    """The lengths a head fingerprint may cover, shortest first: :data:`HEAD_BYTES` and its halves."""
    return tuple(sorted({HEAD_BYTES >> k for k in range(HEAD_HALVINGS + 1)} - {0}))


def head_length(size: int) -> int:
    """How many of a part's first bytes its head fingerprint covers, for a part of ``size`` bytes: the
    longest of :func:`head_lengths` it holds, or all of them when it holds none."""
    return max((n for n in head_lengths() if n <= size), default=size)


# Compressed bytes inflated per call: ~3 MB of output each. Inflating a whole 4 MB read at once makes
# ~45 MB objects, and allocating those costs as much again as inflating (one file: 1.1 s -> 0.5 s).
INFLATE_SLICE_BYTES = 256 * 1024
# Compressed bytes replayed per call when salvaging the output of a slice that failed to inflate.
SALVAGE_PIECE_BYTES = 256
#: How far before the byte where a member's damage showed a resync looks for the next member: deflate
#: may read a damaged member past its end, into the next member, before the damage shows (twice the
#: deflate window).
RESYNC_LOOKBACK_BYTES = 64 * 1024
_MEMBER_HEADER = GZIP_MAGIC + b"\x08"  # the magic and the deflate method: what a resync looks for


@dataclass(frozen=True)
class CaptureLine:
    """One line of a capture file as read."""

    line_no: int
    text: str
    line_bytes: int
    raw_bytes: bytes | None = None
    read_error: str | None = None


@dataclass(frozen=True)
class RawLine:
    """One line as bytes: without its ``\\n`` and (unless cut for ``line_too_long``) a trailing ``\\r``;
    only the first ``keep_bytes`` of a line that was too long."""

    line_no: int
    data: bytes
    line_bytes: int
    read_error: str | None = None
    damaged_from: int | None = None  # on a ``corrupt_gzip`` line: where its damaged member began
    unterminated: bool = False  # the file's last line, read whole but ended by the end of the file, not by a newline


def decoded(line: RawLine) -> CaptureLine:
    """The :class:`CaptureLine` of a raw line (exact bytes kept when the text would lose them)."""
    if line.read_error == "line_too_long":
        return CaptureLine(line.line_no, line.data.decode("utf-8", "replace"), line.line_bytes, line.data, line.read_error)
    if line.read_error == "unreadable_file":  # the data is the error's text, not the file's bytes
        return CaptureLine(line.line_no, line.data.decode("utf-8", "replace"), line.line_bytes, None, line.read_error)
    try:
        text = line.data.decode("utf-8")
        exact = line.read_error is None
    except UnicodeDecodeError:
        text = line.data.decode("utf-8", errors="replace")
        exact = False
    return CaptureLine(line.line_no, text, line.line_bytes, None if exact else line.data, line.read_error)


class _Decompressor(Protocol):
    """The part of a zlib / zlib-ng decompress object the reader uses."""

    @property
    def eof(self) -> bool: ...

    @property
    def unused_data(self) -> bytes: ...

    def decompress(self, data: bytes | memoryview, /) -> bytes: ...

    def copy(self) -> _Decompressor: ...


class _Truncated(Exception):
    """The gzip stream ended inside a member: ``truncated_gzip``, or ``corrupt_gzip`` with
    ``in_member`` when that member is suspect as a whole (one found by a resync, cut before its check)."""

    def __init__(self, reason: str, *, in_member: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.in_member = in_member


#: What :func:`_gunzip_chunks` yields where a gzip member begins: an empty chunk, which carries no
#: bytes (nothing else yields one), only the place.
MEMBER_START = b""


class _Mark(bytes):
    """An empty chunk distinct from :data:`MEMBER_START` (compared by identity)."""


#: What :func:`_gunzip_chunks` yields after the output of a member that failed its check.
MEMBER_FAILED = _Mark()
#: What :func:`_gunzip_chunks` yields before bytes of the file that no gzip member holds (after a
#: member's end, up to the next member's header or the end of the file), which come out as they are.
PLAIN_TEXT = _Mark()


class _Hole(bytes):
    """An empty chunk standing for a run of ``length`` zero bytes of the text (:func:`_holes`)."""

    length: int


def _hole(length: int) -> _Hole:
    hole = _Hole()
    hole.length = length
    return hole


_ZERO_RUNS = re.compile(rb"\0+")


def _holes(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """``chunks`` (text, and the marks of :func:`_gunzip_chunks`) with every run of zero bytes replaced
    by one :class:`_Hole`; a run over several chunks is one hole, unless a mark comes within it (the
    hole so far comes out before the mark) or the stream raises (the hole comes out first). A chunk
    without a zero byte passes as it is."""
    run = 0
    try:
        for chunk in chunks:
            if not chunk:  # a mark
                if run:
                    yield _hole(run)
                    run = 0
                yield chunk
                continue
            if not run and b"\0" not in chunk:  # the usual case
                yield chunk
                continue
            at = 0
            for zeros in _ZERO_RUNS.finditer(chunk):
                if zeros.start() > at:
                    if run:
                        yield _hole(run)
                        run = 0
                    yield chunk[at : zeros.start()]
                run += zeros.end() - zeros.start()
                at = zeros.end()
            if at < len(chunk):
                if run:
                    yield _hole(run)
                    run = 0
                yield chunk[at:]
    except _Truncated:
        if run:
            yield _hole(run)
        raise
    if run:
        yield _hole(run)


def _wide_starts() -> tuple[tuple[bytes, str], ...]:
    """How a UTF-16/32 capture starts, and its codec: a record's ``{``, as RFC 4627 (section 3)
    recognises JSON by the zero bytes around its first character, or a byte-order mark followed by
    ``{`` or a blank. Requiring the first character keeps a UTF-8 file that merely starts with the
    bytes of a mark (or with zeros, a hole) read as UTF-8. The codecs keep a mark as the character
    U+FEFF, as a UTF-8 text keeps its mark's bytes: the parse skips it at the start of line 1."""
    starts = []
    for codec, bom in (
        ("utf-32-le", codecs.BOM_UTF32_LE),  # before UTF-16: its mark starts with UTF-16's
        ("utf-32-be", codecs.BOM_UTF32_BE),
        ("utf-16-le", codecs.BOM_UTF16_LE),
        ("utf-16-be", codecs.BOM_UTF16_BE),
    ):
        starts += [(bom + first.encode(codec), codec) for first in "{ \t\r\n"]
        starts.append(("{".encode(codec), codec))
    return tuple(starts)


_WIDE_STARTS = _wide_starts()
_START_BYTES = max(len(prefix) for prefix, _ in _WIDE_STARTS)  # enough to tell every start above apart


def _not_utf8(error: UnicodeError) -> tuple[str, int]:
    """Codec error handler: each undecodable byte of a wide text becomes a lone surrogate, which
    UTF-8 with ``surrogatepass`` writes as bytes that are not valid UTF-8 (the line is ``invalid_utf8``)."""
    if not isinstance(error, UnicodeDecodeError):
        raise error
    return "".join(chr(0xDC00 + b) for b in error.object[error.start : error.end]), error.end


codecs.register_error("nsreplay.not_utf8", _not_utf8)


def _wide_encoding(start: bytes) -> str | None:
    """The UTF-16/32 codec a text starting with ``start`` is in; None for UTF-8 (or anything else)."""
    return next((codec for prefix, codec in _WIDE_STARTS if start.startswith(prefix)), None)


def _as_utf8(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """``chunks`` (text, and the marks of :func:`_gunzip_chunks`, passed on as they are) as UTF-8: a
    UTF-16/32 text (:func:`_wide_starts`) re-encoded, any other passed on unchanged, chunk for chunk. A :class:`_Truncated` from ``chunks``
    is raised again after the text decoded before it."""
    held: list[bytes] = []  # the first chunks, until the start of the text can be told
    size = 0
    cut: _Truncated | None = None
    try:
        for chunk in chunks:
            held.append(chunk)
            size += len(chunk)
            if size >= _START_BYTES:
                break
    except _Truncated as exc:  # the text ends within its first bytes: they come out first
        cut, chunks = exc, iter(())
    start = b"".join(bytes(chunk[:_START_BYTES]) for chunk in held)[:_START_BYTES]
    codec = _wide_encoding(start)
    if codec is None:
        yield from held
        if cut is not None:
            raise cut
        yield from chunks
        return
    decoder = codecs.getincrementaldecoder(codec)("nsreplay.not_utf8")
    try:
        for chunk in itertools.chain(held, chunks):
            if not chunk:  # a mark
                yield chunk
                continue
            text = decoder.decode(chunk).encode("utf-8", "surrogatepass")
            if text:  # never an empty chunk: that is a mark
                yield text
        if cut is not None:
            raise cut
    except _Truncated:
        yield from _decoded_rest(decoder)
        raise
    yield from _decoded_rest(decoder)


def _decoded_rest(decoder: codecs.IncrementalDecoder) -> Iterator[bytes]:
    """What ``decoder`` still holds at the end of the text (an incomplete code unit), as UTF-8."""
    rest = decoder.decode(b"", final=True).encode("utf-8", "surrogatepass")
    if rest:
        yield rest


def _slices(chunks: Iterator[bytes], size: int) -> Iterator[bytes | memoryview]:
    for chunk in chunks:
        if len(chunk) <= size:
            yield chunk
            continue
        view = memoryview(chunk)
        for at in range(0, len(chunk), size):
            yield view[at : at + size]


class _Compressed:
    """A gzip file's bytes, read forward one inflate slice at a time. The slices from the offset
    given to :meth:`keep_from` on stay available (references to them, no copy) for a resync."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._slices = _slices(chunks, INFLATE_SLICE_BYTES)
        self._kept: deque[tuple[int, bytes | memoryview]] = deque()
        self._needed = 0  # the first offset a resync may still look at
        self.end = 0  # the offset in the file just after the last byte read

    def keep_from(self, offset: int) -> None:
        """Bytes before ``offset`` are no longer needed (an offset below an earlier one changes nothing)."""
        self._needed = max(self._needed, offset)

    def read(self) -> bytes | memoryview | None:
        """The next slice, or None at the end of the file."""
        while self._kept and self._kept[0][0] + len(self._kept[0][1]) <= self._needed:
            self._kept.popleft()
        piece = next(self._slices, None)
        if piece is None:
            return None
        self._kept.append((self.end, piece))
        self.end += len(piece)
        return piece

    def since(self, offset: int) -> bytes:
        """The bytes read from ``offset`` on; ``offset`` is at least the last :meth:`keep_from`."""
        return b"".join(piece[max(0, offset - at) :] for at, piece in self._kept if at + len(piece) > offset)


def _next_member(source: _Compressed, offset: int) -> Generator[bytes, None, tuple[int, bytes] | None]:
    """Where the first gzip member header at or after ``offset`` starts, and the bytes read from
    there on (reading on as far as needed); None when the file ends first. Yields the bytes before
    that header (or before the end of the file), in order, a slice or so at a time.

    A header is the magic, method 8 (deflate) and no reserved flag bit: zlib refuses any other at
    once, having inflated nothing, so skipping them changes nothing but the time."""
    buf, base = source.since(offset), offset
    while True:
        at = buf.find(_MEMBER_HEADER)
        while at >= 0 and at + 3 < len(buf) and buf[at + 3] & 0xE0:
            at = buf.find(_MEMBER_HEADER, at + 1)
        if at >= 0 and at + 3 < len(buf):
            if at:
                yield buf[:at]
            return base + at, buf[at:]
        more = source.read()
        if more is None:
            if at < 0:
                if buf:
                    yield buf
                return None
            if at:
                yield buf[:at]
            return base + at, buf[at:]
        keep = at if at >= 0 else max(0, len(buf) - (len(_MEMBER_HEADER) - 1))  # a header may span two slices
        if keep:
            yield buf[:keep]
        buf, base = buf[keep:] + bytes(more), base + keep
        source.keep_from(base)


def _skipping(search: Generator[bytes, None, tuple[int, bytes] | None]) -> tuple[int, bytes] | None:
    """What :func:`_next_member` finds, the bytes before it dropped."""
    while True:
        try:
            next(search)
        except StopIteration as stop:
            return stop.value


def _gunzip_chunks(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """Inflate a (multi-member) gzip stream, going on after damage; raise _Truncated when it ends
    early, or ends with something gzip would not read after zero padding.

    :data:`MEMBER_START` comes before each member's output. A member that fails its check (deflate
    data it cannot decode, a CRC or length trailer that does not match) yields everything it inflated
    before the byte where the damage showed (see :func:`_salvage`), then :data:`MEMBER_FAILED`; the
    reading goes on at the next member header (:func:`_next_member`) that starts after the failed
    member's own and no more than :data:`RESYNC_LOOKBACK_BYTES` before that byte (a damaged member
    may be read past its end for a while before the damage shows). Such a member is trusted only
    once it passes its check: cut by the end of the file, it is ``corrupt_gzip`` (``in_member``),
    not ``truncated_gzip``. Zero bytes after the end of a member up to the end of the file are
    padding and ignored (as ``gzip -t`` does). After a member's end, zero bytes with more after them,
    or a byte other than the magic's first, are a gap: :data:`MEMBER_START`, then
    :data:`MEMBER_FAILED` if it starts with zeros (a hole), then :data:`PLAIN_TEXT` and the gap's
    bytes from its first non-zero one up to the next member header, as they are, then the reading goes
    on at that member (trusted, as above, once it passes its check). Anything else after a member's
    end starts the next member.
    """
    source = _Compressed(chunks)
    decomp = _inflate.decompressobj(wbits=31)
    member_at = 0  # where the current member starts in the file
    fed = 0  # bytes fed to the current member
    ended = False  # a member has ended and the next one has not started
    padded = False  # zero padding followed the last member
    found = False  # the current member was found by a resync and has not passed its check yet
    pending: bytes | memoryview | None = None  # bytes read already that the current member starts with
    at = 0  # where ``data`` starts in the file
    resync_from: int | None = None  # set when the current member failed: where to look for the next one
    yield MEMBER_START
    while True:
        if pending is None:
            data = source.read()
            if data is None:
                break
            at = source.end - len(data)
        else:
            data, pending = pending, None
        while data:
            if ended:
                if data[0] == 0:  # zero padding (checked by first byte: free for real members)
                    rest = _without_leading_zeros(data)
                    at += len(data) - len(rest)
                    source.keep_from(at)  # a resync after the zeros starts after them: a long run holds no memory
                    data = rest
                    padded = True
                    if not data:
                        break
                ended = False
                member_at = at
                yield MEMBER_START
                if padded or data[0] != GZIP_MAGIC[0]:
                    # Not the next member: bytes after zero padding (a hole, such as the blocks a crash
                    # left zeroed, the writing having gone on after it) or a byte that cannot start one.
                    if padded:  # the hole may have taken the end of the line in progress
                        yield MEMBER_FAILED
                    # The bytes up to the next member header are no gzip member's: they come out as
                    # they are, as plain text (text appended to a gzipped file, or junk), flagged.
                    yield PLAIN_TEXT
                    resync = yield from _next_member(source, at)
                    if resync is None:
                        return
                    member_at, pending = resync
                    at, padded = member_at, False
                    decomp, fed, found = _inflate.decompressobj(wbits=31), 0, True
                    yield MEMBER_START
                    break
            if resync_from is None:
                fed += len(data)
                source.keep_from(max(member_at + 1, at + 1 - RESYNC_LOOKBACK_BYTES))  # where a resync after this data may look
                before = decomp.copy()  # ~1 µs per slice: what the salvage replays from
                try:
                    out = decomp.decompress(data)
                except (zlib.error, _inflate.error):
                    bad = yield from _salvage(before, data)
                    resync_from = max(member_at + 1, at + bad + 1 - RESYNC_LOOKBACK_BYTES)
            if resync_from is not None:  # the member failed: read on at the next one found
                yield MEMBER_FAILED
                resync = _skipping(_next_member(source, resync_from))
                if resync is None:
                    return
                member_at, pending = resync
                at, padded, resync_from = member_at, False, None
                decomp, fed, found = _inflate.decompressobj(wbits=31), 0, True
                yield MEMBER_START
                break
            if out:
                yield out
            if not decomp.eof:
                break
            # A member ended, its check passed; what follows it is the next member (or zero padding).
            at += len(data) - len(decomp.unused_data)
            data = decomp.unused_data
            decomp, fed, found = _inflate.decompressobj(wbits=31), 0, False
            ended = True
    if fed and not decomp.eof:
        raise _Truncated("corrupt_gzip", in_member=True) if found else _Truncated("truncated_gzip")


def _without_leading_zeros(data: bytes | memoryview) -> bytes:
    """``data`` without its leading zero bytes."""
    return bytes(data).lstrip(b"\0")


def _salvage(decomp: _Decompressor, data: bytes | memoryview) -> Generator[bytes, None, int]:
    """What ``decomp`` inflates from ``data`` before the error that ``data`` is known to raise; returns
    the index in ``data`` of the byte that raises.

    zlib discards the output of a call that fails, so ``data`` is replayed in pieces of
    ``SALVAGE_PIECE_BYTES`` from a copy of the state, and the piece that fails byte by byte: all output
    of the bytes before the failing one comes out. Deflate cannot tell where damage starts, only where it
    is detected, so lines decoded just before that point may already be garbled (the reader marks the
    member's lines). A bad CRC/length trailer fails only in the trailer's bytes, after every data byte
    was inflated.
    """
    view = memoryview(data)
    for at in range(0, len(view), SALVAGE_PIECE_BYTES):
        piece = view[at : at + SALVAGE_PIECE_BYTES]
        before = decomp.copy()
        try:
            out = decomp.decompress(piece)
        except (zlib.error, _inflate.error):
            bad = yield from _inflate_until_error(before, piece)
            return at + bad
        if out:
            yield out
        if decomp.eof:  # cannot fail after the member's end; stop rather than read past it
            return at + len(piece) - 1
    return len(view) - 1


def _inflate_until_error(decomp: _Decompressor, data: memoryview) -> Generator[bytes, None, int]:
    """Inflate ``data`` one byte at a time and yield the output until a byte raises; returns its index."""
    for at in range(len(data)):
        try:
            out = decomp.decompress(data[at : at + 1])
        except (zlib.error, _inflate.error):
            return at
        if out:
            yield out
        if decomp.eof:
            return at
    return len(data) - 1


def _raw_chunks(stream: BinaryIO) -> Iterator[bytes]:
    while True:
        chunk = stream.read(CHUNK_BYTES)
        if not chunk:
            return
        yield chunk


def _make_line(line_no: int, raw: bytes, full_len: int, read_error: str | None) -> RawLine:
    """A line of at most max_line_bytes, kept whole (its trailing ``\\r`` dropped)."""
    if raw.endswith(b"\r"):
        return RawLine(line_no, raw[:-1], full_len - 1, read_error)
    return RawLine(line_no, raw, full_len, read_error)


def _buffered_line(
    line_no: int, buf: bytearray, overflow: int, max_line_bytes: int, keep_bytes: int, read_error: str | None,
    damaged_from: int | None = None,
) -> RawLine:
    """The line held in ``buf`` (plus ``overflow`` bytes not kept), ended by a newline, the end of the
    file or ``read_error``. It is ``line_too_long`` (first ``keep_bytes`` kept, trailing ``\\r`` and all)
    when longer than ``max_line_bytes`` without its trailing ``\\r``; a ``read_error`` wins over that."""
    length = len(buf) + overflow
    content = length - 1 if not overflow and buf.endswith(b"\r") else length
    if content > max_line_bytes:
        return RawLine(line_no, bytes(buf[:keep_bytes]), length, read_error or "line_too_long", damaged_from)
    line = _make_line(line_no, bytes(buf), length, read_error)
    return line if damaged_from is None else replace(line, damaged_from=damaged_from)


def split_lines(chunks: Iterator[bytes], *, max_line_bytes: int, keep_bytes: int, first_line_no: int = 1) -> Iterator[RawLine]:
    """Split a stream of decompressed bytes into numbered raw lines (see module contract), the first
    numbered ``first_line_no`` (a read resumed after a file's complete part).

    After :data:`MEMBER_FAILED`, the line in progress is the one the damage ends in: it holds the
    failed member's last bytes, and the first bytes of the next member found, which may start in the
    middle of a line whose beginning was lost. It comes out flagged ``corrupt_gzip`` with
    ``damaged_from``, the first line that holds a byte of the failed member (or of the first of
    several members failing in a row), but never a line flagged before: the ranges do not overlap.
    After :data:`PLAIN_TEXT`, up to the next :data:`MEMBER_START`, the bytes are no gzip member's:
    every line holding one of them (its newline included) is flagged ``not_gzipped``, unless it is
    ``corrupt_gzip`` already. A :class:`_Hole` ends the line in progress if it holds a byte, as a
    newline does, and is a ``zero_bytes`` line of its own."""
    keep_bytes = min(keep_bytes, max_line_bytes)  # more is never kept: a longer line is cut to it
    line_no = first_line_no - 1
    buf = bytearray()
    overflow = 0  # bytes of the current line beyond what buf holds (line_too_long)
    held = max_line_bytes + 1  # the longest line kept whole, with its trailing \r
    member_first = first_line_no  # the first line holding a byte of the gzip member being read (none before a resumed read's first is suspect)
    damaged: int | None = None  # the first damaged line, while the line the damage ends in is in progress
    flagged = 0  # the last line flagged with a damaged range
    plain = False  # reading bytes that no gzip member holds (after PLAIN_TEXT)
    plain_line = False  # the line in progress holds such a byte

    def flag() -> str | None:
        return "corrupt_gzip" if damaged is not None else "not_gzipped" if plain_line else None

    try:
        for chunk in chunks:
            if not chunk:
                if isinstance(chunk, _Hole):
                    if buf or overflow:
                        line_no += 1
                        yield _buffered_line(line_no, buf, overflow, max_line_bytes, keep_bytes, flag(), damaged)
                        if damaged is not None:
                            damaged, flagged = None, line_no
                        buf.clear()
                        overflow = 0
                    plain_line = False
                    line_no += 1
                    yield RawLine(line_no, b"", chunk.length, "zero_bytes")
                elif chunk is MEMBER_FAILED:
                    if damaged is None:
                        damaged = max(member_first, flagged + 1)
                elif chunk is PLAIN_TEXT:
                    plain = True
                else:  # MEMBER_START: the line in progress gets the new member's bytes
                    member_first = line_no + 1
                    plain = False
                continue
            start = 0
            while True:
                nl = chunk.find(b"\n", start)
                piece = chunk[start:] if nl < 0 else chunk[start:nl]
                if nl >= 0 and not buf and not overflow and len(piece) <= max_line_bytes and damaged is None and not plain:
                    # the usual case: a whole line inside this chunk, taken without copying it again
                    line_no += 1
                    yield _make_line(line_no, piece, len(piece), None)
                    start = nl + 1
                    continue
                if plain and start < len(chunk):
                    plain_line = True
                if overflow:
                    overflow += len(piece)
                else:
                    buf += piece
                    if len(buf) > held:
                        overflow = len(buf) - keep_bytes
                        del buf[keep_bytes:]
                if nl < 0:
                    break
                line_no += 1
                yield _buffered_line(line_no, buf, overflow, max_line_bytes, keep_bytes, flag(), damaged)
                if damaged is not None:  # the line the damage ends in: its range is closed
                    damaged, flagged = None, line_no
                plain_line = False
                buf.clear()
                overflow = 0
                start = nl + 1
    except _Truncated as exc:
        line_no += 1
        if exc.in_member and damaged is None:
            damaged = max(member_first, flagged + 1)
        yield _buffered_line(line_no, buf, overflow, max_line_bytes, keep_bytes, flag() or exc.reason, damaged)
        return
    if buf or overflow or damaged is not None:  # the file ends in damage (its last line, possibly empty), or without a newline
        line_no += 1
        last = _buffered_line(line_no, buf, overflow, max_line_bytes, keep_bytes, flag(), damaged)
        yield last if last.read_error else replace(last, unterminated=True)


def read_capture_stream(stream: BinaryIO, *, max_line_bytes: int, keep_bytes: int) -> Iterator[CaptureLine]:
    """Lines of one capture file given as an open binary stream (gzip detected by magic bytes)."""
    return map(decoded, read_raw_stream(stream, max_line_bytes=max_line_bytes, keep_bytes=keep_bytes))


@dataclass(frozen=True)
class CompletePart:
    """The part of a plain capture file up to and including its last newline, as a read found it:
    ``size`` bytes, holding lines 1 to ``lines`` (the reader's numbering: holes are lines too), whose
    SHA-256 is ``sha256`` (hex). A later read resumes after it while the file still starts with
    those bytes (:func:`read_capture_raw`). ``head_sha256`` is the SHA-256 of its first
    :func:`head_length` bytes (:data:`HEAD_BYTES`, or fewer for a shorter part): one of the fingerprints
    a file's first bytes must have for it to continue this part (:func:`head_sha256s`; None: not
    recorded). (A part shorter than :data:`HEAD_BYTES` that an earlier version recorded has the
    SHA-256 of all its file's bytes as read then: only a file that is that one still matches it.)"""

    size: int
    lines: int
    sha256: str
    head_sha256: str | None = None


@dataclass
class ReadOutcome:
    """What one read of a file found besides its lines, known once they are exhausted: ``read_from``,
    the byte it started at (0 for a whole read; a :class:`CompletePart`'s size for a resumed one),
    ``complete``, the file's complete part as read this time, or None when a later read cannot
    resume after it (see the module contract; also when the read failed), and ``resumed``, the part
    it resumed after (None for a whole read)."""

    read_from: int = 0
    complete: CompletePart | None = None
    resumed: CompletePart | None = None  #: the part a resumed read started after


class _CompleteTracker:
    """Follows a plain file's bytes as they are read, from ``start`` (hashed into ``digest`` already):
    where its last newline so far ends, the SHA-256 of the bytes up to there and of the first bytes
    of each of :func:`head_lengths` (``heads``: those known already, by length), and whether a zero
    byte came after the last newline. ``start_bytes`` are the file's first bytes when ``start`` is 0 (None: the text is
    known to be UTF-8), to tell a UTF-16/32 text, which cannot resume. ``whole``: the bytes are a gzip
    file's, whose part is the whole file (:meth:`complete`)."""

    def __init__(self, start: int = 0, digest: hashlib._Hash | None = None, start_bytes: bytes | None = b"",
                 heads: dict[int, str] | None = None, *, whole: bool = False) -> None:
        self._whole = whole
        self._digest = digest if digest is not None else hashlib.sha256()
        self._position = start
        self._complete_end = start
        self._complete_digest = self._digest.copy()
        self._zero_after = False
        self._start_bytes = start_bytes
        self._heads = dict(heads or {})
        self._lengths = head_lengths()

    def chunks(self, chunks: Iterator[bytes]) -> Iterator[bytes]:
        """``chunks``, passed on unchanged, followed."""
        for chunk in chunks:
            if self._start_bytes is not None and len(self._start_bytes) < _START_BYTES:
                self._start_bytes += bytes(chunk[: _START_BYTES - len(self._start_bytes)])
            base = self._position
            done = 0
            for length in self._lengths:
                if base < length <= base + len(chunk) and length not in self._heads:  # a head ends in this chunk
                    self._follow(chunk, done, length - base)
                    self._heads[length] = self._digest.copy().hexdigest()
                    done = length - base
            if done < len(chunk):
                self._follow(chunk, done, len(chunk))
            yield chunk

    def _head(self, size: int, sha: str) -> str | None:
        """The head fingerprint of a part of the first ``size`` bytes, whose SHA-256 is ``sha``."""
        length = head_length(size)
        return sha if length == size else self._heads.get(length)

    def _follow(self, chunk: bytes, start: int, end: int) -> None:
        """Follow ``chunk[start:end]``, the bytes at the current position."""
        view = memoryview(chunk)
        if self._whole:  # compressed bytes: their newlines and zeros say nothing
            self._digest.update(view[start:end])
            self._position += end - start
            return
        nl = chunk.rfind(b"\n", start, end)
        if nl < 0:
            self._digest.update(view[start:end])
            self._zero_after = self._zero_after or chunk.find(b"\0", start, end) >= 0
        else:
            self._digest.update(view[start : nl + 1])
            self._complete_digest = self._digest.copy()
            self._digest.update(view[nl + 1 : end])
            self._complete_end = self._position + nl + 1 - start
            self._zero_after = chunk.find(b"\0", nl + 1, end) >= 0
        self._position += end - start

    def complete(self, last_line_no: int) -> CompletePart | None:
        """The complete part of a file read to its end, whose last line was ``last_line_no``; for a
        gzip file (``whole``), the whole file: it is never read on after it, but a file that is it,
        byte for byte, holds the lines read (a renamed copy: ``pipelines.ingest.parts_read_before``)."""
        if self._whole:
            whole = self._digest.hexdigest()
            return CompletePart(self._position, last_line_no, whole, self._head(self._position, whole))
        if self._zero_after or self._complete_end < _START_BYTES:
            # a hole after the last newline may be several lines: where they start is not known; and
            # bytes after a shorter part may yet make the file's start a UTF-16/32 one
            return None
        if self._start_bytes is not None and _wide_encoding(self._start_bytes) is not None:
            return None  # read as its UTF-8 form: its newlines are not these bytes
        rest_is_a_line = self._position > self._complete_end  # the last line, without a newline
        sha = self._complete_digest.hexdigest()
        return CompletePart(self._complete_end, last_line_no - rest_is_a_line, sha, self._head(self._complete_end, sha))


def read_raw_stream(stream: BinaryIO, *, max_line_bytes: int, keep_bytes: int, outcome: ReadOutcome | None = None) -> Iterator[RawLine]:
    """:func:`read_capture_stream`, undecoded. With ``outcome``, the file's complete part is reported
    in it once the lines are exhausted (a gzip file's: the whole file)."""
    chunks = _raw_chunks(stream)
    first = b""
    while len(first) < len(GZIP_MAGIC):  # enough bytes to recognise gzip, whatever the chunk size
        more = next(chunks, b"")
        if not more:
            break
        first += more
    if not first:
        return

    def replay_first() -> Iterator[bytes]:
        yield first
        yield from chunks

    source: Iterator[bytes] = replay_first()
    tracker = None
    if first.startswith(GZIP_MAGIC):
        if outcome is not None:
            tracker = _CompleteTracker(start_bytes=None, whole=True)
            source = tracker.chunks(source)
        source = _gunzip_chunks(source)
    elif outcome is not None:
        tracker = _CompleteTracker()
        source = tracker.chunks(source)
    last = 0
    for line in split_lines(_holes(_as_utf8(source)), max_line_bytes=max_line_bytes, keep_bytes=keep_bytes):
        last = line.line_no
        yield line
    if tracker is not None and outcome is not None:
        outcome.complete = tracker.complete(last)


def _chunks_of(stream: BinaryIO, size: int) -> Iterator[bytes]:
    while chunk := stream.read(size):
        yield chunk


class _NotClean(Exception):
    """A gzip file's text that does not inflate cleanly there: a member failed its check, or a gap."""


def _clean_text(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """The inflated text in ``chunks`` (:func:`_gunzip_chunks`'), without the places members start;
    raises :class:`_NotClean` where a member fails its check or a gap comes (and :class:`_Truncated`
    where the file ends early). Takes no chunk from ``chunks`` before it is asked for one."""
    for chunk in chunks:
        if chunk is MEMBER_START:
            continue
        if not chunk:  # MEMBER_FAILED or PLAIN_TEXT
            raise _NotClean
        yield chunk


#: At most this many of a file's first lines shorter together than the shortest head length are
#: fingerprinted as parts of their own (:func:`_prefix_sha256s`): a capture line holds 100 bytes and
#: more, so only blank or stray short lines make more of them.
SHORT_PART_LINES = 16


def _prefix_sha256s(first: bytes) -> tuple[str, ...]:
    """The head fingerprints of bytes that start with ``first`` (at most :data:`HEAD_BYTES` of them,
    all there are when fewer): the SHA-256 of their first bytes for each of :func:`head_lengths` they
    hold, of all of ``first`` when shorter than :data:`HEAD_BYTES`, and of each of their first lines
    (up to :data:`SHORT_PART_LINES`) shorter together than the shortest head length, with its newline,
    longest first. A part that short is fingerprinted by all its bytes (:func:`head_length`) and ends
    at a newline: a file that starts with it, grown since, shows that fingerprint among these."""
    digest = hashlib.sha256()
    shas = []
    done = 0
    shortest = min(head_lengths())
    while len(shas) < SHORT_PART_LINES and (newline := first.find(b"\n", done, shortest - 1)) >= 0:
        digest.update(first[done : newline + 1])
        done = newline + 1
        shas.append(digest.copy().hexdigest())
    for length in head_lengths():
        if length > len(first):
            break
        digest.update(first[done:length])
        done = length
        shas.append(digest.copy().hexdigest())
    if done < len(first):
        digest.update(first[done:])
        shas.append(digest.hexdigest())
    return tuple(reversed(shas))


def head_sha256s(stream: BinaryIO) -> tuple[tuple[str, ...], tuple[str, ...] | None]:
    """The head fingerprints of a file (:func:`_prefix_sha256s`; the first is the SHA-256 of its first
    :data:`HEAD_BYTES` bytes, of all of them when it has fewer): a file may continue a
    :class:`CompletePart` only if the part's ``head_sha256`` is one of them. Then, for a gzip file,
    those of its inflated text (a compressed file may continue a plain file's part only if the part's
    ``head_sha256`` is one of these); None for a plain file, or a gzip file whose first bytes do not
    inflate cleanly: damage, a gap or a cut, and it is read whole. Reads as few bytes as that takes."""
    first = b""
    while len(first) < HEAD_BYTES and (more := stream.read(HEAD_BYTES - len(first))):
        first += more
    raw = _prefix_sha256s(first)
    if not first.startswith(GZIP_MAGIC):
        return raw, None
    text = bytearray()
    try:
        for chunk in _clean_text(_gunzip_chunks(itertools.chain([first], _chunks_of(stream, HEAD_BYTES)))):
            text += chunk[: HEAD_BYTES - len(text)]
            if len(text) == HEAD_BYTES:
                break
    except (_NotClean, _Truncated):
        return raw, None
    return raw, _prefix_sha256s(bytes(text))


def _after_inflated_part(text: Iterator[bytes], part: CompletePart) -> Iterator[bytes] | None:
    """``text`` (a gzip file's inflated chunks, and the marks of :func:`_gunzip_chunks`) after the
    bytes of ``part`` (a plain file's) when it starts with them; None when it does not (the bytes
    differ, or are fewer, or a member fails its check or a gap comes among them). Inflates no more
    than the part's bytes (its first :data:`HEAD_BYTES` only, when they differ)."""
    digest = hashlib.sha256()
    seen = 0
    try:
        for chunk in _clean_text(text):  # `text` itself goes on after the part
            view = memoryview(chunk)
            take = min(len(chunk), part.size - seen)
            cut = HEAD_BYTES - seen
            if part.head_sha256 is not None and part.size >= HEAD_BYTES and 0 < cut <= take:
                digest.update(view[:cut])
                if digest.copy().hexdigest() != part.head_sha256:
                    return None
                digest.update(view[cut:take])
            else:
                digest.update(view[:take])
            seen += take
            if seen == part.size:
                if digest.hexdigest() != part.sha256:
                    return None
                rest = bytes(view[take:])
                return itertools.chain([rest], text) if rest else text
    except (_NotClean, _Truncated):
        return None
    return None


def _inflating(stream: BinaryIO) -> tuple[_CompleteTracker, Iterator[bytes]]:
    """A gzip file's inflated text (with the marks of :func:`_gunzip_chunks`), and what follows its
    compressed bytes, whose complete part, once the text is exhausted, is the whole file."""
    tracker = _CompleteTracker(start_bytes=None, whole=True)
    return tracker, _gunzip_chunks(tracker.chunks(_raw_chunks(stream)))


def inflates_to(path: str, opener: Callable[[str], BinaryIO], parts: Sequence[CompletePart]) -> tuple[int, CompletePart] | None:
    """Whether the gzip file at ``path`` inflates to one of ``parts`` (plain files' parts) exactly,
    and to which: its index, and the file's own part (the whole compressed file, as a read of it
    reports). None when it does not, or is not gzip, or cannot be read (its read reports why).
    Inflates no more than the largest part and a byte."""
    longest = max((p.size for p in parts), default=-1)
    try:
        with opener(path) as stream:
            tracker, text = _inflating(stream)
            digest = hashlib.sha256()
            size = 0
            for chunk in _clean_text(text):  # plain bytes fail as a member
                size += len(chunk)
                if size > longest:
                    return None
                digest.update(chunk)
    except (OSError, _NotClean, _Truncated):
        return None
    sha = digest.hexdigest()
    at = next((i for i, p in enumerate(parts) if p.size == size and p.sha256 == sha), None)
    return None if at is None else (at, tracker.complete(parts[at].lines))


def _same_start(stream: BinaryIO, part: CompletePart) -> tuple[hashlib._Hash, dict[int, str], bool] | None:
    """Read the first ``part.size`` bytes of ``stream`` and hash them: when they are ``part``'s bytes,
    the running digest, the file's head fingerprints they hold (by length, :func:`head_lengths`) and
    whether they start as gzip does (the stream is then just past them); None when they differ or are
    fewer. A part of :data:`HEAD_BYTES` or more whose head differs is left after those bytes."""
    digest = hashlib.sha256()
    heads: dict[int, str] = {}
    lengths = head_lengths()
    start = b""
    position = 0
    while position < part.size:
        upto = next((n for n in lengths if position < n <= part.size), part.size)
        chunk = stream.read(min(CHUNK_BYTES, upto - position))
        if not chunk:
            return None
        digest.update(chunk)
        if len(start) < len(GZIP_MAGIC):
            start += chunk[: len(GZIP_MAGIC) - len(start)]
        position += len(chunk)
        if position in lengths:
            heads[position] = digest.copy().hexdigest()
            if position == HEAD_BYTES and part.head_sha256 is not None and heads[position] != part.head_sha256:
                return None
    return (digest, heads, start == GZIP_MAGIC) if digest.hexdigest() == part.sha256 else None


def starts_with(path: str, opener: Callable[[str], BinaryIO], part: CompletePart) -> bool:
    """Whether the file at ``path`` starts with ``part``'s bytes (it is read up to the part's end
    only; an I/O failure is False: the file's read reports it)."""
    try:
        with opener(path) as stream:
            return _same_start(stream, part) is not None
    except OSError:
        return False


def _resumed_inflated(stream: BinaryIO, part: CompletePart, *, max_line_bytes: int, keep_bytes: int,
                      outcome: ReadOutcome | None) -> Iterator[RawLine] | None:
    """The lines of a gzip file after ``part`` (a plain file's), which its inflated text starts
    with; None when it does not (the stream is then spent). The file's complete part is the whole
    compressed file, as for a whole read."""
    tracker, text = _inflating(stream)
    rest = _after_inflated_part(text, part)
    if rest is None:
        return None

    def lines() -> Iterator[RawLine]:
        last = part.lines
        for line in split_lines(_holes(rest), max_line_bytes=max_line_bytes, keep_bytes=keep_bytes, first_line_no=part.lines + 1):
            last = line.line_no
            yield line
        if outcome is not None:
            outcome.complete = tracker.complete(last)

    return lines()


def _resumed_lines(stream: BinaryIO, part: CompletePart, digest: hashlib._Hash, heads: dict[int, str], *, max_line_bytes: int,
                   keep_bytes: int, outcome: ReadOutcome | None) -> Iterator[RawLine]:
    """The lines after ``part``, the stream being just past it: plain text (neither gzip nor a wide
    encoding is looked for there, as a whole read does not look for them mid-file)."""
    tracker = _CompleteTracker(part.size, digest, start_bytes=None, heads=heads)
    last = part.lines
    for line in split_lines(_holes(tracker.chunks(_raw_chunks(stream))), max_line_bytes=max_line_bytes, keep_bytes=keep_bytes,
                            first_line_no=part.lines + 1):
        last = line.line_no
        yield line
    if outcome is not None:
        outcome.complete = tracker.complete(last)


def read_capture_file(
    path: str,
    opener: Callable[[str], BinaryIO],
    *,
    max_line_bytes: int,
    keep_bytes: int,
) -> Iterator[CaptureLine]:
    """Lines of the capture file at ``path``; an I/O failure becomes an ``unreadable_file`` line."""
    return map(decoded, read_capture_raw(path, opener, max_line_bytes=max_line_bytes, keep_bytes=keep_bytes))


def read_capture_raw(
    path: str,
    opener: Callable[[str], BinaryIO],
    *,
    max_line_bytes: int,
    keep_bytes: int,
    resume: Sequence[CompletePart] = (),
    resume_inflated: Sequence[CompletePart] = (),
    outcome: ReadOutcome | None = None,
) -> Iterator[RawLine]:
    """:func:`read_capture_file`, undecoded; the ``unreadable_file`` line's data is the error text.

    ``resume`` are complete parts that earlier reads reported, of this file or of others it may
    continue (a file renamed): only the lines after the largest part the file still starts with are
    read, numbered on from it; without one the file is read whole. (Each part tried costs a read of
    its bytes: give only the parts whose ``head_sha256`` is the file's, see :func:`head_sha256s`.)
    ``resume_inflated`` are plain files' parts that a gzip file's inflated text may start with (a log
    compressed as it rolls over; see :func:`head_sha256s`), tried likewise when no part of
    ``resume`` is the file's start: the lines after the largest such part are read, numbered on from
    it, ``read_from`` then counting bytes of the inflated text (the complete part is the whole
    compressed file all the same). ``outcome``, if given, says which it was and reports the file's
    complete part now (:class:`ReadOutcome`)."""
    produced = 0
    try:
        gzipped = False
        for part in sorted(resume, key=lambda p: p.size, reverse=True):
            with opener(path) as stream:
                same = _same_start(stream, part)
                if same is None:
                    continue
                digest, heads, gzipped = same
                if gzipped:  # a gzip file's part is the whole file as read: what follows it is read with it
                    break
                produced = part.lines
                if outcome is not None:
                    outcome.read_from, outcome.resumed = part.size, part
                for line in _resumed_lines(stream, part, digest, heads, max_line_bytes=max_line_bytes, keep_bytes=keep_bytes, outcome=outcome):
                    produced = line.line_no
                    yield line
                return
        # a file that starts with a gzip part (a grown gzip file) is read whole: not in its text either
        for part in sorted(resume_inflated, key=lambda p: p.size, reverse=True) if not gzipped else ():
            with opener(path) as stream:
                lines = _resumed_inflated(stream, part, max_line_bytes=max_line_bytes, keep_bytes=keep_bytes, outcome=outcome)
                if lines is None:
                    continue
                produced = part.lines
                if outcome is not None:
                    outcome.read_from, outcome.resumed = part.size, part
                for line in lines:
                    produced = line.line_no
                    yield line
                return
        with opener(path) as stream:
            for line in read_raw_stream(stream, max_line_bytes=max_line_bytes, keep_bytes=keep_bytes, outcome=outcome):
                produced = line.line_no
                yield line
    except OSError as exc:
        yield RawLine(produced + 1, f"{type(exc).__name__}: {exc}".encode("utf-8", "replace"), 0, "unreadable_file")
