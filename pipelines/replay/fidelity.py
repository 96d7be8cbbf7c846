"""Ground truth: captured GET_ROUTEINFO_BY_TOPIC answers against the rebuilt route at that instant.

A captured ``response`` is paired with the latest GET_ROUTEINFO_BY_TOPIC request before it on the
same connection with the same opaque. The rebuilt answer is rendered (by the reference model's
renderer) from the rows of the generic interval history alive at the request's ``ts``: the topic's
QueueData, the BrokerData of its brokerNames, every filter-server list (the answer depends on
whether the global filter table is empty) and the topic's order config. Answers are compared as the
spec says: code, remark, and the TopicRouteData with lists as sets.

Output rows (``gold.route_fidelity``): one per checked response, ``match`` true or false.
"""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pyarrow as pa
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from nsreplay.model import Answer, BrokerData, FrozenDict, NamesrvConfig, QueueData, Snapshot, route_info, same_answer
from nsreplay.storage.arrow_types import to_arrow_schema
from schemas.gold import ROUTE_FIDELITY

GET_ROUTEINFO_BY_TOPIC = 105


def route_queries(events: DataFrame) -> DataFrame:
    """Captured answers to GET_ROUTEINFO_BY_TOPIC, each with its request: (namesrv, query_id, ts,
    topic, request_version, captured_code, captured_body, captured_body_b64, captured_remark)."""
    requests = events.where((F.col("kind") == "request") & (F.col("code") == GET_ROUTEINFO_BY_TOPIC) & F.col("topic").isNotNull()).select(
        "namesrv", "conn", "opaque", F.col("ts").alias("req_ts"), F.col("record_id").alias("req_id"), "topic", F.col("version").alias("request_version")
    )
    responses = events.where(F.col("kind") == "response").select(
        "namesrv", "conn", "opaque", F.col("ts").alias("resp_ts"), F.col("record_id").alias("query_id"),
        F.col("code").alias("captured_code"), F.col("body").alias("captured_body"), F.col("body_b64").alias("captured_body_b64"), F.col("remark").alias("captured_remark"),
    )
    paired = responses.join(requests, ["namesrv", "conn", "opaque"]).where(F.col("req_ts") <= F.col("resp_ts"))
    latest = Window.partitionBy("query_id").orderBy(F.col("req_ts").desc(), F.col("req_id"))
    return paired.withColumn("_n", F.row_number().over(latest)).where(F.col("_n") == 1).select(
        "namesrv", "query_id", F.col("req_ts").alias("ts"), "topic", "request_version", "captured_code", "captured_body", "captured_body_b64", "captured_remark"
    )


def _alive_at(rows: DataFrame, ts: str = "q.ts") -> Any:
    return (F.col("i.valid_from") <= F.col(ts)) & (F.col("i.valid_to").isNull() | (F.col(ts) < F.col("i.valid_to")))


def relevant_rows(queries: DataFrame, generic: DataFrame) -> DataFrame:
    """For each query, the history rows alive at its ts that its answer depends on."""
    q, i = queries.alias("q"), generic.alias("i")
    key0 = F.from_json(F.col("i.key"), "array<string>")[0]
    same_ns = F.col("q.namesrv") == F.col("i.namesrv")
    topic_rows = q.join(i, same_ns & (F.col("i.table") == "topicQueueTable") & (key0 == F.col("q.topic")) & _alive_at(i))
    topic_rows = topic_rows.select("q.query_id", "q.namesrv", "q.ts", "i.table", "i.key", "i.value")
    names = topic_rows.select("query_id", "namesrv", "ts", F.from_json("key", "array<string>")[1].alias("broker_name")).alias("n")
    i2 = generic.alias("i")
    broker_rows = names.join(
        i2,
        (F.col("n.namesrv") == F.col("i.namesrv")) & (F.col("i.table") == "brokerAddrTable") & (F.from_json(F.col("i.key"), "array<string>")[0] == F.col("n.broker_name")) & _alive_at(i2, "n.ts"),
    ).select("n.query_id", "n.namesrv", "n.ts", "i.table", "i.key", "i.value")
    other_rows = q.join(
        i, same_ns & ((F.col("i.table") == "filterServerTable") | ((F.col("i.table") == "orderTopicConf") & (key0 == F.col("q.topic")))) & _alive_at(i)
    ).select("q.query_id", "q.namesrv", "q.ts", "i.table", "i.key", "i.value")
    return topic_rows.unionByName(broker_rows).unionByName(other_rows).distinct()


def snapshot_from_rows(rows: list[dict[str, Any]], profile: str, config: dict[str, str]) -> Snapshot:
    """A (partial) model Snapshot from generic history rows (key/value canonical JSON)."""
    topics: dict[str, dict[str, QueueData]] = {}
    groups: dict[str, BrokerData] = {}
    filters: dict[Any, tuple[str, ...]] = {}
    order: dict[str, str] = {}
    for row in rows:
        key, value = orjson.loads(row["key"]), orjson.loads(row["value"])
        if row["table"] == "topicQueueTable":
            topics.setdefault(key[0], {})[key[1]] = QueueData(**value)
        elif row["table"] == "brokerAddrTable":
            addrs = FrozenDict({int(k): v for k, v in value["brokerAddrs"].items()})
            groups[key[0]] = BrokerData(value["cluster"], value["brokerName"], addrs, value["enableActingMaster"], value["zoneName"])
        elif row["table"] == "filterServerTable":
            filters[key[1] if key[0] is None else (key[0], key[1])] = tuple(value)
        elif row["table"] == "orderTopicConf":
            order[key[0]] = value
    return Snapshot(
        profile=profile,  # type: ignore[arg-type]
        topicQueueTable=FrozenDict({t: FrozenDict(b) for t, b in topics.items()}),
        brokerAddrTable=FrozenDict(groups),
        clusterAddrTable=FrozenDict(),
        brokerLiveTable=FrozenDict(),
        filterServerTable=FrozenDict(filters),
        orderTopicConf=FrozenDict(order),
        config=NamesrvConfig.from_mapping(config),
    )


def _captured(query: dict[str, Any]) -> Answer:
    body = None
    if query["captured_body_b64"] is not None:
        body = base64.b64decode(query["captured_body_b64"])
    elif query["captured_body"] is not None:
        body = query["captured_body"].encode("utf-8")
    return Answer(query["captured_code"], body, query["captured_remark"])


def check(queries: DataFrame, rows: DataFrame, epochs: DataFrame, run_id: str) -> DataFrame:
    """One ROUTE_FIDELITY row per query: the captured answer against the rebuilt one."""
    e = epochs.alias("e")
    q = queries.alias("q").join(e, (F.col("q.namesrv") == F.col("e.namesrv")) & (F.col("q.ts") >= F.col("e.start_ts")) & (F.col("q.ts") < F.col("e.end_ts")), "left")
    q = q.select("q.*", F.col("e.profile").alias("profile"), F.col("e.config").alias("config"))
    r = rows.select("query_id", F.struct("table", "key", "value").alias("row"))
    grouped = q.join(r, "query_id", "left")
    arrow_schema = to_arrow_schema(ROUTE_FIDELITY.schema)

    def judge(table: pa.Table) -> pa.Table:
        items = table.to_pylist()
        query = items[0]
        found = [it["row"] for it in items if it["row"] is not None]
        snapshot = snapshot_from_rows(found, query["profile"] or "rocketmq-5", dict(query["config"] or []))
        rebuilt = route_info(snapshot, query["topic"], request_version=query["request_version"] or 0)
        captured = _captured(query)
        return pa.Table.from_pylist(
            [{
                "namesrv": query["namesrv"], "ts": query["ts"], "topic": query["topic"], "request_version": query["request_version"],
                "captured_code": captured.code, "rebuilt_code": rebuilt.code, "match": same_answer(captured, rebuilt),
                "captured": None if captured.body is None else captured.body.decode("utf-8", "replace"),
                "rebuilt": None if rebuilt.body is None else rebuilt.body.decode("utf-8"), "run_id": run_id,
            }],
            schema=arrow_schema,
        )

    return grouped.groupBy("query_id").applyInArrow(judge, ROUTE_FIDELITY.schema)


def fidelity(events: DataFrame, generic: DataFrame, epochs: DataFrame, run_id: str) -> DataFrame:
    """The fidelity rows of every captured route answer in ``events``."""
    queries = route_queries(events)
    return check(queries, relevant_rows(queries, generic), epochs, run_id)


__all__ = ["fidelity", "route_queries", "relevant_rows", "snapshot_from_rows", "check"]
