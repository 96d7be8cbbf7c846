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
from functools import reduce
from typing import Any

import orjson
import pyarrow as pa
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from nsreplay.model import ROUTE_TABLES, Answer, BrokerData, FrozenDict, NamesrvConfig, QueueData, Snapshot, route_info, same_answer
from nsreplay.storage.arrow_types import to_arrow_schema
from pipelines.worker import steady_archive_imports
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


def candidate_rows(queries: DataFrame, generic: DataFrame) -> DataFrame:
    """For each (namesrv, topic) some query asks about, every history row an answer about that topic
    can depend on, whenever it was valid: the topic's QueueData rows, the BrokerData rows of every
    brokerName those ever name, the NameServer's filter-server rows and the topic's order config.
    Columns: namesrv, topic, table, key, value, valid_from, valid_to. Which of them a query's answer
    depends on (those alive at its ts) is decided by :meth:`RouteRows.alive`."""
    topics = queries.select("namesrv", "topic").distinct()
    rows = generic.where(F.col("table").isin(*ROUTE_TABLES)).select(
        "namesrv", "table", "key", "value", "valid_from", "valid_to", F.from_json("key", "array<string>").alias("parts")
    )
    columns = [F.col(f"r.{c}") for c in ("namesrv", "table", "key", "value", "valid_from", "valid_to")]

    def of(table: str, to: DataFrame, match: str | None) -> DataFrame:
        """The rows of ``table`` of each NameServer of ``to`` whose first key part equals ``to``'s
        ``match`` column (``None``: all of them), each with ``to``'s topic."""
        r, t = rows.where(F.col("table") == table).alias("r"), to.alias("t")
        cond = F.col("r.namesrv") == F.col("t.namesrv")
        if match is not None:
            cond = cond & (F.col("r.parts")[0] == F.col(f"t.{match}"))
        return r.join(t, cond).select(*columns, F.col("t.topic").alias("topic"), F.col("r.parts").alias("parts"))

    topic_rows = of("topicQueueTable", topics, "topic")
    names = topic_rows.select("namesrv", "topic", F.col("parts")[1].alias("broker_name")).distinct()
    parts = [topic_rows, of("brokerAddrTable", names, "broker_name"), of("orderTopicConf", topics, "topic"), of("filterServerTable", topics, None)]
    return reduce(DataFrame.unionByName, [p.select("namesrv", "topic", "table", "key", "value", "valid_from", "valid_to") for p in parts])


class RouteRows:
    """One (namesrv, topic)'s :func:`candidate_rows`, split by table, each row with the key parts an
    answer looks it up by (its keys are parsed once, not once per query)."""

    def __init__(self, candidates: list[dict[str, Any]]) -> None:
        self.queues: list[tuple[dict[str, Any], str, str]] = []  # (row, topic, brokerName)
        self.groups: list[tuple[dict[str, Any], str]] = []  # (row, brokerName)
        self.orders: list[tuple[dict[str, Any], str]] = []  # (row, topic)
        self.filters: list[dict[str, Any]] = []
        for row in candidates:
            table = row["table"]
            if table == "filterServerTable":
                self.filters.append(row)
                continue
            key = orjson.loads(row["key"])
            if table == "topicQueueTable":
                self.queues.append((row, key[0], key[1]))
            elif table == "brokerAddrTable":
                self.groups.append((row, key[0]))
            elif table == "orderTopicConf":
                self.orders.append((row, key[0]))

    def alive(self, topic: str, ts: int) -> list[dict[str, Any]]:
        """The rows an answer about ``topic`` at ``ts`` depends on: those valid at ``ts``
        (``valid_from <= ts < valid_to``) among the topic's QueueData rows, the BrokerData rows of the
        brokerNames those name, every filter-server row and the topic's order config."""

        def valid(row: dict[str, Any]) -> bool:
            return row["valid_from"] <= ts and (row["valid_to"] is None or ts < row["valid_to"])

        queues = [(row, name) for row, t, name in self.queues if t == topic and valid(row)]
        names = {name for _, name in queues}
        groups = [row for row, name in self.groups if name in names and valid(row)]
        orders = [row for row, t in self.orders if t == topic and valid(row)]
        return [row for row, _ in queues] + groups + [row for row in self.filters if valid(row)] + orders


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


class _Judge:
    """Judges the queries of one (NameServer, topic): the rebuilt answer is a pure function of the
    profile, the config, the request version and the *set* of rows alive (:func:`route_info` orders
    what it renders), so it is rendered once per distinct input; a verdict is computed once per
    distinct (captured answer, rebuilt answer). Clients ask for the same route again and again
    while it does not change: most queries are answered from these two caches."""

    def __init__(self) -> None:
        self._rebuilt: dict[tuple[Any, ...], Answer] = {}
        self._verdicts: dict[tuple[Answer, Answer], bool] = {}

    def rebuilt(self, query: dict[str, Any], rows: list[dict[str, Any]]) -> Answer:
        profile = query["profile"] or "rocketmq-5"
        config = tuple(sorted(query["config"] or ()))
        version = query["request_version"] or 0
        key = (profile, config, version, query["topic"], frozenset((r["table"], r["key"], r["value"]) for r in rows))
        answer = self._rebuilt.get(key)
        if answer is None:
            snapshot = snapshot_from_rows(rows, profile, dict(config))
            answer = self._rebuilt[key] = route_info(snapshot, query["topic"], request_version=version)
        return answer

    def match(self, captured: Answer, rebuilt: Answer) -> bool:
        verdict = self._verdicts.get((captured, rebuilt))
        if verdict is None:
            verdict = self._verdicts[(captured, rebuilt)] = same_answer(captured, rebuilt)
        return verdict


def judge_queries(queries: list[dict[str, Any]], candidates: list[dict[str, Any]], run_id: str) -> list[dict[str, Any]]:
    """One ROUTE_FIDELITY row per query of one (namesrv, topic) (:func:`route_queries` rows with the
    epoch's ``profile`` and ``config``), given that pair's :func:`candidate_rows`."""
    judge = _Judge()
    rows = RouteRows(candidates)
    out = []
    for query in queries:
        rebuilt = judge.rebuilt(query, rows.alive(query["topic"], query["ts"]))
        captured = _captured(query)
        out.append({
            "namesrv": query["namesrv"], "ts": query["ts"], "topic": query["topic"], "request_version": query["request_version"],
            "captured_code": captured.code, "rebuilt_code": rebuilt.code, "match": judge.match(captured, rebuilt),
            "captured": None if captured.body is None else captured.body.decode("utf-8", "replace"),
            "rebuilt": None if rebuilt.body is None else rebuilt.body.decode("utf-8"), "run_id": run_id,
        })
    return out


def check(queries: DataFrame, candidates: DataFrame, epochs: DataFrame, run_id: str) -> DataFrame:
    """One ROUTE_FIDELITY row per query: the captured answer against the rebuilt one. The queries of
    one (namesrv, topic) are judged together with that pair's candidate rows (a cogroup), so no
    history row is copied once per query and Python is called once per topic, not once per query."""
    e = epochs.alias("e")
    q = queries.alias("q").join(F.broadcast(e), (F.col("q.namesrv") == F.col("e.namesrv")) & (F.col("q.ts") >= F.col("e.start_ts")) & (F.col("q.ts") < F.col("e.end_ts")), "left")
    q = q.select("q.*", F.col("e.profile").alias("profile"), F.col("e.config").alias("config"))
    arrow_schema = to_arrow_schema(ROUTE_FIDELITY.schema)

    def judge(asked: pa.Table, rows: pa.Table) -> pa.Table:
        steady_archive_imports()
        return pa.Table.from_pylist(judge_queries(asked.to_pylist(), rows.to_pylist(), run_id), schema=arrow_schema)

    return q.groupBy("namesrv", "topic").cogroup(candidates.groupBy("namesrv", "topic")).applyInArrow(judge, ROUTE_FIDELITY.schema)


def fidelity(events: DataFrame, generic: DataFrame, epochs: DataFrame, run_id: str) -> DataFrame:
    """The fidelity rows of every captured route answer in ``events``."""
    queries = route_queries(events)
    return check(queries, candidate_rows(queries, generic), epochs, run_id)


__all__ = ["RouteRows", "candidate_rows", "check", "fidelity", "judge_queries", "route_queries", "snapshot_from_rows"]
