"""Maps that iterate in the order of Java's ``HashMap`` / ``ConcurrentHashMap`` (semantics spec §1).

A few NameServer rules take "the first" entry of a table (the first BrokerData holding an address, the
first cluster set holding a brokerName, the first live entry using a connection). "First" means the
real map's iteration order, so the model keeps that order exactly:

* Entries are visited bin by bin, bins in index order. The bin of a key is
  ``spread(h) & (table_size - 1)`` with ``spread(h) = h ^ (h >>> 16)`` and ``h`` the key's Java hash
  (``String.hashCode()`` over UTF-16 code units, 32-bit signed arithmetic).
* Inside a bin, a new key is appended at the tail; replacing the value of a present key keeps its
  place; a removed and re-inserted key goes to the tail again.
* Resizing (the table doubles) splits every bin into a "low" bin (same index) and a "high" bin
  (index + old size) according to the hash bit ``old_size``:

  - ``HashMap`` resizes when the size *exceeds* 0.75 x table size, and keeps the relative order of
    the entries of a bin in both halves. A bin that reaches 9 entries in a table smaller than 64 also
    resizes the table (``treeifyBin`` on a small table).
  - ``ConcurrentHashMap`` resizes when the size *reaches* 0.75 x table size and splits a bin with
    its ``lastRun`` algorithm: the longest tail of the bin whose entries all go to the same half is
    moved as is, and every entry before it is pushed to the *front* of its half, one by one (so
    those entries come out in reverse order).

Not modelled: what ``treeifyBin`` does beyond the HashMap resize above. HashMap makes a tree bin
when a bin of a table of 64 or more reaches 9 keys; ConcurrentHashMap calls it when a put reaches
the 8th key of a bin (an append, or a new value for that key), and makes a tree bin, or, in a table
of fewer than 64 bins, resizes the table to 8 times its size. That needs 8 or 9 brokerNames,
clusters or addresses with colliding bin indexes, which real deployments do not have, and the
NameServer's ConcurrentHashMaps start at 64 bins or more; such a bin simply keeps the linked-list
order described above. ``tests/model/test_javamap_vs_jdk.py`` compares this model with the JDK's
maps after every operation of random sequences, up to such a put.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Callable, Generic, Hashable, Iterable, Iterator, Literal, MutableMapping, TypeVar

__all__ = [
    "Flavour",
    "JavaMap",
    "java_string_hash",
    "spread",
    "hashmap_table_size",
    "concurrent_hashmap_table_size",
]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

Flavour = Literal["HashMap", "ConcurrentHashMap"]

_MASK32 = 0xFFFFFFFF
_TREEIFY_BIN_LENGTH = 9  # a bin that reaches this many entries is treeified (or the table resized)
_MIN_TREEIFY_TABLE = 64


@lru_cache(maxsize=65536)
def java_string_hash(text: str) -> int:
    """``String.hashCode()``: ``h = 31*h + c`` over the UTF-16 code units, as a signed 32-bit int."""
    if text.isascii():
        units: Iterator[int] | bytes = text.encode("ascii")
    else:
        raw = text.encode("utf-16-be")
        units = (raw[i] << 8 | raw[i + 1] for i in range(0, len(raw), 2))
    h = 0
    for unit in units:
        h = (31 * h + unit) & _MASK32
    return h - (1 << 32) if h & 0x80000000 else h


def spread(h: int) -> int:
    """``HashMap.hash()``: ``h ^ (h >>> 16)`` on the 32-bit hash (returned as an unsigned value)."""
    u = h & _MASK32
    return u ^ (u >> 16)


def _table_size_for(n: int) -> int:
    """Java's ``tableSizeFor``: the smallest power of two >= n (at least 1)."""
    size = 1
    while size < n:
        size <<= 1
    return size


def hashmap_table_size(initial_capacity: int) -> int:
    """Table size of ``new HashMap<>(initialCapacity)`` once its first entry is put."""
    return _table_size_for(initial_capacity)


def concurrent_hashmap_table_size(initial_capacity: int) -> int:
    """Table size of ``new ConcurrentHashMap<>(initialCapacity)`` (JDK 8..21: 128 -> 256, 32 -> 64)."""
    return _table_size_for(int(1.0 + initial_capacity / 0.75))


class JavaMap(MutableMapping[K, V], Generic[K, V]):
    """A mutable mapping whose iteration order is the Java map's (see module docstring).

    ``hash_of`` gives the Java ``hashCode()`` of a key (signed or unsigned 32-bit, only the low 32
    bits are used); ``table_size`` is the initial table size (a power of two).
    """

    def __init__(self, flavour: Flavour, table_size: int, hash_of: Callable[[K], int]) -> None:
        if flavour not in ("HashMap", "ConcurrentHashMap"):
            raise ValueError(f"unknown map flavour {flavour!r}")
        if table_size <= 0 or table_size & (table_size - 1):
            raise ValueError(f"table size must be a power of two, got {table_size}")
        self.flavour: Flavour = flavour
        self._hash_of = hash_of
        self._values: dict[K, V] = {}
        self._spread: dict[K, int] = {}
        self._bins: list[list[K]] = [[] for _ in range(table_size)]

    # -- inspection -------------------------------------------------------------------------------

    @property
    def table_size(self) -> int:
        """The current number of bins."""
        return len(self._bins)

    def bin_index(self, key: K) -> int:
        """The bin ``key`` is (or would be) in, for the current table size."""
        return self._spread_of(key) & (len(self._bins) - 1)

    # -- Mapping protocol -------------------------------------------------------------------------

    def __getitem__(self, key: K) -> V:
        return self._values[key]

    def __contains__(self, key: object) -> bool:
        return key in self._values

    def __len__(self) -> int:
        return len(self._values)

    #: The keys in Java iteration order, kept until a key is added or removed (a value update does
    #: not move a key). The list is replaced, never changed in place, so iterating it stays safe
    #: while the map changes. A class default, so maps pickled without it still load.
    _order: list | None = None

    def _keys_in_order(self) -> list[K]:
        order = self._order
        if order is None:
            order = self._order = [key for bin_ in self._bins for key in bin_]
        return order

    def __iter__(self) -> Iterator[K]:
        """Keys in Java iteration order (a snapshot: the map may be changed while iterating)."""
        return iter(self._keys_in_order())

    def unordered_values(self) -> Iterable[V]:
        """The values in no particular order (cheaper than Java order when order does not matter)."""
        return self._values.values()

    def ordered_items(self) -> list[tuple[K, V]]:
        """``list(self.items())``, in Java iteration order, without the Mapping views' overhead."""
        values = self._values
        return [(key, values[key]) for key in self._keys_in_order()]

    def __setitem__(self, key: K, value: V) -> None:
        """``put``: replace in place when present, else append at the tail of the key's bin."""
        if key in self._values:
            self._values[key] = value
            return
        self._values[key] = value
        self._order = None
        bin_ = self._bins[self.bin_index(key)]
        bin_.append(key)
        if self.flavour == "HashMap":
            if len(bin_) >= _TREEIFY_BIN_LENGTH and len(self._bins) < _MIN_TREEIFY_TABLE:
                self._resize()
            if len(self._values) > 0.75 * len(self._bins):
                self._resize()
        elif len(self._values) >= 0.75 * len(self._bins):
            self._resize()

    def __delitem__(self, key: K) -> None:
        del self._values[key]
        self._order = None
        self._bins[self.bin_index(key)].remove(key)

    def __repr__(self) -> str:
        inside = ", ".join(f"{k!r}: {self._values[k]!r}" for k in self)
        return f"JavaMap({self.flavour}, size={self.table_size}, {{{inside}}})"

    # -- internals --------------------------------------------------------------------------------

    def _spread_of(self, key: K) -> int:
        value = self._spread.get(key)
        if value is None:
            value = spread(self._hash_of(key))
            self._spread[key] = value
        return value

    def _resize(self) -> None:
        """Double the table, splitting each bin the way the Java flavour does."""
        old_size = len(self._bins)
        new_bins: list[list[K]] = [[] for _ in range(2 * old_size)]
        split = _split_keep_order if self.flavour == "HashMap" else _split_last_run
        for index, bin_ in enumerate(self._bins):
            low, high = split(bin_, [self._spread_of(k) & old_size != 0 for k in bin_])
            new_bins[index] = low
            new_bins[index + old_size] = high
        self._bins = new_bins
        self._order = None


def _split_keep_order(bin_: list[K], goes_high: list[bool]) -> tuple[list[K], list[K]]:
    """``HashMap.resize``: both halves keep the bin's relative order."""
    low = [k for k, high in zip(bin_, goes_high) if not high]
    high_ = [k for k, high in zip(bin_, goes_high) if high]
    return low, high_


def _split_last_run(bin_: list[K], goes_high: list[bool]) -> tuple[list[K], list[K]]:
    """``ConcurrentHashMap.transfer``: keep the ``lastRun`` tail, push earlier keys to the front."""
    if not bin_:
        return [], []
    last_run = 0
    for i in range(1, len(bin_)):
        if goes_high[i] != goes_high[i - 1]:
            last_run = i
    tail = list(bin_[last_run:])
    low, high = ([], tail) if goes_high[last_run] else (tail, [])
    for key, to_high in zip(bin_[:last_run], goes_high[:last_run]):
        if to_high:
            high.insert(0, key)
        else:
            low.insert(0, key)
    return low, high
