"""Java iteration order (semantics spec §1). Expected orders were printed by a real JDK 17
HashMap / ConcurrentHashMap fed the same operations."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from nsreplay.model.javamap import (
    JavaMap,
    concurrent_hashmap_table_size,
    hashmap_table_size,
    java_string_hash,
    spread,
)


def test_string_hash_known_values() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("polygenelubricants") == -(2**31)  # wraps to Integer.MIN_VALUE


def test_string_hash_uses_utf16_code_units() -> None:
    assert java_string_hash("é") == 0xE9
    # U+1F600 is the surrogate pair D83D DE00 in UTF-16
    assert java_string_hash("\U0001F600") == 31 * 0xD83D + 0xDE00


def test_spread_mixes_high_bits_into_low_bits() -> None:
    assert spread(0x12345678) == 0x12345678 ^ 0x1234
    assert spread(-1) == 0xFFFFFFFF ^ 0xFFFF


def test_table_sizes_of_the_nameserver_maps() -> None:
    assert [hashmap_table_size(n) for n in (128, 32, 256)] == [128, 32, 256]
    assert [concurrent_hashmap_table_size(n) for n in (128, 32, 256)] == [256, 64, 512]


def _filled(flavour: str, size: int, keys: list[str]) -> JavaMap[str, int]:
    m: JavaMap[str, int] = JavaMap(flavour, size, java_string_hash)  # type: ignore[arg-type]
    for k in keys:
        m[k] = 1
    return m


def test_hashmap_order_matches_java() -> None:
    m = _filled("HashMap", 16, ["banana", "apple", "cherry", "Aa", "BB", "a"])
    assert list(m) == ["banana", "Aa", "BB", "apple", "cherry", "a"]


def test_removed_and_reinserted_key_goes_last_in_its_bin() -> None:
    m = _filled("HashMap", 16, ["Aa", "BB"])
    del m["Aa"]
    m["Aa"] = 2
    assert list(m) == ["BB", "Aa"]


def test_replacing_a_value_keeps_the_position() -> None:
    m = _filled("HashMap", 16, ["Aa", "BB"])
    m["Aa"] = 5
    assert list(m.items()) == [("Aa", 5), ("BB", 1)]


def test_order_is_by_bin_not_by_insertion() -> None:
    # Java: new HashMap<>(128) and new ConcurrentHashMap<>(128) both iterate broker-b before broker-a
    assert list(_filled("HashMap", 128, ["broker-a", "broker-b"])) == ["broker-b", "broker-a"]
    assert list(_filled("ConcurrentHashMap", 256, ["broker-a", "broker-b"])) == ["broker-b", "broker-a"]
    # ... but broker-z/broker-a differ between the two (bins 48 vs 91 in 128; 176 vs 91 in 256)
    assert list(_filled("HashMap", 128, ["broker-a", "broker-z"])) == ["broker-z", "broker-a"]
    assert list(_filled("ConcurrentHashMap", 256, ["broker-z", "broker-a"])) == ["broker-a", "broker-z"]


def _bin_then_fill(flavour: str, size: int, total: int) -> JavaMap[str, int]:
    # k70, k708 share bin 5 of a 64-table and stay there at 128; k92 moves to bin 69.
    fill = [f"k{i}" for i in range(5000) if spread(java_string_hash(f"k{i}")) & 63 != 5]
    return _filled(flavour, size, ["k70", "k708", "k92"] + fill[: total - 3])


def test_concurrent_hashmap_resize_reverses_entries_before_the_last_run() -> None:
    # Java: new ConcurrentHashMap<>(32) (table 64) resizes when the 48th entry is added
    m = _bin_then_fill("ConcurrentHashMap", 64, 48)
    assert m.table_size == 128
    assert [k for k in m if k in ("k70", "k708", "k92")] == ["k708", "k70", "k92"]


def test_hashmap_resize_keeps_relative_order() -> None:
    # Java: new HashMap<>(64) resizes when the 49th entry is added, splitting bins in order
    m = _bin_then_fill("HashMap", 64, 63)
    assert m.table_size == 128
    assert [k for k in m if k in ("k70", "k708", "k92")] == ["k70", "k708", "k92"]


def test_resize_thresholds() -> None:
    hm = _filled("HashMap", 16, [f"x{i}" for i in range(12)])
    assert hm.table_size == 16  # 12 == 0.75 * 16: not exceeded
    hm["x12"] = 1
    assert hm.table_size == 32
    chm = _filled("ConcurrentHashMap", 16, [f"x{i}" for i in range(11)])
    assert chm.table_size == 16
    chm["x11"] = 1  # size reaches 12
    assert chm.table_size == 32


ops = st.lists(st.tuples(st.booleans(), st.sampled_from(["Aa", "BB", "AaAa", "BBBB", "AaBB", "x", "y", "z", "q"] +
                                                       [f"k{i}" for i in range(40)])), max_size=200)


@settings(max_examples=200, deadline=None)
@given(ops)
def test_hashmap_order_is_bin_then_insertion_of_current_incarnation(operations: list[tuple[bool, str]]) -> None:
    """HashMap invariant: order = (bin at the current table size, time of the key's latest insertion)."""
    m: JavaMap[str, int] = JavaMap("HashMap", 4, java_string_hash)
    inserted_at: dict[str, int] = {}
    for clock, (put, key) in enumerate(operations):
        if put:
            if key not in m:
                inserted_at[key] = clock
            m[key] = clock
        elif key in m:
            del m[key]
            del inserted_at[key]
    expected = sorted(inserted_at, key=lambda k: (m.bin_index(k), inserted_at[k]))
    assert list(m) == expected
    assert len(m) == len(inserted_at)


@settings(max_examples=200, deadline=None)
@given(ops)
def test_both_flavours_hold_the_same_entries_as_a_dict(operations: list[tuple[bool, str]]) -> None:
    for flavour in ("HashMap", "ConcurrentHashMap"):
        m: JavaMap[str, int] = JavaMap(flavour, 4, java_string_hash)  # type: ignore[arg-type]
        plain: dict[str, int] = {}
        for clock, (put, key) in enumerate(operations):
            if put:
                m[key] = plain[key] = clock
            else:
                m.pop(key, None)
                plain.pop(key, None)
        assert dict(m.items()) == plain
        assert sorted(m) == sorted(plain)
        bins = [m.bin_index(k) for k in m]
        assert bins == sorted(bins)
