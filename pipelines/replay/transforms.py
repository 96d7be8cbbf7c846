"""Spark side of the replay: order, route to units, attach bodies, replay each unit, derive intervals.

DataFrame → DataFrame functions; the only values brought to the driver are small metadata (per
NameServer origin and profiles; the distinct (brokerName, address, connection, cluster) facts that
decide the units). No event data is collected, and topic tables are never exploded per heartbeat:
each distinct register body is joined once per unit, to the first record that carries it.
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from nsreplay.model import profile_for_version
from nsreplay.storage.arrow_types import to_arrow_schema
from pipelines.replay.unit_replay import replay_unit
from pipelines.replay.units import BROADCAST, KV_UNIT, Membership, UnitMap, assign_units
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
    """Events with ``record_rank``: the NameServer's processing order (ts, seq — records with a seq
    first —, then file and line)."""
    w = Window.partitionBy("namesrv").orderBy(
        F.col("ts"), F.col("seq").isNull(), F.col("seq"), F.col("source_file"), F.col("line_no")
    )
    return events.withColumn("record_rank", F.row_number().over(w).cast("long"))


def namesrv_origins(events: DataFrame) -> dict[str, int]:
    """Each NameServer's first record ts (the tick origin when it has no start record first)."""
    return {r.namesrv: r.first for r in events.groupBy("namesrv").agg(F.min("ts").alias("first")).collect()}


def route_changing(events: DataFrame) -> DataFrame:
    """The records that can change a route table: route requests, channel events, (re)starts."""
    return events.where(
        ((F.col("kind") == "request") & F.col("code").isin(*ROUTE_CODES))
        | F.col("kind").isin("channel", "namesrv_start")
    )


def unit_maps(events: DataFrame, default_profile: str) -> dict[str, UnitMap]:
    """The replay units of every NameServer, from distinct membership facts (small metadata)."""
    facts: dict[str, list[Membership]] = {}
    rows = (
        events.where((F.col("kind") == "request") & F.col("code").isin(103, 104) & F.col("broker_name").isNotNull())
        .select("namesrv", "broker_name", "broker_addr", F.when(F.col("code") == 103, F.col("conn")).alias("conn"), "cluster_name")
        .distinct()
        .collect()
    )
    for r in rows:
        facts.setdefault(r.namesrv, []).append(Membership(r.broker_name, r.broker_addr, r.conn, r.cluster_name))
    topic_groups: dict[str, list[tuple[str, ...]]] = {}
    register_topic = events.where((F.col("kind") == "request") & (F.col("code") == 217) & F.col("body").isNotNull())
    names = F.from_json("body", "struct<queueDatas: array<struct<brokerName: string>>>").queueDatas.brokerName
    for r in register_topic.select("namesrv", names.alias("names")).distinct().collect():
        if r.names:
            topic_groups.setdefault(r.namesrv, []).append(tuple(n for n in r.names if n is not None))
            for n in r.names:
                if n is not None:
                    facts.setdefault(r.namesrv, []).append(Membership(n))
    profiles: dict[str, set[str]] = {}
    for r in events.where(F.col("kind") == "namesrv_start").select("namesrv", "rocketmq_version").distinct().collect():
        profiles.setdefault(r.namesrv, set()).add(profile_for_version(r.rocketmq_version))
    namesrvs = {r.namesrv for r in events.select("namesrv").distinct().collect()}
    return {
        ns: assign_units(facts.get(ns, []), topic_groups=topic_groups.get(ns, ()), profiles=profiles.get(ns, {default_profile}) | {default_profile})
        for ns in namesrvs
    }


def with_units(spark: SparkSession, events: DataFrame, maps: Mapping[str, UnitMap]) -> DataFrame:
    """Every route-changing record with the unit(s) it goes to (broadcast records once per unit);
    records no unit claims are dropped (they cannot change anything, see below)."""
    routes = []
    for ns, m in maps.items():
        routes += [(ns, "name", k, u) for k, u in m.by_broker_name.items()]
        routes += [(ns, "addr", k, u) for k, u in m.by_addr.items()]
        routes += [(ns, "conn", k, u) for k, u in m.by_conn.items()]
        routes += [(ns, "all", BROADCAST, u) for u in sorted(m.units())]
    table = F.broadcast(spark.createDataFrame(routes, "namesrv string, route string, route_key string, unit string"))
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
        F.when(F.col("route") == "name", F.col("broker_name"))
        .when(F.col("route") == "addr", F.col("broker_addr"))
        .when(F.col("route") == "conn", F.col("conn"))
        .when(F.col("route") == "all", F.lit(BROADCAST)),
    )
    routed = keyed.join(table, on=["namesrv", "route", "route_key"], how="left")
    unit = F.when(F.col("route") == "kv", F.lit(KV_UNIT)).otherwise(F.col("unit"))
    # A record no unit claims names a connection, address or brokerName that no REGISTER_BROKER,
    # UNREGISTER_BROKER or REGISTER_TOPIC of this NameServer ever used: it cannot find any state to
    # change (e.g. a client's CLOSE, a heartbeat from an unknown address), so it is not replayed.
    return routed.withColumn("unit", unit).where(F.col("unit").isNotNull()).drop("route", "route_key")


def with_first_bodies(routed: DataFrame, topic_configs: DataFrame) -> DataFrame:
    """Attach the decoded body to the first record of each body_id in each unit (only there)."""
    w = Window.partitionBy("namesrv", "unit", "body_id").orderBy("record_rank")
    first = F.col("body_id").isNotNull() & (F.row_number().over(w) == 1)
    marked = routed.withColumn("_first_body", first)
    body_cols = [c for c in BODY.fieldNames() if c != "body_id"]
    bodies = topic_configs.select("body_id", *body_cols)
    joined = marked.join(bodies, on="body_id", how="left")
    for c in body_cols:
        joined = joined.withColumn(c, F.when(F.col("_first_body"), F.col(c)))
    return joined.drop("_first_body")


def replay_units(
    routed: DataFrame,
    *,
    origins: Mapping[str, int],
    until: int,
    default_profile: str,
    default_config: Mapping[str, object],
) -> DataFrame:
    """Change rows (schema CHANGE) of every (NameServer, unit), each unit replayed in one task."""
    arrow_schema = to_arrow_schema(CHANGE)
    origins = dict(origins)
    config = dict(default_config)

    def replay(table: pa.Table) -> pa.Table:
        rows: list[dict[str, Any]] = table.sort_by("record_rank").to_pylist()
        if not rows:
            return arrow_schema.empty_table()
        namesrv, unit = rows[0]["namesrv"], rows[0]["unit"]
        out = [
            {"namesrv": namesrv, "unit": unit, **change}
            for change in replay_unit(rows, origin=origins[namesrv], until=until, default_profile=default_profile, default_config=config)
        ]
        return pa.Table.from_pylist(out, schema=arrow_schema)

    return routed.groupBy("namesrv", "unit").applyInArrow(replay, CHANGE)
