"""unit_facts: the membership facts, REGISTER_TOPIC groups and profiles of each NameServer, from one
query over silver.events rows (whole-value comparison with the facts written out by hand)."""

from __future__ import annotations

from typing import Any

from pipelines.replay.transforms import queue_holders_at, topic_holders, unit_facts
from pipelines.replay.units import Membership, UnitFacts, WindowFacts
from schemas.silver import EVENTS, TOPIC_CONFIGS

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
        _row(A, 6, "request", code=217, ext_fields={"topic": "t"}, body='{"queueDatas":[{"brokerName":"b1"},{"brokerName":"b3"}]}'),
        _row(A, 7, "request", code=217, body='{"queueDatas":[]}'),  # names no group
        _row(A, 8, "request", code=217, body="not json"),
        # one entry: its topic's existence cannot change what it does, so its holders are not asked
        _row(A, 8, "request", code=217, ext_fields={"topic": "s"}, body='{"queueDatas":[{"brokerName":"b5"}]}'),
        _row(A, 9, "channel", event="CLOSE", conn="c1", remote="10.1.0.1:50000"),
        _row(A, 10, "namesrv_start", rocketmq_version="5.1.4"),
        _register(A, 11, 103, "b2", "10.1.0.9:10911", "c2", "C2"),  # after the last start
        _row(A, 12, "request", code=217, ext_fields={"topic": "t"}, body='{"queueDatas":[{"brokerName":"b2"},{"brokerName":"b1"}]}'),
        _register(B, 1, 904, "b1", "10.1.0.1:10911", "c1", "C1"),  # a heartbeat is not a membership fact
    ]
    events = spark.createDataFrame(rows, EVENTS.schema)

    asked = []

    def holders(topics):  # t is held by b4 too (a group the request does not name), s by b6
        asked.append(topics)
        return {(A, "t"): frozenset({"b1", "b4"}), (A, "s"): frozenset({"b5", "b6"})}

    whole_a = UnitFacts(
        frozenset({
            Membership("b1", "10.1.0.1:10911", "c1", "C1"),
            Membership("b2", "10.1.0.2:10911", None, "C1"),
            Membership("b2", "10.1.0.9:10911", "c2", "C2"),
            Membership("b1"),
            Membership("b2"),
            Membership("b3"),
            Membership("b4"),
            Membership("b5"),
        }),
        frozenset({("b1", "b3", "b4"), ("b5",), ("b2", "b1", "b4")}),
        frozenset({"rocketmq-4.9", "rocketmq-5"}),
    )
    whole_b = UnitFacts(frozenset(), frozenset(), frozenset({"rocketmq-4.9"}))

    assert unit_facts(events, lambda ns: "rocketmq-4.9", holders) == {A: WindowFacts(whole_a), B: WindowFacts(whole_b)}
    assert asked == [{A: frozenset({"t"})}]  # once, for the topics REGISTER_TOPICs of several entries name

    # with A's last start at 10: the facts from 10 on too (a start at 10 runs 5.x, with the default)
    since_start = UnitFacts(
        frozenset({Membership("b2", "10.1.0.9:10911", "c2", "C2"), Membership("b1"), Membership("b2"), Membership("b4")}),
        frozenset({("b2", "b1", "b4")}),
        frozenset({"rocketmq-4.9", "rocketmq-5"}),
    )
    assert unit_facts(events, lambda ns: "rocketmq-4.9", holders, {A: 10}) == {A: WindowFacts(whole_a, since_start), B: WindowFacts(whole_b)}


def _body(body_id: str, *topics: str, keys: list[str] | None = None) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(TOPIC_CONFIGS.schema.fieldNames())
    configs = [dict(topic_name=t, read_queue_nums=8, write_queue_nums=8, perm=6, topic_sys_flag=0, order=False, topic_filter_type="SINGLE_TAG") for t in topics]
    row.update(body_id=body_id, encoding="json", has_data_version=True, topic_configs=configs, topic_count=len(topics), filter_server_list=[],
               legacy_wrapper=False, body_bytes=1, topic_keys=keys, first_run_id="r")
    return row


def test_topic_holders_are_the_groups_that_registered_or_were_given_the_topic(spark) -> None:
    """Spec §2, REGISTER_TOPIC: whether its topic exists decides what a brokerName unknown to addrs
    does, so every group that can hold the topic must replay with it."""
    rows = [
        _row(A, 1, "request", code=103, broker_name="b1", body_id="x"),      # t and u
        _row(A, 2, "request", code=103, broker_name="b2", body_id="y"),      # u only
        _row(A, 3, "request", code=103, broker_name="b5", body_id="z"),      # a key "t" whose config names "t2"
        _row(A, 4, "request", code=904, broker_name="b6", body_id=None),     # a heartbeat holds nothing
        _row(A, 5, "request", code=217, ext_fields={"topic": "t"}, body='{"queueDatas":[{"brokerName":"b7"},{"brokerName":null}]}'),
        _row(A, 6, "request", code=217, ext_fields={"topic": "v"}, body='{"queueDatas":[{"brokerName":"b8"}]}'),
        _row(B, 1, "request", code=103, broker_name="b9", body_id="x"),      # another NameServer
    ]
    events = spark.createDataFrame(rows, EVENTS.schema)
    bodies = spark.createDataFrame([_body("x", "t", "u"), _body("y", "u"), _body("z", "t2", keys=["t"])], TOPIC_CONFIGS.schema)

    assert topic_holders(events, bodies, {A: frozenset({"t", "w"})}) == {(A, "t"): frozenset({"b1", "b5", "b7"})}
    assert topic_holders(events, bodies, {A: frozenset({"u"}), B: frozenset({"t"})}) == {(A, "u"): frozenset({"b1", "b2"}), (B, "t"): frozenset({"b9"})}
    assert topic_holders(events, bodies, {}) == {}

    # the groups holding a topic when the records start (a window's predecessor's topicQueueTable)
    held = spark.createDataFrame([(A, "t", "b0"), (A, "w", "b3"), (B, "w", "b4")], "namesrv string, topic string, broker_name string")
    assert topic_holders(events, bodies, {A: frozenset({"t", "w"})}, held) == {(A, "t"): frozenset({"b0", "b1", "b5", "b7"}), (A, "w"): frozenset({"b3"})}


def test_queue_holders_at_are_the_topic_route_intervals_valid_then(spark) -> None:
    def interval(broker: str, valid_from: int, valid_to: int | None) -> tuple:
        return (A, "t", broker, 8, 8, 6, 0, valid_from, valid_to, "registered", None, "r")

    from schemas.gold import TOPIC_QUEUE_INTERVALS

    rows = [interval("ends-before", 1, 100), interval("ends-at", 5, 1000), interval("from-at", 1000, 2000), interval("open", 10, None),
            interval("after", 1001, None), interval("spans", 999, 1001)]
    fields = ["namesrv", "topic", "broker_name", "read_queue_nums", "write_queue_nums", "perm", "topic_sys_flag", "valid_from", "valid_to",
              "start_cause", "end_cause", "run_id"]
    intervals = spark.createDataFrame([dict(zip(fields, r)) for r in rows], TOPIC_QUEUE_INTERVALS.schema)
    got = sorted(tuple(r) for r in queue_holders_at(intervals, 1000).collect())
    assert got == [(A, "t", "from-at"), (A, "t", "open"), (A, "t", "spans")]
