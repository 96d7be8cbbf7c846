"""The whole capture, planned but not yet rendered: world, scenario, records, files and their counts.

Contract: :func:`build_plan` is deterministic in the config. Its :class:`PlanStats` are computed from the
planned records, independently of rendering; the tests check them against what the files contain.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .brokers import Lineage
from .config import GeneratorConfig
from .junk import plan_junk
from .layout import DuplicateBatch, Shard, lay_out
from .records import CHANNEL, JUNK, REGISTER, REQUEST, START, Record, record_code, record_kind
from .responses import ResponsePlanner
from .scenario import Scenario, plan_scenario
from .simulate import simulate
from .world import World, build_world

__all__ = ["PlanStats", "CapturePlan", "build_plan"]


@dataclass
class PlanStats:
    """Counts of what the files will hold."""

    records: int = 0
    by_kind: Counter[str] = field(default_factory=Counter)
    by_code: Counter[str] = field(default_factory=Counter)
    by_channel_event: Counter[str] = field(default_factory=Counter)
    per_namesrv: dict[str, dict[str, Any]] = field(default_factory=dict)
    junk_by_reason: Counter[str] = field(default_factory=Counter)
    distinct_register_bodies: int = 0
    register_bodies_by_form: Counter[str] = field(default_factory=Counter)
    duplicate_lines: int = 0
    duplicate_batches: int = 0
    duplicate_lines_other_file: int = 0
    duplicates_by_kind: Counter[str] = field(default_factory=Counter)
    first_ts: int | None = None
    last_ts: int | None = None
    #: Client route queries answered / skipped (see :mod:`responses`), manifest form.
    responses: dict[str, Any] = field(default_factory=dict)

    @property
    def junk_lines(self) -> int:
        """Junk lines over all reasons."""
        return sum(self.junk_by_reason.values())

    @property
    def lines(self) -> int:
        """Every line of every file."""
        return self.records + self.junk_lines + self.duplicate_lines


@dataclass
class CapturePlan:
    """Everything needed to render the files."""

    config: GeneratorConfig
    world: World
    scenario: Scenario
    shards: list[Shard]
    duplicates: list[DuplicateBatch]
    stats: PlanStats

    @property
    def lineages(self) -> list[Lineage]:
        """Each group's topic-table lineage."""
        return self.scenario.lineages


def _stats(world: World, per_namesrv: list[list[Record]], duplicates: list[DuplicateBatch]) -> PlanStats:
    st = PlanStats()
    bodies: set[tuple[int, int, bool]] = set()
    for i, records in enumerate(per_namesrv):
        ns = world.namesrvs[i]
        types = Counter(rec[3] for rec in records)
        junk = [rec for rec in records if rec[3] == JUNK] if types[JUNK] else []
        valid_first = next((rec[1] for rec in records if rec[3] != JUNK), None)
        valid_last = next((rec[1] for rec in reversed(records) if rec[3] != JUNK), None)
        for rtype, count in types.items():
            if rtype == JUNK or rtype == REQUEST:
                continue
            st.by_kind[record_kind(rtype)] += count
            code = record_code(rtype, ())
            if code is not None:
                st.by_code[str(code)] += count
        requests = Counter(rec[4][0] for rec in records if rec[3] == REQUEST)
        for code, count in requests.items():
            st.by_kind["request"] += count
            st.by_code[str(code)] += count
        st.by_channel_event.update(rec[4][0] for rec in records if rec[3] == CHANNEL)
        st.junk_by_reason.update(rec[4][0] for rec in junk)
        for key in {(rec[4][2], rec[4][5], rec[4][6]) for rec in records if rec[3] == REGISTER} - bodies:
            bodies.add(key)
            st.register_bodies_by_form[world.groups[key[0]].body_form] += 1
        valid = len(records) - len(junk)
        st.per_namesrv[ns.addr] = {
            "rocketmq_version": ns.rocketmq_version,
            "records": valid,
            "junk_lines": len(junk),
            "start_records": types[START],
            "first_ts": valid_first,
            "last_ts": valid_last,
            "seq_first": records[0][2] if records else None,
            "seq_last": records[-1][2] if records else None,
        }
        st.records += valid
        if valid_first is not None and valid_last is not None:
            st.first_ts = valid_first if st.first_ts is None else min(st.first_ts, valid_first)
            st.last_ts = valid_last if st.last_ts is None else max(st.last_ts, valid_last)
    st.distinct_register_bodies = len(bodies)
    for batch in duplicates:
        st.duplicate_batches += 1
        st.duplicate_lines += len(batch.records)
        if batch.target != batch.source:
            st.duplicate_lines_other_file += len(batch.records)
        for rec in batch.records:
            st.duplicates_by_kind[record_kind(rec[3])] += 1
    return st


def build_plan(config: GeneratorConfig) -> CapturePlan:
    """Plan the capture described by ``config``."""
    world = build_world(config)
    scenario = plan_scenario(config, world)
    responder = ResponsePlanner(config, world, scenario)
    per_namesrv = simulate(config, world, scenario, extra=plan_junk(config, world), respond=responder.respond)
    shards, duplicates = lay_out(config, per_namesrv)
    stats = _stats(world, per_namesrv, duplicates)
    stats.responses = responder.stats.to_dict(config.traffic.response_fraction)
    return CapturePlan(config, world, scenario, shards, duplicates, stats)
