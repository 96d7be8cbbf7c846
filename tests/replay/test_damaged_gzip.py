"""Damaged gzip captures against the model. The ingest keeps every complete line a damaged gzip file
inflates to before its damage, and quarantines the cut line after them (``truncated_gzip``,
``corrupt_gzip``; pipelines/ingest/capture_reader.py). The oracle inflates the same files its own way
(``differential._inflated``, a byte at a time), so the published history must equal the model's over
exactly those lines: a reader that lost a salvageable line, or kept one it should not, fails.

One NameServer's records are spread over three files: a plain one, a gzip file cut short in its
deflate data and a gzip file with one byte of its deflate data changed, each file holding
registrations, heartbeats and unregistrations of several brokers at shared instants (no ``seq``: file
order decides ties, so a lost or extra line also moves ranks).
"""

from __future__ import annotations

import gzip
import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from differential import _inflated, capture_records, compare_changes
from nsreplay.config import load_settings
from nsreplay.model.records import broker_heartbeat, namesrv_start, register_broker, unregister_broker
from nsreplay.storage import Warehouse
from pipelines.ingest.run import IngestResult, run_ingest
from pipelines.replay.run import run_replay
from schemas.silver import QUARANTINE

S = 1732147200000
NS = "10.9.3.1:9876"  # 4.9
BROKERS = [f"broker-{i}" for i in range(12)]


def addr(name: str) -> str:
    return f"10.0.{BROKERS.index(name)}.1:10911"


def records_of_file(rnd: random.Random, n: int) -> list[dict[str, Any]]:
    """``n`` records at instants a second apart, several per instant."""
    out = []
    for i in range(n):
        ts, name = S + 1000 * (1 + i // 3), rnd.choice(BROKERS)
        kind = rnd.random()
        if kind < 0.5:
            topics = [f"t-{rnd.randrange(40)}" for _ in range(rnd.randint(2, 6))]
            out.append(register_broker(ts, cluster="c1", name=name, addr=addr(name), topics=sorted(set(topics)) or ["t-0", "t-1"], five=False, namesrv=NS))
        elif kind < 0.8:
            out.append(broker_heartbeat(ts, cluster="c1", name=name, addr=addr(name), namesrv=NS))
        else:
            out.append(unregister_broker(ts, cluster="c1", name=name, addr=addr(name), namesrv=NS))
    return out


def jsonl(records: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def damaged(data: bytes, how: str) -> bytes:
    """``data`` gzipped, then cut at 60 % of its length, or with the byte there inverted."""
    packed = gzip.compress(data, mtime=0)
    at = len(packed) * 6 // 10
    if how == "cut":
        return packed[:at]
    return packed[:at] + bytes([packed[at] ^ 0xFF]) + packed[at + 1:]


@pytest.fixture(scope="module")
def damaged_published(spark, tmp_path_factory) -> tuple[Path, str, IngestResult]:
    rnd = random.Random(20261127)
    capture = tmp_path_factory.mktemp("damaged-gzip")
    (capture / "a-plain.jsonl").write_bytes(jsonl([namesrv_start(S, "4.9.4", namesrv=NS)] + records_of_file(rnd, 60)))
    (capture / "b-cut.jsonl.gz").write_bytes(damaged(jsonl(records_of_file(rnd, 400)), "cut"))
    (capture / "c-flipped.jsonl.gz").write_bytes(damaged(jsonl(records_of_file(rnd, 400)), "flip"))
    root = str(tmp_path_factory.mktemp("damaged-gzip-wh"))
    warehouse = Warehouse(root, spark, "delta-rs")
    ingested = run_ingest(spark, warehouse, load_settings(), str(capture), "gz-ingest")
    run_replay(spark, warehouse, load_settings(), "gz-replay")
    return capture, root, ingested


def test_each_damaged_file_loses_only_what_follows_its_damage(spark, damaged_published) -> None:
    capture, root, ingested = damaged_published
    reasons = Counter((Path(r.source_file).name, r.reason) for r in
                      Warehouse(root, spark, "delta-rs").read(QUARANTINE).select("source_file", "reason").collect())
    flags = {(name, reason): n for (name, reason), n in reasons.items() if reason.endswith("_gzip")}
    assert flags == {("b-cut.jsonl.gz", "truncated_gzip"): 1, ("c-flipped.jsonl.gz", "corrupt_gzip"): 1}
    # deflate finds a changed byte only some way after it: the lines inflated in between are garbled,
    # and quarantined when they are no valid record (here some are)
    assert {name for name, reason in reasons if not reason.endswith("_gzip")} == {"c-flipped.jsonl.gz"}
    kept = Counter(Path(r["_file"]).name for r in capture_records(capture))
    assert kept["a-plain.jsonl"] == 61
    # some lines of each damaged file come through, and fewer than it held
    assert 0 < kept["b-cut.jsonl.gz"] < 400 and 0 < kept["c-flipped.jsonl.gz"] < 400
    assert (ingested.accepted + ingested.duplicates, ingested.quarantined) == (sum(kept.values()), sum(reasons.values()))


def test_gold_equals_the_model_over_the_salvaged_lines(spark, damaged_published) -> None:
    capture, root, _ = damaged_published
    compared = compare_changes(spark, capture, root)
    assert compared["gold.route_changes"]["registered"] > 0


def test_the_oracle_inflates_members_and_padding_and_stops_at_damage() -> None:
    one, two = b'{"a": 1}\n', b'{"b": 2}\n'
    assert _inflated(gzip.compress(one) + gzip.compress(two) + b"\0" * 7) == one + two
    assert _inflated(gzip.compress(one) + gzip.compress(two)[:-8]) == one + two  # only the trailer is cut
    assert _inflated(gzip.compress(one) + b"\x1f\x8b" + b"\xff" * 20) == one
