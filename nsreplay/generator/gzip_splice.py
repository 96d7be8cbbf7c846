"""A single-member gzip writer that splices pre-deflated pieces (deflate once, write many times).

Contract:

* The output is one standard gzip member (RFC 1952: fixed header with mtime 0, raw deflate data, CRC32 and
  ISIZE trailer), readable by any gzip reader (Python, zcat, Hadoop/Spark, Java's GZIPInputStream).
* :meth:`GzipSplicer.write` deflates ordinary bytes through a streaming compressor.
  :meth:`GzipSplicer.splice` inserts a :class:`DeflatedPiece` made once by :func:`deflate_piece`: the
  streaming compressor is full-flushed first (byte-aligned, dictionary reset), and the piece was
  deflated by a fresh compressor and full-flushed without a final block, so it never refers to data
  outside itself. The concatenation is therefore a valid deflate stream of the concatenated data.
* The CRC32 of a spliced piece is folded in with ``crc32(A + B) = shift_len(B)(crc32(A)) ^ crc32(B)``; the
  shift is linear over GF(2) and is tabulated once per piece length (4 x 256 entries).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import BinaryIO

__all__ = ["DeflatedPiece", "deflate_piece", "GzipSplicer"]

_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03"  # deflate, no flags, mtime 0, no xfl, OS unix
_SHIFT_CACHE: dict[int, tuple[list[int], list[int], list[int], list[int]]] = {}


def _shift_tables(length: int) -> tuple[list[int], list[int], list[int], list[int]]:
    """Byte-sliced tables of the linear map v -> crc32(zeros(length), v) ^ crc32(zeros(length), 0)."""
    cached = _SHIFT_CACHE.get(length)
    if cached is not None:
        return cached
    zeros = bytes(length)
    base = zlib.crc32(zeros, 0)
    basis = [zlib.crc32(zeros, 1 << k) ^ base for k in range(32)]
    tables = []
    for byte_index in range(4):
        table = [0] * 256
        for b in range(1, 256):
            low = b & -b
            table[b] = table[b ^ low] ^ basis[byte_index * 8 + low.bit_length() - 1]
        tables.append(table)
    result = (tables[0], tables[1], tables[2], tables[3])
    _SHIFT_CACHE[length] = result
    return result


@dataclass(frozen=True)
class DeflatedPiece:
    """Bytes deflated once, ready to be spliced into any number of gzip streams."""

    deflated: bytes
    crc: int
    length: int
    t0: list[int]
    t1: list[int]
    t2: list[int]
    t3: list[int]

    def combine(self, crc: int) -> int:
        """CRC32 of (data with CRC ``crc``) followed by this piece."""
        return (self.t0[crc & 0xFF] ^ self.t1[(crc >> 8) & 0xFF] ^ self.t2[(crc >> 16) & 0xFF]
                ^ self.t3[crc >> 24] ^ self.crc)


def deflate_piece(data: bytes, level: int) -> DeflatedPiece:
    """Deflate ``data`` on its own (fresh dictionary, full flush, no final block)."""
    comp = zlib.compressobj(level, zlib.DEFLATED, -15)
    deflated = comp.compress(data) + comp.flush(zlib.Z_FULL_FLUSH)
    return DeflatedPiece(deflated, zlib.crc32(data), len(data), *_shift_tables(len(data)))


class GzipSplicer:
    """Writes one gzip member to ``fh``; call :meth:`close` to finish it."""

    def __init__(self, fh: BinaryIO, level: int, buffer_bytes: int = 1 << 20) -> None:
        self._fh = fh
        self._comp = zlib.compressobj(level, zlib.DEFLATED, -15)
        self._pending: list[bytes] = []
        self._pending_size = 0
        self._buffer_bytes = buffer_bytes
        self.crc = 0
        self.size = 0
        self.written = len(_HEADER)
        fh.write(_HEADER)

    def _out(self, data: bytes) -> None:
        if data:
            self._fh.write(data)
            self.written += len(data)

    def _drain(self) -> None:
        if self._pending:
            data = b"".join(self._pending) if len(self._pending) > 1 else self._pending[0]
            self._pending.clear()
            self._pending_size = 0
            self.crc = zlib.crc32(data, self.crc)
            self.size += len(data)
            self._out(self._comp.compress(data))

    def write(self, data: bytes) -> None:
        """Append ordinary bytes (deflated with the stream)."""
        self._pending.append(data)
        self._pending_size += len(data)
        if self._pending_size >= self._buffer_bytes:
            self._drain()

    def splice(self, piece: DeflatedPiece) -> None:
        """Append a pre-deflated piece."""
        self._drain()
        self._out(self._comp.flush(zlib.Z_FULL_FLUSH))
        self._out(piece.deflated)
        self.crc = piece.combine(self.crc)
        self.size += piece.length

    def close(self) -> None:
        """Finish the deflate stream and write the gzip trailer (the file handle stays open)."""
        self._drain()
        self._out(self._comp.flush(zlib.Z_FINISH))
        self._out(struct.pack("<II", self.crc & 0xFFFFFFFF, self.size & 0xFFFFFFFF))
