"""One replay run: silver → gold route history → publish.

1. Read ``silver.events`` up to the end of the window and the register bodies.
2. Split each NameServer into replay units (:mod:`pipelines.replay.units`) and replay every unit in
   its own task (:mod:`pipelines.replay.unit_replay`), producing change rows.
3. Write the gold tables for the NameServers replayed (predicate overwrite of their partitions):
   route_changes, the typed interval tables, scan_ticks, namesrv_epochs, keyframes.
4. Append one ``gold.publish_log`` row naming the table versions just written. Readers (API, shim)
   use only the versions of the latest publish row, so a run that fails before step 4 publishes
   nothing, and a re-run of the same window publishes the same contents again.

The covered range is ``[window_from, window_to]``, by default the earliest and latest record ``ts``
of the whole capture. This run replays every record from the first one (incremental windows with
carried state build on :func:`pipelines.replay.unit_replay.replay_unit`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from pyspark import StorageLevel
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from nsreplay.config import Settings
from nsreplay.storage import CommitInfo, Warehouse
from pipelines.replay.history import epochs, epochs_frame, generic_intervals, keyframes, scan_ticks, typed_intervals, with_tick
from pipelines.replay.transforms import namesrv_origins, ranked_events, replay_units, route_changing, unit_maps, with_first_bodies, with_units
from pipelines.replay.fidelity import fidelity
from schemas.gold import GOLD_TABLES, KEYFRAMES, NAMESRV_EPOCHS, PUBLISH_LOG, ROUTE_CHANGES, ROUTE_FIDELITY, SCAN_TICKS
from schemas.silver import EVENTS, TOPIC_CONFIGS

JOB = "replay"


class NothingToReplayError(RuntimeError):
    """silver.events holds no record in the requested window."""


@dataclass(frozen=True)
class ReplayResult:
    run_id: str
    window_from: int
    window_to: int
    namesrvs: dict[str, tuple[int, int, str]]
    units: int
    changes: int
    ticks: int
    fidelity: dict[str, int]
    row_counts: dict[str, int]
    table_versions: dict[str, int]
    seconds: float

    def summary(self) -> str:
        ns = ", ".join(f"{n} ({p})" for n, (_, _, p) in sorted(self.namesrvs.items()))
        return (
            f"replay {self.run_id}: {len(self.namesrvs)} NameServers [{ns}], {self.units} replay units, "
            f"{self.ticks} scan ticks, {self.changes} changes, "
            f"{self.row_counts.get('gold.topic_queue_intervals', 0)} topic-route intervals, "
            f"{self.row_counts.get('gold.broker_addr_intervals', 0)} broker intervals; captured route answers: "
            f"{self.fidelity['matched']} match the rebuild, {self.fidelity['mismatched']} do not (gold.route_fidelity); {self.seconds:.1f} s"
        )


def run_replay(
    spark: SparkSession,
    warehouse: Warehouse,
    settings: Settings,
    run_id: str,
    *,
    window_from: int | None = None,
    window_to: int | None = None,
) -> ReplayResult:
    """Replay silver into gold and publish (see module docstring)."""
    started = time.time()
    for spec in GOLD_TABLES:
        warehouse.ensure(spec)
    replay_cfg = settings.replay
    events = warehouse.read(EVENTS)
    bounds = events.agg(F.min("ts").alias("lo"), F.max("ts").alias("hi")).first()
    if bounds is None or bounds.lo is None:
        raise NothingToReplayError("silver.events is empty: ingest a capture first")
    covered_from = window_from if window_from is not None else bounds.lo
    covered_to = window_to if window_to is not None else bounds.hi
    events = events.where(F.col("ts") <= covered_to)
    origins = namesrv_origins(events)
    if not origins:
        raise NothingToReplayError(f"no record at or before {covered_to}")

    starts: dict[str, list] = {}
    for r in events.where(F.col("kind") == "namesrv_start").select("namesrv", "ts", "rocketmq_version", "config").collect():
        starts.setdefault(r.namesrv, []).append((r.ts, r.rocketmq_version, dict(r.config or {})))
    grid = epochs(starts, origins, covered_to, replay_cfg.default_profile, replay_cfg.default_config)
    epoch_df = epochs_frame(spark, grid).persist()

    changing = ranked_events(route_changing(events))
    maps = unit_maps(changing, replay_cfg.default_profile)
    routed = with_first_bodies(with_units(spark, changing, maps), warehouse.read(TOPIC_CONFIGS))
    changes = replay_units(
        routed, origins=origins, until=covered_to, default_profile=replay_cfg.default_profile, default_config=replay_cfg.default_config
    ).persist(StorageLevel.MEMORY_AND_DISK)
    generic = generic_intervals(changes).persist(StorageLevel.MEMORY_AND_DISK)
    ticks = scan_ticks(epoch_df, changes, covered_to, run_id).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        outputs = {
            ROUTE_CHANGES.name: with_tick(changes, epoch_df, covered_to).withColumn("run_id", F.lit(run_id)),
            SCAN_TICKS.name: ticks,
            NAMESRV_EPOCHS.name: epoch_df.select(
                "namesrv", "start_ts", "end_ts", "profile", "config", "first_tick", F.col("interval").alias("tick_interval"), F.lit(run_id).alias("run_id")
            ),
            KEYFRAMES.name: keyframes(generic, ticks, replay_cfg.keyframe_every_ticks, run_id),
            ROUTE_FIDELITY.name: fidelity(events, generic, epoch_df, run_id),
            **typed_intervals(generic, run_id),
        }
        commit = CommitInfo(run_id=run_id, job=JOB, window_from=covered_from, window_to=covered_to)
        replaced = {"namesrv": sorted(origins)}
        by_name = {spec.name: spec for spec in GOLD_TABLES}
        versions: dict[str, int] = {}
        counts: dict[str, int] = {}
        for name, df in outputs.items():
            spec = by_name[name]
            frame = df.select(*spec.schema.fieldNames()).persist(StorageLevel.MEMORY_AND_DISK)
            counts[name] = frame.count()
            warehouse.overwrite(spec, frame, commit, partitions=replaced)
            versions[name] = warehouse.version(spec)
            frame.unpersist()
        coverage = {
            ns: (max(origins[ns], covered_from), covered_to, next(e.profile for e in reversed(grid) if e.namesrv == ns))
            for ns in origins
        }
        checked = warehouse.read(ROUTE_FIDELITY, version=versions[ROUTE_FIDELITY.name]).groupBy("match").count().collect()
        fidelity_counts = {("matched" if r.match else "mismatched"): r["count"] for r in checked}
        quality = {
            "changes_by_cause": {r.cause: r["count"] for r in changes.groupBy("cause").count().collect()},
            "units": sum(len(m.units()) for m in maps.values()),
            "fidelity": {"matched": fidelity_counts.get("matched", 0), "mismatched": fidelity_counts.get("mismatched", 0)},
        }
        publish = spark.createDataFrame(
            [(run_id, int(time.time() * 1000), covered_from, covered_to,
              [(ns, f, t, p) for ns, (f, t, p) in sorted(coverage.items())], versions, counts, json.dumps(quality, sort_keys=True))],
            PUBLISH_LOG.schema,
        )
        warehouse.append(PUBLISH_LOG, publish, CommitInfo(run_id=run_id, job="publish", window_from=covered_from, window_to=covered_to))
        return ReplayResult(
            run_id=run_id,
            window_from=covered_from,
            window_to=covered_to,
            namesrvs=coverage,
            units=quality["units"],
            changes=counts[ROUTE_CHANGES.name],
            ticks=counts[SCAN_TICKS.name],
            fidelity=quality["fidelity"],
            row_counts=counts,
            table_versions=versions,
            seconds=time.time() - started,
        )
    finally:
        for frame in (ticks, generic, changes, epoch_df):
            frame.unpersist()
