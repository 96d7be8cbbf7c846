"""From change rows to the stored history: tick epochs, validity intervals, typed tables, keyframes.

Pure DataFrame → DataFrame functions plus :func:`epochs`, which derives each NameServer's tick grid
from its (small) list of start records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from nsreplay.model import NameServer, profile_for_version
from nsreplay.runtime import local_frame
from schemas.gold import (
    BROKER_ADDR_INTERVALS,
    BROKER_LIVE_INTERVALS,
    CLUSTER_ADDR_INTERVALS,
    FILTER_SERVER_INTERVALS,
    ORDER_TOPIC_INTERVALS,
    TOPIC_QUEUE_INTERVALS,
)


@dataclass(frozen=True)
class Epoch:
    """One run of a NameServer between (re)starts: its tick grid ``first_tick + k * interval``."""

    namesrv: str
    start_ts: int
    end_ts: int  # exclusive: the next restart, or the end of the covered range + 1
    profile: str
    config: Mapping[str, str]
    first_tick: int
    interval: int


def epochs(starts: Mapping[str, list[tuple[int, str, Mapping[str, object]]]], origins: Mapping[str, int], until: int | Mapping[str, int],
           defaults: Mapping[str, tuple[str, Mapping[str, object]]]) -> list[Epoch]:
    """Tick epochs of every NameServer. ``starts``: per NameServer, its (ts, rocketmq_version, config)
    start records in order; without one at its first record, its ``defaults`` (profile, config) run
    from its origin. ``until``: the end of the covered range (one for all, or per NameServer); the
    last epoch ends just after it."""
    out: list[Epoch] = []
    for namesrv, origin in origins.items():
        end_of_range = until if isinstance(until, int) else until[namesrv]
        runs_until = [s for s in starts.get(namesrv, []) if s[0] <= end_of_range]
        runs = [(ts, profile_for_version(v), c) for ts, v, c in sorted(runs_until, key=lambda s: s[0])]
        if not runs or runs[0][0] > origin:
            runs.insert(0, (origin, *defaults[namesrv]))
        for i, (ts, profile, config) in enumerate(runs):
            end = runs[i + 1][0] if i + 1 < len(runs) else end_of_range + 1
            grid = NameServer(profile, config, ts)
            text = {str(k): v if isinstance(v, str) else str(v).lower() if isinstance(v, bool) else str(v) for k, v in (config or {}).items()}
            out.append(Epoch(namesrv, ts, end, profile, text, grid.first_tick, grid.tick_interval))
    return out


def epochs_frame(spark: SparkSession, items: Iterable[Epoch]) -> DataFrame:
    return local_frame(
        spark,
        [(e.namesrv, e.start_ts, e.end_ts, e.profile, dict(e.config), e.first_tick, e.interval) for e in items],
        "namesrv string, start_ts long, end_ts long, profile string, config map<string,string>, first_tick long, interval long",
    )


def _first_tick_after(after: int | None) -> Column:
    """The first tick of each epoch's grid that is later than ``after`` (the epoch's first tick if None)."""
    if after is None:
        return F.col("first_tick")
    steps = F.greatest(F.lit(0), F.floor((F.lit(after) - F.col("first_tick")) / F.col("interval")) + 1).cast("long")
    return F.col("first_tick") + steps * F.col("interval")


def scan_ticks(epoch_df: DataFrame, changes: DataFrame, until: int, run_id: str, *, after: int | None = None) -> DataFrame:
    """Every tick of every epoch in ``(after, until]``, with the number of live entries its scan removed."""
    last = F.least(F.col("end_ts") - 1, F.lit(until))
    first = _first_tick_after(after)
    ticks = epoch_df.where(first <= last).select(
        "namesrv",
        F.col("start_ts").alias("epoch_start_ts"),
        "profile",
        F.explode(F.sequence(first, last, F.col("interval"))).alias("tick_ts"),
    )
    removals = (
        changes.where((F.col("phase") == 1) & (F.col("table") == "brokerLiveTable") & (F.col("op") == "remove"))
        .groupBy("namesrv", F.col("ts").alias("tick_ts"))
        .agg(F.count("*").cast("int").alias("removals"))
    )
    return (
        ticks.join(removals, ["namesrv", "tick_ts"], "left")
        .select("namesrv", "tick_ts", "epoch_start_ts", "profile", F.coalesce("removals", F.lit(0)).alias("removals"), F.lit(run_id).alias("run_id"))
    )


def with_tick(changes: DataFrame, epoch_df: DataFrame, restarts: DataFrame) -> DataFrame:
    """``tick_ts``: the first scan tick whose state shows the change: the first tick at or after it
    on its epoch's grid (the tick itself for expiries), or null when the NameServer restarts first.
    A record processed before a restart of the same ``ts`` (another start record included) belongs
    to an epoch that ends at that ``ts``: null. ``restarts``: (namesrv, ts, restart_rank), the
    ``record_rank`` of the last start record of each such ts
    (:func:`~pipelines.replay.transforms.restart_ranks`).
    It depends on the start records up to that tick only, not on where the covered range ends; a
    window ending before a start that cancels the tick is corrected by the next (:func:`cancelled_ticks`)."""
    last_start = Window.partitionBy("namesrv")
    e = epoch_df.withColumn("_open", F.col("start_ts") == F.max("start_ts").over(last_start)).alias("e")
    ranked = changes.join(F.broadcast(restarts), ["namesrv", "ts"], "left")
    # epochs are a few rows a NameServer: broadcast, or the range join puts a NameServer's changes on one task
    joined = ranked.alias("c").join(F.broadcast(e), (F.col("c.namesrv") == F.col("e.namesrv")) & (F.col("c.ts") >= F.col("e.start_ts")) & (F.col("c.ts") < F.col("e.end_ts")), "left")
    steps = F.greatest(F.lit(0), F.ceil((F.col("c.ts") - F.col("e.first_tick")) / F.col("e.interval")))
    tick = F.col("e.first_tick") + steps.cast("long") * F.col("e.interval")
    before_restart = F.coalesce((F.col("c.phase") == 0) & (F.col("c.record_rank") < F.col("c.restart_rank")), F.lit(False))
    tick = F.when(~before_restart & (F.col("e._open") | (tick < F.col("e.end_ts"))), tick)
    return joined.select(*[F.col(f"c.{name}") for name in changes.columns], tick.cast("long").alias("tick_ts"))


def cancelled_ticks(grid: Iterable[Epoch], after: int) -> dict[str, tuple[int, int]]:
    """The NameServers whose epoch running at ``after`` ends, at a start record, no later than its
    first tick after ``after``: namesrv -> (lo, restart ts). A window ending at ``after`` saw no such
    start and gave its change rows of ``(lo, after]`` that tick; :func:`with_tick` says null (the
    NameServer restarts first), which :func:`cancel_ticks` applies. Every other row's tick stands."""
    by_namesrv: dict[str, list[Epoch]] = {}
    for e in grid:
        by_namesrv.setdefault(e.namesrv, []).append(e)
    out: dict[str, tuple[int, int]] = {}
    for namesrv, runs in by_namesrv.items():
        runs.sort(key=lambda e: (e.start_ts, e.end_ts))
        for i, e in enumerate(runs[:-1]):  # an epoch followed by another ends at a start record
            if e.start_ts <= after < e.end_ts:
                steps = max(0, (after - e.first_tick) // e.interval + 1)
                tick = e.first_tick + steps * e.interval  # the first tick after `after`
                if e.end_ts <= tick:
                    # rows since the last tick before `after`, or since the epoch's start if none ran
                    out[namesrv] = (e.start_ts - 1 if tick == e.first_tick else tick - e.interval, e.end_ts)
    return out


def cancel_ticks(changes: DataFrame, cancelled: Mapping[str, tuple[int, int]]) -> DataFrame:
    """``changes`` with ``tick_ts`` null where :func:`cancelled_ticks` says the NameServer restarts at
    or before it (rows of the epoch before that restart only: a row's tick is never earlier than it)."""
    cancel = F.lit(False)
    for namesrv, (_, restart) in sorted(cancelled.items()):
        cancel = cancel | ((F.col("namesrv") == namesrv) & (F.col("ts") < restart) & (F.col("tick_ts") >= restart))
    return changes.withColumn("tick_ts", F.when(cancel, F.lit(None).cast("long")).otherwise(F.col("tick_ts")))


def generic_intervals(changes: DataFrame) -> DataFrame:
    """(namesrv, table, key, value, valid_from, valid_to, start_cause, end_cause) for every put that
    lasted a non-zero time; ``valid_to`` null while still valid at the end of the covered range."""
    w = Window.partitionBy("namesrv", "table", "key").orderBy("ts", "phase", "record_rank")
    nxt = changes.withColumn("valid_to", F.lead("ts").over(w)).withColumn("end_cause", F.lead("cause").over(w))
    return nxt.where((F.col("op") == "put") & (F.col("valid_to").isNull() | (F.col("valid_to") > F.col("ts")))).select(
        "namesrv", "table", "key", F.col("after").alias("value"), F.col("ts").alias("valid_from"), "valid_to",
        F.col("cause").alias("start_cause"), "end_cause",
    )


_INTERVAL_COLS = ["valid_from", "valid_to", "start_cause", "end_cause", "run_id"]

_QUEUE_DATA = "struct<readQueueNums:int,writeQueueNums:int,perm:int,topicSysFlag:int>"
_BROKER_DATA = "struct<cluster:string,brokerAddrs:map<string,string>,enableActingMaster:boolean,zoneName:string>"
_LIVE_INFO = (
    "struct<lastUpdateTimestamp:long,heartbeatTimeoutMillis:long,dataVersion:struct<stateVersion:long,timestamp:long,counter:long>,"
    "conn:string,haServerAddr:string>"
)


def typed_intervals(generic: DataFrame, run_id: str) -> dict[str, DataFrame]:
    """The generic intervals split into the typed gold interval tables."""
    g = generic.withColumn("run_id", F.lit(run_id))

    def of(table: str, value_type: str | None = None) -> DataFrame:
        """The table's intervals with the key parsed once (``_k``) and, given its type, the value (``_v``):
        a separate projection, so each field below reads the parsed column instead of parsing again."""
        rows = g.where(F.col("table") == table).withColumn("_k", F.from_json("key", "array<string>"))
        return rows.withColumn("_v", F.from_json("value", value_type)) if value_type else rows

    k, v = F.col("_k"), F.col("_v")
    return {
        TOPIC_QUEUE_INTERVALS.name: of("topicQueueTable", _QUEUE_DATA).select(
            "namesrv", k[0].alias("topic"), k[1].alias("broker_name"),
            v.readQueueNums.alias("read_queue_nums"), v.writeQueueNums.alias("write_queue_nums"),
            v.perm.alias("perm"), v.topicSysFlag.alias("topic_sys_flag"), *_INTERVAL_COLS,
        ),
        BROKER_ADDR_INTERVALS.name: of("brokerAddrTable", _BROKER_DATA).select(
            "namesrv", k[0].alias("broker_name"), v.cluster.alias("cluster"),
            F.transform_keys(v.brokerAddrs, lambda key, _: key.cast("long")).alias("broker_addrs"),
            v.enableActingMaster.alias("enable_acting_master"), v.zoneName.alias("zone_name"), *_INTERVAL_COLS,
        ),
        CLUSTER_ADDR_INTERVALS.name: of("clusterAddrTable").select("namesrv", k[0].alias("cluster"), k[1].alias("broker_name"), *_INTERVAL_COLS),
        BROKER_LIVE_INTERVALS.name: of("brokerLiveTable", _LIVE_INFO).select(
            "namesrv", k[0].alias("cluster"), k[1].alias("broker_addr"),
            v.lastUpdateTimestamp.alias("last_update_ts"), v.heartbeatTimeoutMillis.alias("heartbeat_timeout_ms"),
            v.dataVersion.stateVersion.alias("dv_state_version"), v.dataVersion.timestamp.alias("dv_timestamp"),
            v.dataVersion.counter.alias("dv_counter"), v.conn.alias("conn"), v.haServerAddr.alias("ha_server_addr"), *_INTERVAL_COLS,
        ),
        FILTER_SERVER_INTERVALS.name: of("filterServerTable").select(
            "namesrv", k[0].alias("cluster"), k[1].alias("broker_addr"),
            F.from_json("value", "array<string>").alias("filter_servers"), *_INTERVAL_COLS,
        ),
        ORDER_TOPIC_INTERVALS.name: of("orderTopicConf").select(
            "namesrv", k[0].alias("topic"),
            F.get_json_object(F.concat(F.lit('{"v":'), F.col("value"), F.lit("}")), "$.v").alias("order_conf"), *_INTERVAL_COLS,
        ),
    }


def keyframes(generic: DataFrame, ticks: DataFrame, epoch_df: DataFrame, every_ticks: int, run_id: str) -> DataFrame:
    """Full snapshots at every ``every_ticks``-th tick of each epoch's grid (its first tick included),
    for the ticks in ``ticks``; ``generic`` must hold every interval alive at those ticks."""
    grid = epoch_df.select("namesrv", F.col("start_ts").alias("epoch_start_ts"), "end_ts", "first_tick", "interval")
    index = ((F.col("tick_ts") - F.col("first_tick")) / F.col("interval")).cast("long")
    # an epoch is its start and its end: of two starts at one ts, the first runs no tick (end == start)
    frames = ticks.join(F.broadcast(grid), ["namesrv", "epoch_start_ts"]).where((F.col("tick_ts") < F.col("end_ts")) & (index % every_ticks == 0)).select(
        "namesrv", F.col("tick_ts").alias("keyframe_ts"))
    i = generic.alias("i")
    k = frames.alias("k")
    alive = (F.col("i.namesrv") == F.col("k.namesrv")) & (F.col("i.valid_from") <= F.col("k.keyframe_ts")) & (
        F.col("i.valid_to").isNull() | (F.col("k.keyframe_ts") < F.col("i.valid_to"))
    )
    # a keyframe every `every_ticks` ticks: few instants, broadcast so that the range join is not one task a NameServer
    return i.join(F.broadcast(k), alive).select("i.namesrv", "k.keyframe_ts", "i.table", "i.key", "i.value", F.lit(run_id).alias("run_id"))
