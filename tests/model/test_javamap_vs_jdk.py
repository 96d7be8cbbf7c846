"""The model's Java maps (:class:`~nsreplay.model.javamap.JavaMap`) iterate as the JDK's own do.

``JavaMaps.java`` runs on this machine's ``java`` (source launch) and replays the same operations on
``java.util.HashMap`` and ``java.util.concurrent.ConcurrentHashMap``, printing the iteration order
after every operation; the model's order must be the same after every one. The cases are random
puts and removes of broker-like names, addresses and keys of equal ``String.hashCode`` ("Aa" and
"BB" blocks), on the initial capacities the NameServer uses and on small ones, so that tables
resize (HashMap keeps each bin's order, ConcurrentHashMap's ``lastRun`` split reverses part of it)
and, for HashMap, a bin of 9 in a table under 64 resizes it.

What ``treeifyBin`` does is not modelled (``nsreplay/model/javamap.py``): tree bins, and the resize
a ConcurrentHashMap of fewer than 64 bins makes instead. A case stops being compared from the
operation that would call it (:func:`_jdk_treeifies`), and the test requires such cases to stay rare.
"""

from __future__ import annotations

import random
from itertools import product
from pathlib import Path

from jdk import run_java

from nsreplay.model.javamap import JavaMap, concurrent_hashmap_table_size, hashmap_table_size, java_string_hash

JAVA_MAPS = Path(__file__).with_name("JavaMaps.java")
CAPACITIES = {"HashMap": [1, 2, 16, 32, 128, 256, 1024], "ConcurrentHashMap": [1, 2, 16, 32, 128, 256, 1024]}
EQUAL_HASH = ["".join(blocks) for blocks in product(["Aa", "BB"], repeat=4)]  # 16 keys, one String.hashCode
TREE_BIN = 9  # a bin reaching this many keys becomes a tree bin, or (HashMap, table < 64) resizes the table


def _pool(rng: random.Random) -> list[str]:
    names = [f"broker-{rng.choice('abcdefghijklmnopqrstuvwxyz')}{rng.randint(0, 99)}" for _ in range(rng.randint(3, 40))]
    addrs = [f"10.0.{rng.randint(0, 3)}.{rng.randint(1, 254)}:{rng.choice([10911, 10921, 30911])}" for _ in range(rng.randint(0, 30))]
    odd = [rng.choice(["", "é", "集群", "\U0001f600", "a b"]) + str(rng.randint(0, 9)) for _ in range(rng.randint(0, 4))]
    family = rng.sample(EQUAL_HASH, rng.randint(0, 9))
    return names + addrs + odd + family


def _cases(rng: random.Random, count: int) -> list[tuple[str, int, list[tuple[bool, str]]]]:
    cases = []
    for _ in range(count):
        flavour = rng.choice(list(CAPACITIES))
        pool = _pool(rng)
        ops = [(rng.random() < 0.75, rng.choice(pool)) for _ in range(rng.randint(1, 90))]
        capacity = rng.choice(CAPACITIES[flavour])
        if flavour == "HashMap" and rng.random() < 0.1:  # a small table whose bin reaches 9: HashMap resizes it
            capacity = rng.choice([1, 2, 4, 8, 16])
            ops = [(True, key) for key in rng.sample(EQUAL_HASH, 9)] + ops
        cases.append((flavour, capacity, ops))
    return cases


def _jdk_orders(cases: list[tuple[str, int, list[tuple[bool, str]]]]) -> list[list[list[str]]]:
    lines = [f"{flavour} {capacity} " + " ".join(("+" if put else "-") + key.encode().hex() for put, key in ops)
             for flavour, capacity, ops in cases]
    return [[[bytes.fromhex(k).decode() for k in order.split(",") if k] for order in line.split(";")] for line in run_java(JAVA_MAPS, lines)]


def _jdk_treeifies(m: JavaMap, key: str) -> bool:
    """Whether putting ``key`` into ``m`` makes the JDK's map call ``treeifyBin`` where the model has
    no equivalent: HashMap appending a 9th key to a bin of a table of 64 or more (a tree bin; under
    64 it resizes, which the model does); ConcurrentHashMap reaching the 8th key of a bin, by an
    append or by replacing that key's value (a tree bin, or under 64 bins a resize to 8 times the
    table)."""
    index = m.bin_index(key)
    in_bin = [k for k in m if m.bin_index(k) == index]  # in the bin's order
    if m.flavour == "HashMap":
        return key not in m and len(in_bin) + 1 >= TREE_BIN and m.table_size >= 64
    reached = in_bin.index(key) + 1 if key in m else len(in_bin)  # ConcurrentHashMap.putVal's binCount
    return reached >= TREE_BIN - 1


def test_the_model_iterates_as_the_jdks_hashmap_and_concurrent_hashmap() -> None:
    cases = _cases(random.Random(54), 2000)
    compared = out_of_model = 0
    differ = []
    for (flavour, capacity, ops), jdk in zip(cases, _jdk_orders(cases)):
        size = hashmap_table_size(capacity) if flavour == "HashMap" else concurrent_hashmap_table_size(capacity)
        m: JavaMap[str, int] = JavaMap(flavour, size, java_string_hash)  # type: ignore[arg-type]
        for step, ((put, key), expected) in enumerate(zip(ops, jdk)):
            if put and _jdk_treeifies(m, key):
                out_of_model += 1
                break
            if put:
                m[key] = step
            else:
                m.pop(key, None)
            compared += 1
            if list(m) != expected:
                differ.append((flavour, capacity, ops[: step + 1], list(m), expected))
                break
    assert differ[:3] == []
    assert compared > 50_000 and out_of_model < len(cases) // 20, (compared, out_of_model)
