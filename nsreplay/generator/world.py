"""The static part of the simulation: NameServers, clusters, broker groups, hosts and topic tables.

Contract: :func:`build_world` is a pure function of the config; it draws from its own seeded random
streams, so changing an unrelated knob (e.g. incident counts) does not change the world.

Addresses: NameServer ``i`` is ``10.0.0.{10+i}:9876``; member ``m`` of group ``g`` in cluster ``c``
listens on ``10.{c+1}.{g}.{11+m}:10911`` with its HA port 10912. A group is a 4.9 broker line (version
codes 395-399) or a 5.x line (475-479). System topics follow the broker's TopicConfigManager: SELF_TEST_TOPIC,
TBW102 (perm 7, 8/8), BenchmarkTest, the cluster-name and broker-name topics (perm 7), OFFSET_MOVED_EVENT,
SCHEDULE_TOPIC_XXXX (18 queues), RMQ_SYS_TRACE_TOPIC and ``<cluster>_REPLY_TOPIC``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from nsreplay.protocol.register_body import DataVersion, TopicConfig

from .config import GeneratorConfig

__all__ = ["NameServer", "Member", "BrokerGroup", "TopicSpec", "World", "build_world", "rng"]

NAMESRV_PORT = 9876
BROKER_PORT = 10911
HA_PORT = 10912

_CLUSTER_NAMES = ("DefaultCluster", "TradeCluster", "LogCluster", "RiskCluster")
_DOMAINS = ("order", "payment", "inventory", "user", "trade", "logistics", "coupon", "search", "risk",
            "notify", "audit", "billing", "member", "shop", "cart", "refund")
_EVENTS = ("created", "paid", "cancelled", "updated", "sync", "event", "changelog", "delay", "result",
           "retry", "snapshot", "callback")


def rng(seed: int, *key: object) -> random.Random:
    """An independent, deterministic random stream for ``key`` (str seeding is stable across runs)."""
    return random.Random(f"{seed}|" + "|".join(str(k) for k in key))


@dataclass(frozen=True)
class NameServer:
    """One NameServer: its address, version and start-record config."""

    index: int
    addr: str
    rocketmq_version: str
    config: dict[str, Any]
    has_initial_start_record: bool

    @property
    def is_v5(self) -> bool:
        """True for the rocketmq-5 semantics profile."""
        return not self.rocketmq_version.startswith("4.")


@dataclass(frozen=True)
class Member:
    """One broker host of a group (a process runs on it; it may restart, its id may change)."""

    group: int
    index: int
    host: str
    addr: str
    ha_addr: str
    initial_id: int


@dataclass(frozen=True)
class BrokerGroup:
    """A broker group (brokerName): its broker line, configuration and initial topic table."""

    index: int
    name: str
    cluster: str
    is_v5: bool
    version_code: int
    members: tuple[Member, ...]
    #: "json" (``body``), "raw" (``body_b64`` of the JSON bytes) or "compressed".
    body_form: str
    force_register: bool
    acting_master: bool
    heartbeat_code: int | None
    initial_topics: tuple[TopicConfig, ...]
    initial_dv: DataVersion


@dataclass(frozen=True)
class TopicSpec:
    """A business topic of the initial world and the groups it lives on."""

    config: TopicConfig
    cluster: str
    groups: tuple[int, ...]


@dataclass(frozen=True)
class World:
    """Everything static about the simulated deployment."""

    namesrvs: tuple[NameServer, ...]
    clusters: tuple[str, ...]
    groups: tuple[BrokerGroup, ...]
    topics: tuple[TopicSpec, ...]

    def member(self, group: int, index: int) -> Member:
        """Member ``index`` of group ``group``."""
        return self.groups[group].members[index]


def _namesrv_config(config: GeneratorConfig, index: int, version: str) -> dict[str, Any]:
    t = config.topology
    if version.startswith("4."):
        # 4.9 NamesrvConfig; written as strings, the way a properties file carries them.
        base: dict[str, Any] = {
            "rocketmqHome": "/opt/rocketmq",
            "kvConfigPath": "/home/rocketmq/namesrv/kvConfig.json",
            "productEnvName": "center",
            "clusterTest": "false",
            "orderMessageEnable": "false",
            "listenPort": str(NAMESRV_PORT),
            "serverChannelMaxIdleTimeSeconds": "120",
        }
    else:
        base = {
            "rocketmqHome": "/opt/rocketmq",
            "kvConfigPath": "/home/rocketmq/namesrv/kvConfig.json",
            "productEnvName": "center",
            "clusterTest": False,
            "orderMessageEnable": False,
            "scanNotActiveBrokerInterval": t.namesrv_scan_interval_ms,
            "deleteTopicWithBrokerRegistration": False,
            "supportActingMaster": False,
            "enableAllTopicList": True,
            "enableTopicList": True,
            "notifyMinBrokerIdChanged": False,
            "listenPort": NAMESRV_PORT,
            "serverChannelMaxIdleTimeSeconds": 120,
        }
    base.update(t.namesrv_config)
    base.update(t.namesrv_config_overrides.get(str(index), {}))
    return base


def _group_names(count: int) -> list[str]:
    if count <= 26:
        return [f"broker-{chr(ord('a') + i)}" for i in range(count)]
    return [f"broker-{i:03d}" for i in range(count)]


def _system_topics(cluster: str, broker_name: str) -> list[TopicConfig]:
    return [
        TopicConfig("SELF_TEST_TOPIC", 1, 1, 6),
        TopicConfig("TBW102", 8, 8, 7),
        TopicConfig("BenchmarkTest", 1024, 1024, 6),
        TopicConfig(cluster, 16, 16, 7),
        TopicConfig(broker_name, 1, 1, 7),
        TopicConfig("OFFSET_MOVED_EVENT", 1, 1, 6),
        TopicConfig("SCHEDULE_TOPIC_XXXX", 18, 18, 6),
        TopicConfig("RMQ_SYS_TRACE_TOPIC", 1, 1, 6),
        TopicConfig(f"{cluster}_REPLY_TOPIC", 1, 1, 6),
    ]


def business_topic_config(r: random.Random, name: str) -> TopicConfig:
    """A realistic queue configuration: mostly 4/8/16 queues perm 6, a few perm 4/7, a few ordered."""
    queues = r.choices((4, 8, 16, 32), weights=(3, 6, 4, 1))[0]
    read, write = queues, queues
    if r.random() < 0.03:
        write = max(1, queues // 2)  # shrinking in progress: fewer write than read queues
    perm = r.choices((6, 4, 7, 2), weights=(92, 4, 3, 1))[0]
    order = r.random() < 0.04
    return TopicConfig(name, read, write, perm, 0, order, "SINGLE_TAG")


def topic_name(r: random.Random, serial: int) -> str:
    """A plausible business topic name, unique through ``serial``."""
    style = r.random()
    domain, event = r.choice(_DOMAINS), r.choice(_EVENTS)
    if style < 0.5:
        return f"{domain}-{event}-{serial:04d}"
    if style < 0.8:
        return f"TOPIC_{domain.upper()}_{event.upper()}_{serial:04d}"
    return f"{domain}.{event}.v{serial % 3 + 1}.{serial:04d}"


def build_world(config: GeneratorConfig) -> World:
    """Build the NameServers, groups and initial topic tables described by ``config``."""
    t = config.topology
    seed = config.seed
    namesrvs = []
    for i in range(t.namesrvs):
        version = t.namesrv_versions[i % len(t.namesrv_versions)]
        namesrvs.append(
            NameServer(
                index=i,
                addr=f"10.0.0.{10 + i}:{NAMESRV_PORT}",
                rocketmq_version=version,
                config=_namesrv_config(config, i, version),
                has_initial_start_record=i < t.namesrvs - t.namesrvs_without_start_record,
            )
        )

    clusters = tuple(
        _CLUSTER_NAMES[c] if c < len(_CLUSTER_NAMES) else f"Cluster{c + 1}" for c in range(t.clusters)
    )
    names = _group_names(t.groups)
    r = rng(seed, "groups")
    v5_count = round(t.groups * t.v5_group_fraction)
    if t.groups >= 2 and 0 < t.v5_group_fraction < 1:
        v5_count = min(max(v5_count, 1), t.groups - 1)
    is_v5 = [False] * (t.groups - v5_count) + [True] * v5_count
    r.shuffle(is_v5)
    v49_groups = [g for g in range(t.groups) if not is_v5[g]]
    v5_groups = [g for g in range(t.groups) if is_v5[g]]
    acting = set(v5_groups[: t.acting_master_groups])
    force_false = set(v49_groups[: t.force_register_false_groups])
    # Body forms: pick compressed and raw groups from the end of a shuffled order (mixing both lines).
    order = list(range(t.groups))
    r.shuffle(order)
    compressed = set(order[: t.compressed_body_groups])
    raw = set(order[t.compressed_body_groups : t.compressed_body_groups + t.raw_body_groups])

    cluster_of = [clusters[g * t.clusters // t.groups] for g in range(t.groups)]

    # Business topics: each on groups_per_topic groups of one cluster.
    tr = rng(seed, "topics")
    per_group: dict[int, list[TopicConfig]] = {g: [] for g in range(t.groups)}
    topics: list[TopicSpec] = []
    used_names: set[str] = set()
    for serial in range(t.topics):
        name = topic_name(tr, serial)
        while name in used_names:
            name = topic_name(tr, serial + 10_000)
        used_names.add(name)
        cluster = clusters[serial % len(clusters)]
        candidates = [g for g in range(t.groups) if cluster_of[g] == cluster]
        chosen = tuple(sorted(tr.sample(candidates, min(t.groups_per_topic, len(candidates)))))
        cfg = business_topic_config(tr, name)
        topics.append(TopicSpec(cfg, cluster, chosen))
        for g in chosen:
            per_group[g].append(cfg)

    groups = []
    heartbeat_codes = t.heartbeat_codes or (322,)
    acting_sorted = sorted(acting)
    for g in range(t.groups):
        gr = rng(seed, "group", g)
        cluster = cluster_of[g]
        c_index = clusters.index(cluster)
        slaves = t.slaves_per_group + (1 if g < t.groups_with_extra_slave else 0)
        members = tuple(
            Member(
                group=g,
                index=m,
                host=f"10.{c_index + 1}.{g}.{11 + m}",
                addr=f"10.{c_index + 1}.{g}.{11 + m}:{BROKER_PORT}",
                ha_addr=f"10.{c_index + 1}.{g}.{11 + m}:{HA_PORT}",
                initial_id=m,
            )
            for m in range(1 + slaves)
        )
        v5 = is_v5[g]
        version_code = gr.randint(475, 479) if v5 else gr.randint(395, 399)
        tables = _system_topics(cluster, names[g]) + sorted(per_group[g], key=lambda c: c.topic_name)
        tables += [TopicConfig(f"%RETRY%GID_{cluster}_consumer_{k}", 1, 1, 6)
                   for k in range(t.retry_topics_per_group)]
        dv = DataVersion(
            state_version=0,
            timestamp=config.timing.start_ms - gr.randint(3_600_000, 30 * 86_400_000),
            counter=gr.randint(len(tables), len(tables) + 2000),
        )
        form = "compressed" if g in compressed else "raw" if g in raw else "json"
        groups.append(
            BrokerGroup(
                index=g,
                name=names[g],
                cluster=cluster,
                is_v5=v5,
                version_code=version_code,
                members=members,
                body_form=form,
                force_register=g not in force_false,
                acting_master=g in acting,
                heartbeat_code=heartbeat_codes[acting_sorted.index(g) % len(heartbeat_codes)] if g in acting else None,
                initial_topics=tuple(tables),
                initial_dv=dv,
            )
        )
    return World(tuple(namesrvs), clusters, tuple(groups), tuple(topics))
