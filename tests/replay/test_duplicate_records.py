"""Duplicate records against the model. A duplicate is "a record equal in every field"
(capture-format.md); the ingest keeps one of them in ``silver.events``, the replay gives only that one a
``record_rank`` (schemas/gold.py), and the model must count the same records once.

Equal in every field means equal as JSON values, whatever the spelling of the line:

* keys in another order, other white space, a string written with ``\\u`` escapes: the same record;
* a member given as ``null``: the same as the member left out (the ingest reads every optional field
  so, ``seq`` included, and the model orders a record with ``"seq": null`` as one without ``seq``);
* ``1``, ``1.0`` and ``true`` are three values (JSON's types differ), so records differing only there
  are three records.

The capture puts each kind of copy at one instant ``T``, before a registration of that instant, so a
copy counted differently shifts the registration's ``record_rank`` and ``compare_changes`` fails.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from differential import compare_changes, keys_reversed, published_rows
from nsreplay.history import PublishedHistory
from nsreplay.model.records import broker_heartbeat, namesrv_start, register_broker
from nsreplay.model.replay import order_records
from pipelines.ingest.run import IngestResult
from published import published_lines
from schemas.gold import ROUTE_CHANGES

S = 1732147200000
T = S + 20_000
NS = "10.9.2.1:9876"  # 5.x, no seq: records of one instant are in file order
ADDR = {name: f"10.0.{i}.1:10911" for i, name in enumerate(("broker-a", "broker-b", "broker-c", "broker-d"))}


def register(ts: int, name: str) -> dict[str, Any]:
    return register_broker(ts, cluster="c1", name=name, addr=ADDR[name], topics=[f"{name}-1", f"{name}-2"], five=True, namesrv=NS)


def heartbeat(ts: int, name: str, **extra: Any) -> dict[str, Any]:
    return {**broker_heartbeat(ts, cluster="c1", name=name, addr=ADDR[name], namesrv=NS), **extra}


def respelled(record: dict[str, Any]) -> str:
    """The same record as another line: keys reversed at every level, spaces after separators and
    every string character of the brokerName escaped."""
    text = json.dumps(keys_reversed(record), separators=(" , ", " : "))
    name = record["extFields"]["brokerName"]
    return text.replace(json.dumps(name), '"' + "".join(f"\\u{ord(c):04x}" for c in name) + '"')


def capture_lines() -> list[str]:
    """The capture, one JSON text per line (see module docstring)."""
    original = register(T, "broker-b")
    plain = [json.dumps(r) for r in (namesrv_start(S, "5.3.3", namesrv=NS), register(S + 1000, "broker-a"))]
    return plain + [
        json.dumps(original),
        respelled(original),  # duplicate
        json.dumps({**original, "seq": None}),  # duplicate: a null member is an absent one
        json.dumps(register(T, "broker-c")),
        json.dumps(heartbeat(T, "broker-a", note=1)),
        json.dumps(heartbeat(T, "broker-a", note=1.0)),  # not a duplicate: 1.0 is not 1
        json.dumps(heartbeat(T, "broker-a", note=True)),  # not a duplicate: true is not 1
        json.dumps(register(T, "broker-d")),
        json.dumps(register(S + 30_000, "broker-a")),
    ]


@pytest.fixture(scope="module")
def duplicates_published(spark, tmp_path_factory) -> tuple[Path, str, IngestResult]:
    """(capture dir, warehouse root, the ingest's result) of the capture, ingested, replayed, published."""
    return published_lines(spark, tmp_path_factory, "dup", "dup.jsonl", capture_lines())


def test_the_ingest_counts_the_respelled_and_null_member_copies_as_duplicates(duplicates_published) -> None:
    _, _, ingested = duplicates_published
    assert (ingested.lines_read, ingested.accepted, ingested.duplicates, ingested.quarantined) == (11, 9, 2, 0)


def test_copies_take_no_rank_and_values_of_other_types_do(duplicates_published) -> None:
    _, root, _ = duplicates_published
    registered_at_t = {r["key"]: r["record_rank"] for r in published_rows(root, PublishedHistory(root), ROUTE_CHANGES)
                       if r["ts"] == T and r["table"] == "brokerAddrTable"}
    # ranks count from 1: broker-b is the first record of T, its two copies take no rank, and the
    # three heartbeats between broker-c and broker-d take three
    assert registered_at_t == {'["broker-b"]': 1, '["broker-c"]': 2, '["broker-d"]': 6}


def test_gold_equals_the_model_over_the_capture(spark, duplicates_published) -> None:
    capture, root, _ = duplicates_published
    compared = compare_changes(spark, capture, root)
    assert compared[ROUTE_CHANGES.name]["registered"] >= 4


def test_the_model_keeps_one_of_each_duplicate_and_every_value_of_another_type() -> None:
    records = [json.loads(line) for line in capture_lines()]
    kept = order_records(records)
    assert len(kept) == 9
    assert [r.get("note") for r in kept if r.get("code") == 904] == [1, 1.0, True]
    assert [type(r.get("note")) for r in kept if r.get("code") == 904] == [int, float, bool]
