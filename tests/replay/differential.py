"""Differential comparison helpers: the published gold history against the reference model."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any, Iterator

from nsreplay.config import load_settings
from nsreplay.history import PublishedHistory, build_snapshot
from nsreplay.model import ROUTE_TABLES, replay, route_info
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


# The interval tables of render.ROUTE_TABLES: what a route answer is made of, with the profile and config.
ROUTE_SPECS = frozenset({TOPIC_QUEUE_INTERVALS.name, BROKER_ADDR_INTERVALS.name, FILTER_SERVER_INTERVALS.name, ORDER_TOPIC_INTERVALS.name})


def gold_snapshots(history: PublishedHistory, namesrv: str, ticks: list[int]) -> Iterator[tuple[int, Any, frozenset[str]]]:
    """(tick, the published state at the tick, the interval tables whose alive rows changed since the
    previous tick), by a sweep over the interval boundaries."""
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
        touched: set[str] = set()
        while at < len(events) and events[at][0] <= tick:
            _, is_start, table, i, row = events[at]
            touched.add(table)
            if is_start:
                alive[table][i] = row
            else:
                alive[table].pop(i, None)
            at += 1
        rows = {name: list(rows.values()) for name, rows in alive.items()}
        rows[NAMESRV_EPOCHS.name] = epochs
        yield tick, build_snapshot(rows, tick), frozenset(touched)


def _same_setup(now: Any, before: Any) -> bool:
    return before is not None and now.profile == before.profile and now.config == before.config


def model_routes_unchanged(now: Any, before: Any) -> bool:
    """Every route answer of model snapshot ``now`` is the one of ``before``: same profile and config,
    and the very same route table objects (the model hands out a new one for any table it touched)."""
    return _same_setup(now, before) and all(getattr(now, t) is getattr(before, t) for t in ROUTE_TABLES)


def gold_routes_unchanged(now: Any, before: Any, touched: frozenset[str]) -> bool:
    """Every route answer of published snapshot ``now`` is the one of ``before``: same profile and
    config, and no interval of a route table began or ended in between (``touched``)."""
    return _same_setup(now, before) and not touched & ROUTE_SPECS


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
        previous_gold = previous_model = None
        routes_agreed = False
        for state, (tick, gold, touched) in zip(states, gold_snapshots(history, namesrv, ticks)):
            compared += 1
            # Rendering every topic's answer on both sides at every tick is the bulk of the cost; an
            # answer is a pure function of its inputs, so when neither side's inputs changed since a
            # tick whose answers agreed, they still agree.
            unchanged = routes_agreed and gold_routes_unchanged(gold, previous_gold, touched) and model_routes_unchanged(state.snapshot, previous_model)
            routes_agreed = unchanged or same_routes(gold, state.snapshot)
            previous_gold, previous_model = gold, state.snapshot
            if gold != state.snapshot or gold.config != state.snapshot.config or not routes_agreed:
                mismatches += 1
                if len(notes) < 3:
                    want, got = state.snapshot.to_plain(), gold.to_plain()
                    diff = {t: (want[t], got[t]) for t in want if want[t] != got[t]}
                    notes.append(f"{namesrv} tick {tick}: {str(diff)[:1500]}")
    return compared, mismatches, notes
