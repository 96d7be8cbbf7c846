"""A negative brokerId through the whole pipeline: accepted at ingest, replayed as the NameServer does.

The semantics spec (§2) reads ``brokerId`` from the header as a Java long and lists what makes a
NameServer reject a REGISTER_BROKER (a CRC mismatch, a body it cannot decode, 5.x steps 4–5); a
negative id is none of them, and the capture format's bad input is a field of the wrong type, not a
long below 0. Both profiles store any long (``Map<Long, String>``): a broker configured with
``brokerId=-1`` is a slave (not the master, id 0), in 5.x the smallest id of its group, so a prime
slave when it sends ``enableActingMaster``; and a group left holding only ``-1`` is not "without a
master" (``docs/spec-questions.md``, question 15). The ingest quarantined such records as
``quality:broker_id_non_negative``, so the rebuild lacked brokers the NameServer routed to.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from differential import compare_changes, compare_every_tick, quarantined_lines
from nsreplay.config import load_settings
from nsreplay.history import PublishedHistory
from nsreplay.model.records import namesrv_start, register_broker, unregister_broker
from published import published_lines

S = 1732147200000
NS5, NS49 = "10.0.0.20:9876", "10.0.0.21:9876"
TOPICS = [("t", 8, 8, 6, 0), ("u", 4, 4, 6, 0)]  # two: 5.x refuses a new id whose body holds exactly one (§2 step 5)


def capture() -> list[dict]:
    """5.x (supportActingMaster): a prime slave with id -1 before its master, the master leaving it
    alone, another group's slave with id -2 unregistered by that id; 4.9: a slave with id -1, the
    master unregistering; every broker then left to expire."""
    five = dict(cluster="c", five=True, enable_acting_master=True, topics=TOPICS, namesrv=NS5)
    four = dict(cluster="c", five=False, enable_acting_master=None, topics=TOPICS, namesrv=NS49)
    return [
        namesrv_start(S, "5.3.3", {"scanNotActiveBrokerInterval": 5000, "supportActingMaster": True}, namesrv=NS5),
        register_broker(S + 100, name="b", addr="10.0.2.1:10911", broker_id=-1, conn="s1", **five),  # prime slave: perm 4
        register_broker(S + 1_000, name="b", addr="10.0.2.2:10911", conn="m1", **five),  # the master: perm 6
        register_broker(S + 2_000, name="b2", addr="10.0.2.3:10911", conn="m2", **five),
        register_broker(S + 2_100, name="b2", addr="10.0.2.4:10911", broker_id=-2, conn="s2", **five),
        register_broker(S + 30_100, name="b", addr="10.0.2.1:10911", broker_id=-1, conn="s1", **five),
        unregister_broker(S + 40_000, cluster="c", name="b", addr="10.0.2.2:10911", namesrv=NS5),  # leaves {-1: slave}
        unregister_broker(S + 41_000, cluster="c", name="b2", addr="10.0.2.4:10911", broker_id=-2, namesrv=NS5),
        namesrv_start(S, "4.9.4", {}, namesrv=NS49),
        register_broker(S + 200, name="b", addr="10.0.3.1:10911", conn="m3", **four),
        register_broker(S + 300, name="b", addr="10.0.3.2:10911", broker_id=-1, conn="s3", **four),  # a slave: no topic work
        unregister_broker(S + 40_000, cluster="c", name="b", addr="10.0.3.1:10911", namesrv=NS49),  # leaves {-1: slave}
        register_broker(S + 150_000, name="b", addr="10.0.3.2:10911", broker_id=-1, conn="s3", **four),
    ]


@pytest.fixture(scope="module")
def negative_published(spark, tmp_path_factory) -> tuple[Path, str, object]:
    """(capture dir, warehouse root, ingest result) of :func:`capture`, ingested, replayed, published."""
    return published_lines(spark, tmp_path_factory, "negative", "capture.jsonl", (json.dumps(r) for r in capture()))


def test_records_with_a_negative_broker_id_are_accepted(negative_published) -> None:
    capture_dir, _, result = negative_published
    assert quarantined_lines([capture_dir / "capture.jsonl"], load_settings()) == {}
    assert (result.lines_read, result.accepted, result.quarantined) == (len(capture()), len(capture()), 0)


def test_negative_broker_ids_are_replayed_as_the_model_replays_them(spark, negative_published) -> None:
    capture_dir, root, _ = negative_published
    compared, mismatches, notes = compare_every_tick(capture_dir, root)
    assert compared > 20 and mismatches == 0, "\n".join(notes[:20])
    compare_changes(spark, capture_dir, root)


def test_a_group_left_with_id_minus_one_routes_to_it(negative_published) -> None:
    """After the masters left: both NameServers route topic t to the slave under key -1; the 5.x one
    keeps its write bit (the smallest id left is not above 0: spec-questions 15), and b2's slave
    with id -2, unregistered by that id, is gone. While it was there it was b2's prime slave (the
    smallest id, enableActingMaster): its first registration wrote its topics without the write
    bit, over the master's (§2, 5.x step 7b)."""
    _, root, _ = negative_published
    history = PublishedHistory(root)
    for namesrv, addr in ((NS5, "10.0.2.1:10911"), (NS49, "10.0.3.2:10911")):
        snapshot = history.snapshot_at(namesrv, S + 45_000)
        assert dict(snapshot.brokerAddrTable["b"].brokerAddrs) == {-1: addr}, namesrv
        assert snapshot.topicQueueTable["t"]["b"].perm == 6, namesrv
    assert dict(history.snapshot_at(NS5, S + 45_000).brokerAddrTable["b2"].brokerAddrs) == {0: "10.0.2.3:10911"}
    before = history.snapshot_at(NS5, S + 30_000)
    assert dict(before.brokerAddrTable["b2"].brokerAddrs) == {0: "10.0.2.3:10911", -2: "10.0.2.4:10911"}
    assert before.topicQueueTable["t"]["b2"].perm == 4
