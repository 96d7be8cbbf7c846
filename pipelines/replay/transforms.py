"""Spark side of the replay: order, route to units, attach bodies, replay each unit, derive intervals.

DataFrame → DataFrame functions; the only values brought to the driver are small metadata (per
NameServer origin and profiles; the distinct (brokerName, address, connection, cluster) facts that
decide the units). No event data is collected, and topic tables are never exploded per heartbeat:
each distinct register body is joined once per unit, to the first record that carries it.
"""

from __future__ import annotations

import pickle
from typing import Callable, Iterable, Mapping

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, BooleanType, IntegerType, LongType, StringType, StructField, StructType

from nsreplay.model import profile_for_version
from nsreplay.runtime import local_frame
from nsreplay.storage.arrow_types import to_arrow_schema
from pipelines.replay.unit_replay import ROW_COLUMNS, UnitReplay, load_state, register_body
from pipelines.replay.units import BROADCAST, KV_UNIT, Membership, UnitFacts, UnitMap, WindowFacts
from pipelines.worker import gc_paused, steady_archive_imports, table_rows
from schemas.silver import BODY

# Requests that change route tables, by how they are routed to units.
BY_BROKER_NAME = (103, 104, 205, 327, 217)
BY_ADDR = (904, 322)
TO_EVERY_UNIT = (216,)
TO_KV_UNIT = (100, 102)
ROUTE_CODES = BY_BROKER_NAME + BY_ADDR + TO_EVERY_UNIT + TO_KV_UNIT

CHANGE = StructType(
    [
        StructField("namesrv", StringType(), False),
        StructField("unit", StringType(), False),
        StructField("ts", LongType(), False),
        StructField("phase", IntegerType(), False),
        StructField("record_rank", LongType(), True),
        StructField("table", StringType(), False),
        StructField("key", StringType(), False),
        StructField("op", StringType(), False),
        StructField("before", StringType(), True),
        StructField("after", StringType(), True),
        StructField("cause", StringType(), False),
    ]
)


def ranked_events(events: DataFrame) -> DataFrame:
    """Events with ``record_rank``: the NameServer's processing order among the records of one ``ts``
    (records with a seq first, by seq, then file and line). The order of a NameServer's records is
    (ts, record_rank); ranking within a ts keeps ranks independent of how time is cut into windows.
    The replay ranks the route-changing records only (:func:`replay_records`): read-only requests,
    most of a capture, take no rank (``gold.route_changes`` documents it so)."""
    w = Window.partitionBy("namesrv", "ts").orderBy(
        F.col("seq").isNull(), F.col("seq"), F.col("source_file"), F.col("line_no")
    )
    return events.withColumn("record_rank", F.row_number().over(w).cast("long"))


def restart_ranks(records: DataFrame, restarts: Iterable[tuple[str, int]]) -> DataFrame:
    """(namesrv, ts, restart_rank): the ``record_rank`` (:func:`ranked_events`) of the last start
    record of each (NameServer, ts) in ``restarts`` (of two starts at one ts the later runs on),
    ranked among ``records`` of that ts only (start records are few; the rank depends on nothing
    else)."""
    at = F.broadcast(local_frame(records.sparkSession, sorted(set(restarts)), "namesrv string, ts long"))
    starts = ranked_events(records.join(at, ["namesrv", "ts"])).where(F.col("kind") == "namesrv_start")
    return starts.groupBy("namesrv", "ts").agg(F.max("record_rank").alias("restart_rank"))


def namesrv_spans(events: DataFrame) -> dict[str, tuple[int, int]]:
    """Each NameServer's first and last record ts (the first is the tick origin when it has no
    start record first)."""
    rows = events.groupBy("namesrv").agg(F.min("ts").alias("first"), F.max("ts").alias("last")).collect()  # one row per NameServer
    return {r.namesrv: (r.first, r.last) for r in rows}


def route_changing(events: DataFrame) -> DataFrame:
    """The records that can change a route table: route requests, channel events, (re)starts."""
    return events.where(
        ((F.col("kind") == "request") & F.col("code").isin(*ROUTE_CODES))
        | F.col("kind").isin("channel", "namesrv_start")
    )


def replay_records(events: DataFrame) -> DataFrame:
    """:func:`route_changing` records with only the columns the ranking (:func:`ranked_events`), the
    routing (:func:`with_units`) and the replay read, so no wide shuffle carries the others."""
    return route_changing(events).select(*REPLAY_COLUMNS, "broker_name", "broker_addr", "source_file", "line_no")


def _register_topic_names() -> Column:
    """The brokerNames a REGISTER_TOPIC's body names, in order (silver keeps the body as JSON text)."""
    return F.from_json("body", "struct<queueDatas: array<struct<brokerName: string>>>").queueDatas.brokerName


#: Topic names of interest → for each (NameServer, topic): the brokerNames that can hold it.
TopicHolders = Callable[[Mapping[str, frozenset[str]]], Mapping[tuple[str, str], frozenset[str]]]


def unit_facts(events: DataFrame, default_profile_of: Callable[[str], str], holders: TopicHolders,
               since: Mapping[str, int] | None = None) -> dict[str, WindowFacts]:
    """What decides each NameServer's replay units, from distinct membership facts (small metadata):
    the (brokerName, address, connection, cluster) of registrations and unregistrations, the
    brokerNames named together by REGISTER_TOPIC bodies, and the profiles it ran under (those of its
    start records and ``default_profile_of(namesrv)``, the one it runs without a start record). One query:
    each record is reduced to the one fact it can carry (or none), and the distinct facts are few.
    ``since`` (NameServer → the ts of its last start in ``events``) also gives the facts of the
    records at or after that start (``WindowFacts.since_start``): only those link groups after it.

    A REGISTER_TOPIC's outcome also depends on whether its topic exists (spec §2: a brokerName
    unknown to ``addrs`` drops the whole request for a new topic, only the rest of it for an existing
    one), i.e. on every group that holds the topic then, but only when the body has two entries or
    more: with one, an abort leaves nothing either way. Its group of brokerNames is therefore the
    ones it names, followed, for a body of several entries, by ``holders`` of its topic
    (:func:`topic_holders`: every group holding it when the window starts or registering it within
    the window, a superset of those holding it at the request). A broker's own single-topic
    registration (one entry, its own brokerName) links no groups."""
    since = dict(since or {})
    request = F.col("kind") == "request"
    member = F.when(
        request & F.col("code").isin(103, 104) & F.col("broker_name").isNotNull(),
        F.struct("broker_name", "broker_addr", F.when(F.col("code") == 103, F.col("conn")).alias("conn"), "cluster_name"),
    )
    register_topic = request & (F.col("code") == 217) & F.col("body").isNotNull()
    topic_names = F.when(register_topic, _register_topic_names())
    topic = F.when(register_topic, F.col("ext_fields")["topic"])
    # every NameServer with its start records' versions (ingest requires the version of a start record)
    version = F.when(F.col("kind") == "namesrv_start", F.col("rocketmq_version"))
    late = F.lit(False)
    if since:
        starts = F.create_map(*(F.lit(x) for ns, ts in sorted(since.items()) for x in (ns, ts)))
        late = F.coalesce(F.col("ts") >= starts[F.col("namesrv")], F.lit(False))
    rows = events.select("namesrv", member.alias("member"), topic_names.alias("names"), topic.alias("topic"), version.alias("version"),
                         late.alias("late")).distinct().collect()
    named: list[tuple[str, str | None, tuple[str, ...], bool]] = []  # (namesrv, topic, names, several entries) per REGISTER_TOPIC
    for r in rows:
        if r.names:
            named.append((r.namesrv, r.topic, tuple(n for n in r.names if n is not None), len(r.names) > 1))
    wanted: dict[str, set[str]] = {}
    for ns, t, names, several in named:
        if t is not None and names and several:
            wanted.setdefault(ns, set()).add(t)
    held = holders({ns: frozenset(ts) for ns, ts in wanted.items()}) if wanted else {}

    def facts_of(ns: str, rows: list) -> UnitFacts:
        members: set[Membership] = set()
        groups: set[tuple[str, ...]] = set()
        profiles = {default_profile_of(ns)}
        for r in rows:
            if r.version is not None:
                profiles.add(profile_for_version(r.version))
            if r.member is not None:
                m = r.member
                members.add(Membership(m.broker_name, m.broker_addr, m.conn, m.cluster_name))
            if r.names:
                names = tuple(n for n in r.names if n is not None)
                several = len(r.names) > 1
                more = sorted(held.get((ns, r.topic), frozenset()) - set(names)) if r.topic is not None and several else []
                groups.add(names + tuple(more))
                members.update(Membership(n) for n in names + tuple(more))
        return UnitFacts(frozenset(members), frozenset(groups), frozenset(profiles))

    by_ns: dict[str, list] = {}
    for r in rows:
        by_ns.setdefault(r.namesrv, []).append(r)
    return {
        ns: WindowFacts(facts_of(ns, found), facts_of(ns, [r for r in found if r.late]) if ns in since else None)
        for ns, found in by_ns.items()
    }


def topic_holders(events: DataFrame, topic_configs: DataFrame, topics: Mapping[str, frozenset[str]],
                  held: DataFrame | None = None) -> dict[tuple[str, str], frozenset[str]]:
    """For each (NameServer, topic) of ``topics``: every brokerName that could hold the topic at some
    record of ``events``. That is one that registered it in ``events`` (a REGISTER_BROKER body listing
    it, by its ``topic_configs`` row, or a REGISTER_TOPIC naming it) or one of ``held``, the
    (namesrv, topic, broker_name) rows holding it when ``events`` start (:func:`queue_holders_at`;
    None when they start at the first record). Only a registration adds a (topic, brokerName) to
    the topicQueueTable (spec §2), so these are a superset of the holders at any of those records.
    Small metadata: one row per holder; the register bodies are read once each, by id."""
    if not any(topics.values()):
        return {}
    spark = events.sparkSession
    wanted = F.broadcast(local_frame(spark, sorted((ns, t) for ns, ts in topics.items() for t in ts), "namesrv string, topic string"))
    request = (F.col("kind") == "request") & F.col("namesrv").isin(sorted(topics))
    registered = events.where(request & (F.col("code") == 103) & F.col("body_id").isNotNull() & F.col("broker_name").isNotNull()).select(
        "namesrv", "broker_name", "body_id").distinct()
    # the bodies these registrations sent, before their topic lists are exploded
    listed = topic_configs.select("body_id", F.array_union(
        F.col("topic_configs.topic_name"), F.coalesce(F.col("topic_keys"), F.array().cast("array<string>"))).alias("topics"))
    by_body = registered.join(listed, "body_id").select("namesrv", F.explode("topics").alias("topic"), "broker_name")
    by_request = events.where(request & (F.col("code") == 217) & F.col("body").isNotNull()).select(
        "namesrv", F.col("ext_fields")["topic"].alias("topic"),
        F.explode(_register_topic_names()).alias("broker_name"))
    holders = by_body.unionByName(by_request)
    if held is not None:
        holders = holders.unionByName(held.select("namesrv", "topic", "broker_name"))
    rows = holders.where(F.col("broker_name").isNotNull()).join(wanted, ["namesrv", "topic"]).distinct().collect()
    found: dict[tuple[str, str], set[str]] = {}
    for r in rows:
        found.setdefault((r.namesrv, r.topic), set()).add(r.broker_name)
    return {key: frozenset(names) for key, names in found.items()}


def queue_holders_at(topic_queue_intervals: DataFrame, at: int) -> DataFrame:
    """(namesrv, topic, broker_name) of every topicQueueTable entry at ``at`` (after every record
    and tick ``<= at``), from ``gold.topic_queue_intervals`` rows: those valid at ``at``."""
    valid = (F.col("valid_from") <= at) & (F.col("valid_to").isNull() | (F.col("valid_to") > at))
    return topic_queue_intervals.where(valid).select("namesrv", "topic", "broker_name")


def with_units(spark: SparkSession, events: DataFrame, maps: Mapping[str, UnitMap]) -> DataFrame:
    """Every route-changing record with the unit(s) it goes to (broadcast records once per unit);
    records no unit claims are dropped (they cannot change anything, see below)."""
    routes = []
    for ns, m in maps.items():
        routes += [(ns, "name", k, u) for k, u in m.by_broker_name.items()]
        routes += [(ns, "addr", k, u) for k, u in m.by_addr.items()]
        routes += [(ns, "conn", k, u) for k, u in m.by_conn.items()]
        routes += [(ns, "all", BROADCAST, u) for u in sorted(m.units())]
    table = F.broadcast(local_frame(spark, routes, "namesrv string, route string, route_key string, unit string"))
    code, kind = F.col("code"), F.col("kind")
    keyed = events.withColumn(
        "route",
        F.when((kind == "request") & code.isin(*BY_BROKER_NAME), F.lit("name"))
        .when((kind == "request") & code.isin(*BY_ADDR), F.lit("addr"))
        .when(kind == "channel", F.lit("conn"))
        .when((kind == "request") & code.isin(*TO_KV_UNIT), F.lit("kv"))
        .otherwise(F.lit("all")),
    ).withColumn(
        "route_key",
        # a REGISTER_TOPIC's header names no brokerName: it goes to the unit of the first its body
        # names (every brokerName it names is in that unit, with the groups holding its topic)
        F.when((F.col("route") == "name") & (code == 217), F.try_element_at(F.filter(_register_topic_names(), lambda n: n.isNotNull()), F.lit(1)))
        .when(F.col("route") == "name", F.col("broker_name"))
        .when(F.col("route") == "addr", F.col("broker_addr"))
        .when(F.col("route") == "conn", F.col("conn"))
        .when(F.col("route") == "all", F.lit(BROADCAST)),
    )
    routed = keyed.join(table, on=["namesrv", "route", "route_key"], how="left")
    unit = F.when(F.col("route") == "kv", F.lit(KV_UNIT)).otherwise(F.col("unit"))
    # A record no unit claims names a connection, address or brokerName that no REGISTER_BROKER,
    # UNREGISTER_BROKER or REGISTER_TOPIC of this NameServer ever used: it cannot find any state to
    # change (e.g. a client's CLOSE, a heartbeat from an unknown address), so it is not replayed.
    return routed.withColumn("unit", unit).where(F.col("unit").isNotNull()).select(*REPLAY_COLUMNS, "record_rank", "unit")


#: The silver.events columns a unit's replay reads (:class:`~pipelines.replay.unit_replay.RecordBuilder`);
#: the others (ids, lineage, the routing keys) are dropped once records are routed, before any wide shuffle.
REPLAY_COLUMNS = (
    "namesrv", "ts", "seq", "kind", "code", "version", "opaque", "conn", "event", "remote", "rocketmq_version",
    "ext_fields", "config", "body_id", "body", "body_b64",
)


def replay_partitions(units: int, cores: int, tasks_per_core: int) -> int:
    """How many tasks replay ``units`` units on ``cores`` cores: ``tasks_per_core`` a core (a few, so
    that units of different sizes even out), never more than the units (an empty task costs a Python
    worker's start), at least one."""
    return max(1, min(units, tasks_per_core * cores))


def units_input(routed: DataFrame, topic_configs: DataFrame, partitions: int) -> tuple[DataFrame, DataFrame]:
    """The two sides of :func:`replay_units`: the routed records (with :func:`with_states`' rows, if
    any), hash-partitioned by (namesrv, unit) into ``partitions`` (:func:`replay_partitions`), and
    the decoded bodies each unit's records name, once per (namesrv, unit, body_id).

    The wide records cross the network once, here, whatever ``spark.sql.shuffle.partitions`` says,
    and the units are grouped in that partitioning. The bodies' side moves narrow rows only: the
    distinct (namesrv, unit, body_id) of the records, joined with ``topic_configs`` (silver's decoded
    bodies, of the whole history) by body_id, then shuffled to the records' partitioning. However
    large the history's bodies grow (too large to broadcast), no wide row is shuffled again to meet
    them (``tests/replay/test_replay_partitions.py`` reads the plan)."""
    records = routed.repartition(partitions, "namesrv", "unit")
    # (new names for the same columns: the two sides of a cogroup must not share attributes)
    named = records.where(F.col("body_id").isNotNull()).select(*(F.col(c).alias(c) for c in ("namesrv", "unit", "body_id"))).distinct()
    body_cols = [c for c in BODY.fieldNames() if c != "body_id"]
    return records, named.join(topic_configs.select("body_id", *body_cols), "body_id")


UNIT_OUTPUT = StructType(
    CHANGE.fields
    + [StructField("carried", BooleanType(), True), StructField("state", BinaryType(), True)]
)
STATE_COLUMN = "replay_state"


def with_states(routed: DataFrame, states: DataFrame | None) -> DataFrame:
    """The routed records plus, for every unit that resumes, one row carrying its pickled state
    (``replay_state``; the state rows have no record columns). ``states``: (namesrv, unit,
    replay_state). Before :func:`units_input`, whose partitioning a union after it would undo (the
    grouping would then shuffle the wide rows a second time)."""
    plain = routed.withColumn(STATE_COLUMN, F.lit(None).cast(BinaryType()))
    if states is None:
        return plain
    return plain.unionByName(states.select("namesrv", "unit", STATE_COLUMN), allowMissingColumns=True)


def replay_units(
    records: DataFrame,
    bodies: DataFrame,
    *,
    origins: Mapping[str, int],
    until: int,
    defaults: Mapping[str, tuple[str, Mapping[str, object]]],
) -> DataFrame:
    """Rows of schema UNIT_OUTPUT for every (NameServer, unit), each unit replayed in one task:
    its change rows (``state`` null; ``carried`` true for the rows that opened intervals carried in
    from the previous window), then one row whose ``state`` is the unit's pickled
    :class:`~pipelines.replay.unit_replay.UnitReplay` at ``until``. A unit with a state row resumes
    from it; a unit without one starts at its NameServer's origin, under the NameServer's
    ``defaults`` (profile, config) until its first start record. ``records`` and ``bodies``:
    :func:`units_input` (a unit's records with its state row, and the decoded bodies they name)."""
    arrow_schema = to_arrow_schema(UNIT_OUTPUT)
    origins = dict(origins)
    defaults = {ns: (profile, dict(config)) for ns, (profile, config) in defaults.items()}

    def replay(table: pa.Table, named: pa.Table) -> pa.Table:
        steady_archive_imports()
        with gc_paused():
            return replay_group(table, named)

    def replay_group(table: pa.Table, named: pa.Table) -> pa.Table:
        resumed = table.filter(pc.is_valid(table[STATE_COLUMN]))
        records = table.filter(pc.is_null(table[STATE_COLUMN])).sort_by([("ts", "ascending"), ("record_rank", "ascending")])
        first = (resumed if resumed.num_rows else records).slice(0, 1).to_pylist()
        if not first:
            return arrow_schema.empty_table()
        namesrv, unit = first[0]["namesrv"], first[0]["unit"]
        if resumed.num_rows:
            unit_replay = load_state(resumed[STATE_COLUMN][0].as_py())
            out = [{"namesrv": namesrv, "unit": unit, **row} for row in unit_replay.carried()]
        else:
            profile, config = defaults[namesrv]
            unit_replay = UnitReplay(origin=origins[namesrv], default_profile=profile, default_config=config)
            out = []
        # The decoded bodies by id, then only the columns a record is built from.
        bodies = {row["body_id"]: register_body(row) for row in named.to_pylist()}
        rows = table_rows(records.select(list(ROW_COLUMNS)))
        out += [{"namesrv": namesrv, "unit": unit, **change} for change in unit_replay.feed(rows, until, bodies)]
        out.append({"namesrv": namesrv, "unit": unit, "ts": until, "phase": -1, "table": "", "key": "", "op": "state", "cause": "state",
                    "state": pickle.dumps(unit_replay, protocol=pickle.HIGHEST_PROTOCOL)})
        return pa.Table.from_pylist(out, schema=arrow_schema)

    return records.groupBy("namesrv", "unit").cogroup(bodies.groupBy("namesrv", "unit")).applyInArrow(replay, UNIT_OUTPUT)
