"""Quarantined records against the model. A line the ingest quarantines never reaches
``silver.events``: the replay neither applies it nor gives it a ``record_rank`` (schemas/gold.py), so
the oracle (``differential.capture_records``) leaves it out too, by the ingest's own verdict.

The capture puts quarantined route-changing records at one instant ``T``, each before a valid
registration of that instant, on two NameServers:

* ``NS_CRC`` (seq order): a REGISTER_BROKER whose ``bodyCrc32`` does not match its raw body
  (``crc_mismatch``; the model rejects it too, changing nothing, but it is no record of silver);
* ``NS_OTHER`` (file order): a register body that is not base64 (``undecodable_body``), an
  UNREGISTER_BROKER without ``brokerId`` (``missing_field``), a channel event the capture format does
  not know (``unknown_channel_event``) and a registration from an address that is not host:port
  (``quality:broker_address``, which the model would apply).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from differential import capture_records, compare_changes, published_rows
from nsreplay.config import load_settings
from nsreplay.history import PublishedHistory
from nsreplay.model.records import channel, conn_of, namesrv_start, register_broker, unregister_broker
from nsreplay.storage import Warehouse
from pipelines.ingest.run import run_ingest
from pipelines.replay.run import run_replay
from schemas.gold import ROUTE_CHANGES
from schemas.silver import QUARANTINE

S = 1732147200000
T = S + 20_000  # the instant holding the quarantined records
NS_CRC = "10.9.0.1:9876"  # 5.x
NS_OTHER = "10.9.1.1:9876"  # 4.9
ADDR = {name: f"10.0.{i}.1:10911" for i, name in enumerate(("broker-a", "broker-b", "broker-c", "broker-x", "broker-y", "broker-z"))}


def register(ts: int, name: str, namesrv: str, **options: Any) -> dict[str, Any]:
    """A REGISTER_BROKER of ``name`` (cluster c1, its own address, two topics: 5.x refuses a first
    registration whose body holds exactly one) to ``namesrv``."""
    return register_broker(ts, cluster="c1", name=name, addr=options.pop("addr", ADDR[name]), topics=[f"{name}-1", f"{name}-2"],
                           five=namesrv == NS_CRC, namesrv=namesrv, **options)


def with_header(record: dict[str, Any], **changes: str | None) -> dict[str, Any]:
    """``record`` with its ``extFields`` changed (``None`` removes a field)."""
    ext = {**record["extFields"], **changes}
    return {**record, "extFields": {k: v for k, v in ext.items() if v is not None}}


def wrong_crc(record: dict[str, Any]) -> dict[str, Any]:
    """A REGISTER_BROKER with raw body bytes, its ``bodyCrc32`` made another non-zero value (zero
    would skip the check)."""
    return with_header(record, bodyCrc32=str(int(record["extFields"]["bodyCrc32"]) % 0x7FFFFFFF + 1))


def crc_records() -> list[dict[str, Any]]:
    """``NS_CRC``: the wrong-CRC registration at ``T`` comes before a valid one by ``seq``."""
    return [
        namesrv_start(S, "5.3.3", namesrv=NS_CRC, seq=0),
        register(S + 1000, "broker-a", NS_CRC, seq=1),
        wrong_crc(register(T, "broker-b", NS_CRC, form="raw", seq=2)),
        register(T, "broker-c", NS_CRC, form="raw", seq=3),
        register(S + 30_000, "broker-a", NS_CRC, seq=4),
        channel(S + 40_000, "CLOSE", conn_of(ADDR["broker-c"]), namesrv=NS_CRC, seq=5),
    ]


def other_records() -> list[dict[str, Any]]:
    """``NS_OTHER``, without seq (file order): four records quarantined for other reasons at ``T``
    before a valid registration."""
    return [
        namesrv_start(S, "4.9.4", namesrv=NS_OTHER),
        register(S + 1000, "broker-x", NS_OTHER),
        {**register(T, "broker-y", NS_OTHER, form="raw"), "body_b64": "not base64!"},
        with_header(unregister_broker(T, cluster="c1", name="broker-x", addr=ADDR["broker-x"], namesrv=NS_OTHER), brokerId=None),
        channel(T, "RESET", conn_of(ADDR["broker-x"]), namesrv=NS_OTHER),
        register(T, "broker-y", NS_OTHER, addr="broker-y.local"),
        register(T, "broker-z", NS_OTHER),
        register(S + 30_000, "broker-x", NS_OTHER),
        unregister_broker(S + 40_000, cluster="c1", name="broker-z", addr=ADDR["broker-z"], namesrv=NS_OTHER),
    ]


QUARANTINED = Counter({
    (NS_CRC, T, "crc_mismatch"): 1,
    (NS_OTHER, T, "undecodable_body"): 1,
    (NS_OTHER, T, "missing_field"): 1,
    (NS_OTHER, T, "unknown_channel_event"): 1,
    (NS_OTHER, T, "quality:broker_address"): 1,
})


@pytest.fixture(scope="module")
def quarantine_published(spark, tmp_path_factory) -> tuple[Path, str]:
    """(capture dir, warehouse root) of the two NameServers' records, ingested, replayed, published."""
    capture = tmp_path_factory.mktemp("quarantined")
    for name, records in (("crc.jsonl", crc_records()), ("other.jsonl", other_records())):
        (capture / name).write_text("".join(json.dumps(r) + "\n" for r in records))
    root = str(tmp_path_factory.mktemp("quarantined-wh"))
    warehouse = Warehouse(root, spark, "delta-rs")
    run_ingest(spark, warehouse, load_settings(), str(capture), "q-ingest")
    run_replay(spark, warehouse, load_settings(), "q-replay")
    return capture, root


def test_quarantined_records_take_no_rank_and_change_nothing(spark, quarantine_published) -> None:
    capture, root = quarantine_published
    quarantined = Warehouse(root, spark, "delta-rs").read(QUARANTINE).select("namesrv", "ts", "reason").collect()
    assert Counter(map(tuple, quarantined)) == QUARANTINED
    # the valid registration at T is the first record of its instant that silver holds on each side
    history = PublishedHistory(root)
    at_t = [r for r in published_rows(root, history, ROUTE_CHANGES) if r["ts"] == T]
    assert {(r["namesrv"], r["record_rank"]) for r in at_t} == {(NS_CRC, 1), (NS_OTHER, 1)}
    # and gold.route_changes and the interval tables, whole, equal the model's over the accepted records
    compared = compare_changes(spark, capture, root)
    assert compared[ROUTE_CHANGES.name]["registered"] >= 4


def test_the_oracle_reads_the_lines_the_ingest_accepts_and_no_other(tmp_path) -> None:
    valid = crc_records()[:2]
    start = namesrv_start(S, "5.3.3", namesrv=NS_CRC)
    lines = [
        json.dumps(valid[0]).encode(),
        b"{not json",  # invalid_json
        b"",  # empty_line
        b'{"namesrv": "\xff"}',  # invalid_utf8
        b"[1, 2]",  # not_an_object
        json.dumps({**valid[1], "kind": "gossip"}).encode(),  # unknown_kind
        json.dumps({**start, "rocketmq_version": "banana"}).encode(),  # wrong_type: a start the model refuses
        json.dumps({**valid[1], "ts": 1000}).encode(),  # quality:ts_plausible
        json.dumps(wrong_crc(register(T, "broker-b", NS_CRC, form="raw"))).encode(),  # crc_mismatch
        json.dumps(valid[1]).encode(),
    ]
    (tmp_path / "c.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    assert [r["_line"] for r in capture_records(tmp_path)] == [1, len(lines)]
