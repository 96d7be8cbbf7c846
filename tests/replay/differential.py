"""Differential comparison helpers: the published gold history against the reference model."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any, Iterator

from nsreplay.config import load_settings
from nsreplay.history import PublishedHistory, build_snapshot
from nsreplay.model import replay, route_info
from schemas.gold import (
    BROKER_ADDR_INTERVALS,
    BROKER_LIVE_INTERVALS,
    CLUSTER_ADDR_INTERVALS,
    FILTER_SERVER_INTERVALS,
    NAMESRV_EPOCHS,
    ORDER_TOPIC_INTERVALS,
    TOPIC_QUEUE_INTERVALS,
)

INTERVAL_SPECS = (TOPIC_QUEUE_INTERVALS, BROKER_ADDR_INTERVALS, CLUSTER_ADDR_INTERVALS, BROKER_LIVE_INTERVALS, FILTER_SERVER_INTERVALS, ORDER_TOPIC_INTERVALS)


def capture_records(root: Path) -> list[dict[str, Any]]:
    """Every valid record of the capture, read independently of the ingest (json, file, line)."""
    records = []
    for path in sorted(root.glob("*.jsonl*")):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as fh:
            for line_no, raw in enumerate(fh, start=1):
                record = json.loads(raw)
                record["_file"], record["_line"] = str(path), line_no
                records.append(record)
    return records


def same_routes(gold: Any, model: Any) -> bool:
    """The rendered GET_ROUTEINFO_BY_TOPIC answers (standard and legacy) agree for every topic."""
    for topic in set(gold.topicQueueTable) | set(model.topicQueueTable):
        for version in (121, 401):
            if route_info(gold, topic, request_version=version) != route_info(model, topic, request_version=version):
                return False
    return True


def gold_snapshots(history: PublishedHistory, namesrv: str, ticks: list[int]) -> Iterator[tuple[int, Any]]:
    """The published state at each tick, by a sweep over the interval boundaries."""
    events: list[tuple[int, int, str, int, dict[str, Any]]] = []
    for spec in INTERVAL_SPECS:
        for i, row in enumerate(history.rows(spec, namesrv)):
            events.append((row["valid_from"], 1, spec.name, i, row))
            if row["valid_to"] is not None:
                events.append((row["valid_to"], 0, spec.name, i, row))
    events.sort(key=lambda e: (e[0], e[1]))
    epochs = history.rows(NAMESRV_EPOCHS, namesrv)
    alive: dict[str, dict[int, dict[str, Any]]] = {spec.name: {} for spec in INTERVAL_SPECS}
    at = 0
    for tick in ticks:
        while at < len(events) and events[at][0] <= tick:
            _, is_start, table, i, row = events[at]
            if is_start:
                alive[table][i] = row
            else:
                alive[table].pop(i, None)
            at += 1
        rows = {name: list(rows.values()) for name, rows in alive.items()}
        rows[NAMESRV_EPOCHS.name] = epochs
        yield tick, build_snapshot(rows, tick)


def compare_every_tick(capture: Path, warehouse_root: str) -> tuple[int, int, list[str]]:
    """(ticks compared, mismatches, first differences) between the model and the published gold."""
    settings = load_settings()
    history = PublishedHistory(warehouse_root)
    covered_to = max(c.to_ts for c in history.coverage())
    oracle: dict[str, list[Any]] = {}
    for state in replay(capture_records(capture), default_profile=settings.replay.default_profile,
                        default_config=settings.replay.default_config, until=covered_to):
        oracle.setdefault(state.namesrv, []).append(state)
    assert sorted(oracle) == [c.namesrv for c in history.coverage()]
    compared, mismatches, notes = 0, 0, []
    for namesrv, states in oracle.items():
        ticks = [s.tick for s in states]
        # the published tick grids, each cut at its epoch's end (a restart within the first scan
        # interval leaves an epoch without any tick), must give exactly the model's ticks
        published_ticks = sorted(
            tick
            for r in history.rows(NAMESRV_EPOCHS, namesrv)
            for tick in range(r["first_tick"], min(r["end_ts"] - 1, covered_to) + 1, r["tick_interval"])
        )
        assert published_ticks == ticks, f"{namesrv}: published ticks {published_ticks[:3]}... model ticks {ticks[:3]}..."
        for state, (tick, gold) in zip(states, gold_snapshots(history, namesrv, ticks)):
            compared += 1
            if gold != state.snapshot or gold.config != state.snapshot.config or not same_routes(gold, state.snapshot):
                mismatches += 1
                if len(notes) < 3:
                    want, got = state.snapshot.to_plain(), gold.to_plain()
                    diff = {t: (want[t], got[t]) for t in want if want[t] != got[t]}
                    notes.append(f"{namesrv} tick {tick}: {str(diff)[:1500]}")
    return compared, mismatches, notes
