"""unit_facts: the membership facts, REGISTER_TOPIC groups and profiles of each NameServer, from one
query over silver.events rows (whole-value comparison with the facts written out by hand)."""

from __future__ import annotations

from typing import Any

from pipelines.replay.transforms import unit_facts
from pipelines.replay.units import Membership, UnitFacts
from schemas.silver import EVENTS

A, B = "10.0.0.1:9876", "10.0.0.2:9876"


def _row(namesrv: str, ts: int, kind: str, **fields: Any) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(EVENTS.schema.fieldNames())
    row.update(namesrv=namesrv, ts=ts, kind=kind, record_id=f"{namesrv}-{ts}", source_file="f", line_no=ts, run_id="r", event_date="2024-11-21")
    row.update(fields)
    return row


def _register(namesrv: str, ts: int, code: int, name: str | None, addr: str, conn: str, cluster: str) -> dict[str, Any]:
    return _row(namesrv, ts, "request", code=code, broker_name=name, broker_addr=addr, conn=conn, cluster_name=cluster)


def test_unit_facts_collects_memberships_topic_groups_and_profiles(spark) -> None:
    rows = [
        _row(A, 1, "namesrv_start", rocketmq_version="4.9.7"),
        _register(A, 2, 103, "b1", "10.1.0.1:10911", "c1", "C1"),
        _register(A, 3, 103, "b1", "10.1.0.1:10911", "c1", "C1"),  # the same fact again
        _register(A, 4, 104, "b2", "10.1.0.2:10911", "c9", "C1"),  # unregister: no connection kept
        _register(A, 5, 103, None, "10.1.0.3:10911", "c3", "C1"),  # no brokerName: no fact
        _row(A, 6, "request", code=217, body='{"queueDatas":[{"brokerName":"b1"},{"brokerName":"b3"}]}'),
        _row(A, 7, "request", code=217, body='{"queueDatas":[]}'),  # names no group
        _row(A, 8, "request", code=217, body="not json"),
        _row(A, 9, "channel", event="CLOSE", conn="c1", remote="10.1.0.1:50000"),
        _row(A, 10, "namesrv_start", rocketmq_version="5.1.4"),
        _register(B, 1, 904, "b1", "10.1.0.1:10911", "c1", "C1"),  # a heartbeat is not a membership fact
    ]
    events = spark.createDataFrame(rows, EVENTS.schema)

    facts = unit_facts(events, "rocketmq-4.9")

    assert facts == {
        A: UnitFacts(
            frozenset({
                Membership("b1", "10.1.0.1:10911", "c1", "C1"),
                Membership("b2", "10.1.0.2:10911", None, "C1"),
                Membership("b1"),
                Membership("b3"),
            }),
            frozenset({("b1", "b3")}),
            frozenset({"rocketmq-4.9", "rocketmq-5"}),
        ),
        B: UnitFacts(frozenset(), frozenset(), frozenset({"rocketmq-4.9"})),
    }
