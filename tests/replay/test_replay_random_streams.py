"""Random event streams, heavy on misconfiguration, through the whole pipeline against the model.

Hypothesis draws a batch of streams; each becomes one NameServer of a single capture (so one Spark
run checks them all). Small pools of clusters, brokerNames, addresses, ids and connections make
collisions likely: one address under several brokerNames and ids, brokerNames moving between
clusters, stale connections, restarts (some as the other version), admin requests (205/327, 216,
217 naming unknown brokers, 100/102), topics with read != write queues and a topicSysFlag,
duplicates (some with their keys in another order or a member given as null), records landing
exactly on scan ticks, files out of order, register bodies in every form, with and without
static-topic mappings, some malformed (a topicConfigTable key that is not its topic's name, a
compressed body without its mapping section). The replay is one run or windows cut at random
instants (on records, on ticks, 1 ms either side).
Every tick and every record's instant of every stream must match the reference model, and so must
the change log, the intervals' causes and the keyframes.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from differential import compare_changes, compare_every_tick, compare_keyframes, keys_reversed
from nsreplay.config import load_settings
from nsreplay.model.records import broker_heartbeat, channel, conn_of, namesrv_start, query_data_version, register_broker, request, unregister_broker
from nsreplay.storage import Warehouse
from pipelines.ingest.run import run_ingest
from pipelines.replay.run import run_replay

S = 1732147200000
CLUSTERS = ("c1", "c2")
NAMES = ("broker-a", "broker-b", "broker-c", "broker-d", "broker-z")
# each brokerName has a home cluster and home addresses (ids 0 and 1); misconfigurations draw from
# the other pools now and then, so most groups are their own replay unit and some merge
HOME_CLUSTER = {n: CLUSTERS[i % 2] for i, n in enumerate(NAMES)}
HOME_ADDRS = {n: (f"10.0.{i}.1:10911", f"10.0.{i}.2:10911") for i, n in enumerate(NAMES)}
ADDRS = tuple(a for pair in HOME_ADDRS.values() for a in pair)
TOPICS = ("t1", "t2", "TBW102")
# gaps that land on or next to scan ticks and the 120 s rule
GAPS = (0, 1, 5, 4999, 5000, 5001, 10000, 30000, 119999, 120000, 120001)


@st.composite
def stream(draw, index: int) -> list[dict]:
    """One NameServer's records (seeded from hypothesis' draws)."""
    seed = draw(st.integers(0, 2**32 - 1))
    # the stream's index in the seed too: hypothesis' first example draws every integer as 0, and
    # twelve copies of one stream would check one stream
    rng = random.Random(seed * 64 + index)
    ns = f"10.1.{index}.1:9876"
    five = rng.random() < 0.5
    config = {"scanNotActiveBrokerInterval": rng.choice((5000, 3000))} if five else {}
    if five:
        config.update(supportActingMaster=rng.random() < 0.5, deleteTopicWithBrokerRegistration=rng.random() < 0.3)
    t = S
    records = [namesrv_start(t, "5.3.3" if five else "4.9.4", config, namesrv=ns)]
    generation = {a: 0 for a in ADDRS}
    mode = rng.choice(("none", "addr", "conn", "cluster"))  # one kind of misconfiguration per stream
    for _ in range(rng.randint(30, 70)):
        t += rng.choice(GAPS)
        name = rng.choice(NAMES)
        broker_id = rng.choice((0, 0, 1, 2))
        odd = rng.random() < 0.06  # this record carries the stream's misconfiguration
        addr = rng.choice(ADDRS) if odd and mode == "addr" else HOME_ADDRS[name][min(broker_id, 1)]
        cluster = rng.choice(CLUSTERS) if odd and mode == "cluster" else HOME_CLUSTER[name]
        roll = rng.random()
        if roll < 0.5:
            if rng.random() < 0.15:
                generation[addr] += 1
            # now and then read != write queues and a topicSysFlag (which the compressed form drops)
            topics = [(tp, 8, rng.choice((8, 8, 4)), rng.choice((6, 6, 4, 7)), rng.choice((0, 0, 0, 1, 3))) for tp in rng.sample(TOPICS, rng.randint(1, 3))]
            # half the time the connection is unrelated to the address: two processes reporting one
            # address (NAT, copied config) over different connections
            conn = f"10.0.8.{rng.randint(1, 2)}:5000#conn0" if odd and mode == "conn" else conn_of(addr, generation[addr])
            form = rng.choice(("json", "json", "raw", "compressed"))
            # a malformed body now and then: a topicConfigTable key that is not its config's topicName
            # (JSON forms), or a compressed body without its static-topic mapping section (5.x rejects it)
            malformed = rng.random() < 0.1
            keys = None
            if malformed and form != "compressed":
                keys = [tp for tp, *_ in topics]
                keys[0] = rng.choice([tp for tp in TOPICS if tp not in keys[1:]])
            no_section = malformed and form == "compressed"
            records.append(register_broker(
                t, cluster=cluster, name=name, addr=addr, broker_id=broker_id, topics=topics, dv=(rng.randint(0, 2), rng.choice((1, 2)), rng.choice((1, 2))),
                five=five, enable_acting_master=rng.random() < 0.5 if five else None,
                heartbeat_timeout=rng.choice((None, 10000)) if five else None, conn=conn, namesrv=ns,
                # every body form; 5.x bodies with static-topic mappings skip deleteTopicWithBrokerRegistration
                form=form, static_mappings=five and rng.random() < 0.25 and not no_section,
                topic_keys=keys, mapping_section=b"" if no_section else None,
            ))
        elif roll < 0.6:
            records.append(unregister_broker(t, cluster=cluster, name=name, addr=addr, broker_id=broker_id, namesrv=ns))
        elif roll < 0.68:
            records.append(broker_heartbeat(t, cluster=cluster, name=name, addr=addr, namesrv=ns))
        elif roll < 0.74:
            records.append(query_data_version(t, cluster=cluster, name=name, addr=addr, dv=(0, rng.choice((1, 2)), rng.choice((1, 2))), namesrv=ns))
        elif roll < 0.82:
            closing = f"10.0.8.{rng.randint(1, 2)}:5000#conn0" if mode == "conn" and rng.random() < 0.3 else conn_of(addr, generation[addr] - rng.randint(0, 1))
            records.append(channel(t, rng.choice(("CLOSE", "IDLE", "EXCEPTION")), closing, namesrv=ns))
        elif roll < 0.87:
            records.append(request(t, rng.choice((205, 327)), {"brokerName": name}, namesrv=ns))
        elif roll < 0.90:
            ext = {"topic": rng.choice(TOPICS)}
            if rng.random() < 0.5:
                ext["clusterName"] = rng.choice(CLUSTERS + ("",))
            records.append(request(t, 216, ext, namesrv=ns))
        elif roll < 0.93:
            # REGISTER_TOPIC_IN_NAMESRV (5.x; 4.9 ignores it): a brokerName unknown to the addresses
            # ("broker-ghost" never registers) stops the rest, and merges replay units
            queue_datas = [{"brokerName": n, "readQueueNums": rng.choice((4, 8)), "writeQueueNums": 8, "perm": rng.choice((6, 2)), "topicSysFlag": rng.choice((0, 1))}
                           for n in rng.sample(NAMES + ("broker-ghost",), rng.randint(1, 3))]
            records.append(request(t, 217, {"topic": rng.choice(TOPICS + ("t-new",))}, body={"queueDatas": queue_datas}, namesrv=ns))
        elif roll < 0.96:
            if rng.random() < 0.7:
                records.append(request(t, 100, {"namespace": "ORDER_TOPIC_CONFIG", "key": rng.choice(TOPICS), "value": f"{name}:4"}, namesrv=ns))
            else:
                records.append(request(t, 102, {"namespace": "ORDER_TOPIC_CONFIG", "key": rng.choice(TOPICS)}, namesrv=ns))
        else:
            if rng.random() < 0.3:
                five = not five  # the NameServer comes back as the other version: an upgrade or a downgrade
            records.append(namesrv_start(t, "5.3.3" if five else "4.9.4", config, namesrv=ns))
    for seq, record in enumerate(records):
        record["seq"] = seq
    duplicates = [respelled(r, rng) for r in rng.sample(records, k=min(3, len(records)))]
    return records + duplicates


def respelled(record: dict, rng: random.Random) -> dict:
    """A duplicate of ``record`` (capture-format.md: equal in every field) written another way: its
    keys in reverse order at every level, or with a member given as null, which is an absent one."""
    copy = keys_reversed(record) if rng.random() < 0.5 else dict(record)
    absent = [k for k in ("body", "body_b64", "remark", "note") if k not in record]
    if absent and rng.random() < 0.5:
        copy[rng.choice(absent)] = None
    return copy


@st.composite
def batches(draw) -> list[dict]:
    return [r for i in range(12) for r in draw(stream(i))]


def window_cuts(records: list[dict], rng: random.Random) -> list[int]:
    """0 to 3 instants strictly inside the streams' span where the replay is cut into windows: on a
    record's ts, a scan tick of the streams' common start, or anywhere, each give or take 1 ms."""
    ts = sorted({r["ts"] for r in records})
    cuts = set()
    for _ in range(rng.randint(0, 3)):
        roll = rng.random()
        if roll < 0.4:
            t = rng.choice(ts) + rng.choice((-1, 0, 1))
        elif roll < 0.7:
            t = S + rng.randint(1, 60) * 5000 + rng.choice((-1, 0, 1))
        else:
            t = rng.randint(ts[0], ts[-1])
        if ts[0] < t < ts[-1]:
            cuts.add(t)
    return sorted(cuts)


@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large])
@given(records=batches(), order_seed=st.integers(0, 1000), cut_seed=st.integers(0, 10**6))
def test_random_streams_match_the_model_at_every_tick(spark, tmp_path_factory, records: list[dict], order_seed: int, cut_seed: int) -> None:
    """One run, or windows cut at random instants, each resuming from the state the one before
    published (README, "Windows"): either way the published history is the model's."""
    capture = tmp_path_factory.mktemp("random")
    shuffled = list(records)
    random.Random(order_seed).shuffle(shuffled)  # files are not sorted and records interleave
    third = len(shuffled) // 3
    for name, part in (("z.jsonl", shuffled[:third]), ("a.jsonl", shuffled[third : 2 * third]), ("m.jsonl", shuffled[2 * third :])):
        (capture / name).write_text("".join(json.dumps(r) + "\n" for r in part))
    root = str(tmp_path_factory.mktemp("random-wh"))
    warehouse = Warehouse(root, spark, "delta-rs")
    run_ingest(spark, warehouse, load_settings(), str(capture), "random-ingest")
    cuts = window_cuts(records, random.Random(cut_seed))
    if cuts:
        ends = [*cuts, max(r["ts"] for r in records)]
        for i, (after, cut) in enumerate(zip([None, *cuts], ends)):
            run_replay(spark, warehouse, load_settings(), f"random-window-{i}", window_from=after, window_to=cut)
    else:
        run_replay(spark, warehouse, load_settings(), "random-replay")
    compared, mismatches, notes = compare_every_tick(Path(capture), root)
    assert compared > 12 * 10
    assert mismatches == 0, "\n".join(notes)
    # the change log (ranks, ticks, causes) and the intervals' causes, whole, and every keyframe
    compare_changes(spark, Path(capture), root)
    keyframes, mismatches, notes = compare_keyframes(Path(capture), root)
    assert keyframes >= 12 and mismatches == 0, "\n".join(notes)
