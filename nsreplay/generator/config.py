"""Typed configuration of the capture generator, the named presets and ``--set`` overrides.

Contract:

* A :class:`GeneratorConfig` fully determines the output: the same config (including ``seed``) always
  produces byte-identical files, whatever the number of worker processes.
* Every knob is a field of one of the section dataclasses below and can be overridden by
  :func:`apply_overrides` with a dotted name (``incidents.crashes``) or, when unambiguous, the bare field
  name (``crashes``). Values are parsed from text (JSON first, then plain text) and coerced to the
  field's type; a bad name or value raises :class:`ConfigError`.
* Incident counts are *per generated window* (they do not scale with ``timing.hours``); an incident that
  cannot be placed (window too short, no free broker group) is skipped, and the manifest lists what was
  actually planned.
"""

from __future__ import annotations

import dataclasses
import json
import math
import typing
from dataclasses import dataclass, field, fields, replace
from typing import Any, Mapping

__all__ = [
    "ConfigError",
    "TopologyConfig",
    "TimingConfig",
    "IncidentConfig",
    "TrafficConfig",
    "JunkConfig",
    "OutputConfig",
    "GeneratorConfig",
    "PRESETS",
    "JUNK_REASONS",
    "preset",
    "apply_overrides",
    "validate",
    "config_to_dict",
    "knob_names",
]

#: Reason codes of the ingest's quarantine, one injected junk line is exactly one of these.
JUNK_REASONS: tuple[str, ...] = (
    "invalid_json",
    "not_an_object",
    "invalid_utf8",
    "missing_field",
    "wrong_type",
    "unknown_kind",
    "unknown_code",
    "unknown_channel_event",
    "undecodable_body",
    "crc_mismatch",
)

DEFAULT_START_MS = 1732147200000  # 2024-11-21T00:00:00Z


class ConfigError(ValueError):
    """A knob name or value that the generator cannot accept."""


@dataclass(frozen=True)
class TopologyConfig:
    """The simulated NameServers, clusters, broker groups and topic tables."""

    namesrvs: int = 2
    #: RocketMQ version of each NameServer, cycled ("4.9.4" -> rocketmq-4.9 profile, "5.x" -> rocketmq-5).
    namesrv_versions: tuple[str, ...] = ("4.9.4", "5.3.3")
    #: The last N NameServers have no namesrv_start record for their initial start (restarts still do).
    namesrvs_without_start_record: int = 0
    #: 5.x scanNotActiveBrokerInterval written in the start record's config.
    namesrv_scan_interval_ms: int = 5000
    #: Extra settings for every NameServer's start-record config (native JSON values).
    namesrv_config: Mapping[str, Any] = field(default_factory=dict)
    #: Per-NameServer extra settings: {"<index>": {"supportActingMaster": true}}.
    namesrv_config_overrides: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    clusters: int = 1
    groups: int = 3
    slaves_per_group: int = 1
    #: The first N groups get one more slave than ``slaves_per_group``.
    groups_with_extra_slave: int = 0
    #: Share of broker groups running RocketMQ 5.x (the rest run 4.9.x); at least one of each when
    #: there are two or more groups and the fraction is strictly between 0 and 1.
    v5_group_fraction: float = 0.5
    #: Business topics at the start of the window, each placed on ``groups_per_topic`` groups of a cluster.
    topics: int = 20
    groups_per_topic: int = 2
    #: %RETRY%<group> topics per broker group (consumer groups that consumed from it).
    retry_topics_per_group: int = 2
    #: 5.x groups with enableSlaveActingMaster=true (they send heartbeatTimeoutMillis and heartbeats).
    acting_master_groups: int = 0
    #: brokerHeartbeatInterval of acting-master groups.
    heartbeat_interval_ms: int = 1000
    #: Heartbeat request code of the acting-master groups, cycled: 322 (compatibleWithOldNameSrv) or 904.
    heartbeat_codes: tuple[int, ...] = (322, 904)
    #: brokerNotActiveTimeoutMillis, sent as heartbeatTimeoutMillis by acting-master groups.
    broker_not_active_timeout_ms: int = 10000
    #: Send heartbeatTimeoutMillis from every 5.x broker (real brokers send it only with acting master).
    v5_always_send_heartbeat_timeout: bool = False
    #: 4.9 groups with forceRegister=false (QUERY_DATA_VERSION each period, register only on change).
    force_register_false_groups: int = 0
    #: Groups whose captured REGISTER_BROKER carries ``body_b64`` (raw JSON bytes) instead of ``body``.
    raw_body_groups: int = 0
    #: Groups with compressedRegister=true (compressed="true", ``body_b64`` of the zlib form).
    compressed_body_groups: int = 0
    #: Put the real CRC32 in bodyCrc32 also for ``body`` (JSON) records; False writes "0" there.
    crc_in_json_body: bool = True


@dataclass(frozen=True)
class TimingConfig:
    """The window and the periodic behaviour of brokers and clients."""

    start_ms: int = DEFAULT_START_MS
    hours: float = 20 / 60
    #: registerNameServerPeriod (the effective period is max(10 s, min(this, 60 s)), spec §9).
    register_period_ms: int = 30000
    first_register_delay_ms: int = 10000
    client_poll_ms: int = 30000
    #: Per-round scheduling jitter of a broker, uniform in [0, jitter_ms].
    jitter_ms: int = 40
    gc_pause_probability: float = 0.01
    gc_pause_max_ms: int = 1500
    #: One-way network delay broker -> NameServer, per (host, NameServer), uniform in this range.
    net_delay_ms: tuple[int, int] = (1, 6)
    #: NameServer channel idle timeout (serverChannelMaxIdleTimeSeconds = 120).
    idle_timeout_ms: int = 120000
    #: Broker start-up stagger after the window start: masters, then slaves.
    master_start_s: tuple[int, int] = (3, 15)
    slave_start_s: tuple[int, int] = (15, 30)


@dataclass(frozen=True)
class IncidentConfig:
    """How many planned incidents of each kind, and their shapes."""

    crashes: int = 1
    graceful_shutdowns: int = 1
    promotions: int = 1
    #: Probability that the old master of a promotion comes back (as a slave, id 1).
    promotion_old_master_returns: float = 1.0
    namesrv_restarts: int = 1
    partitions: int = 1
    topic_creates: int = 1
    topic_updates: int = 1
    topic_deletes: int = 1
    #: WIPE_WRITE_PERM_OF_BROKER followed later by ADD_WRITE_PERM_OF_BROKER (pairs).
    perm_wipes: int = 1
    kv_puts: int = 1
    kv_deletes: int = 0
    crash_downtime_s: tuple[int, int] = (60, 180)
    shutdown_downtime_s: tuple[int, int] = (30, 120)
    promotion_delay_s: tuple[int, int] = (20, 60)
    namesrv_downtime_s: tuple[int, int] = (5, 30)
    partition_s: tuple[int, int] = (150, 240)
    perm_wipe_s: tuple[int, int] = (60, 300)
    #: Relative weights of what the NameServers see after a crash: CLOSE shortly after, EXCEPTION then
    #: CLOSE, IDLE then CLOSE 120 s after the last traffic, or nothing at all (expiry only).
    crash_outcomes: Mapping[str, float] = field(
        default_factory=lambda: {"close": 0.45, "exception": 0.2, "idle": 0.15, "silent": 0.2}
    )


@dataclass(frozen=True)
class TrafficConfig:
    """Read-only traffic from clients and consoles."""

    clients: int = 2
    topics_per_client: int = 3
    #: Client version codes and weights: 121 (Node ali-ons), 63 (C++), Java 401+.
    client_versions: Mapping[str, float] = field(
        default_factory=lambda: {"121": 1.0, "63": 1.0, "401": 1.0, "413": 1.0, "475": 1.0}
    )
    #: Share of client route queries that ask for a topic that does not exist.
    unknown_topic_query_fraction: float = 0.02
    #: Consoles polling GET_BROKER_CLUSTER_INFO (106) and GET_ALL_TOPIC_LIST (206).
    dashboards: int = 1
    dashboard_poll_ms: int = 60000
    #: Share of the *answerable* client route queries (105) that get a ground-truth ``response`` record
    #: (see :mod:`nsreplay.generator.responses` for which queries are answerable).
    response_fraction: float = 1.0


@dataclass(frozen=True)
class JunkConfig:
    """Bad lines and at-least-once duplicates."""

    #: Junk lines per reason (every reason in JUNK_REASONS), unless ``per_reason`` names it.
    lines_per_reason: int = 0
    per_reason: Mapping[str, int] = field(default_factory=dict)
    #: Batches of consecutive valid lines shipped twice.
    duplicate_batches: int = 0
    duplicate_batch_lines: tuple[int, int] = (1, 20)
    #: Share of duplicate batches written into another file than the original.
    duplicate_other_file_fraction: float = 0.75


@dataclass(frozen=True)
class OutputConfig:
    """How records are laid out in files."""

    #: Number of time slices; each slice is one file ("mixed") or one file per NameServer.
    shards: int = 3
    #: "mixed": all NameServers in one file per slice; "per_namesrv": one file per NameServer per slice.
    layout: str = "mixed"
    compress: bool = True
    #: zlib level of the streamed (small) lines.
    gzip_level: int = 1
    #: zlib level of each distinct REGISTER_BROKER tail, deflated once and spliced into every line.
    body_gzip_level: int = 6
    #: Register tails at least this long are spliced pre-deflated; shorter ones are streamed (they fit in
    #: zlib's 32 KB window and compress better against the previous lines).
    splice_min_bytes: int = 16384
    #: Files are cut in blocks of this many lines that are written in a shuffled order (0: time order).
    shuffle_block_lines: int = 25
    #: Uncompressed bytes buffered before each write.
    chunk_bytes: int = 4 << 20
    file_prefix: str = "capture"


@dataclass(frozen=True)
class GeneratorConfig:
    """Everything the generator needs; see the section classes for the knobs."""

    preset: str = "custom"
    seed: int = 1
    topology: TopologyConfig = field(default_factory=TopologyConfig)
    timing: TimingConfig = field(default_factory=TimingConfig)
    incidents: IncidentConfig = field(default_factory=IncidentConfig)
    traffic: TrafficConfig = field(default_factory=TrafficConfig)
    junk: JunkConfig = field(default_factory=JunkConfig)
    output: OutputConfig = field(default_factory=OutputConfig)

    @property
    def end_ms(self) -> int:
        """Exclusive end of the window."""
        return self.timing.start_ms + int(round(self.timing.hours * 3_600_000))

    def junk_count(self, reason: str) -> int:
        """How many junk lines of ``reason`` to inject."""
        return int(self.junk.per_reason.get(reason, self.junk.lines_per_reason))


_SECTIONS = ("topology", "timing", "incidents", "traffic", "junk", "output")


def _tiny() -> GeneratorConfig:
    return GeneratorConfig(
        preset="tiny",
        seed=7,
        topology=TopologyConfig(
            namesrvs=2,
            namesrv_versions=("4.9.4", "5.3.3"),
            groups=3,
            slaves_per_group=1,
            topics=20,
            groups_per_topic=2,
            retry_topics_per_group=1,
            acting_master_groups=1,
            heartbeat_interval_ms=5000,
            heartbeat_codes=(904,),
            force_register_false_groups=1,
            raw_body_groups=1,
            compressed_body_groups=1,
        ),
        timing=TimingConfig(hours=20 / 60),
        incidents=IncidentConfig(
            crashes=1,
            graceful_shutdowns=1,
            promotions=1,
            namesrv_restarts=1,
            partitions=1,
            topic_creates=1,
            topic_updates=1,
            topic_deletes=1,
            perm_wipes=1,
            kv_puts=1,
            kv_deletes=1,
            crash_downtime_s=(40, 90),
            shutdown_downtime_s=(20, 60),
            promotion_delay_s=(15, 30),
            partition_s=(150, 200),
            perm_wipe_s=(60, 120),
        ),
        traffic=TrafficConfig(clients=2, topics_per_client=2, dashboards=1, dashboard_poll_ms=120000),
        junk=JunkConfig(lines_per_reason=1, duplicate_batches=3, duplicate_batch_lines=(1, 5)),
        output=OutputConfig(shards=3, shuffle_block_lines=10),
    )


def _demo() -> GeneratorConfig:
    return GeneratorConfig(
        preset="demo",
        seed=20241121,
        topology=TopologyConfig(
            namesrvs=3,
            namesrv_versions=("4.9.4", "5.3.3", "5.3.3"),
            namesrvs_without_start_record=1,
            namesrv_config_overrides={"1": {"supportActingMaster": True}},
            clusters=2,
            groups=6,
            slaves_per_group=1,
            groups_with_extra_slave=1,
            topics=60,
            groups_per_topic=2,
            retry_topics_per_group=2,
            acting_master_groups=2,
            heartbeat_interval_ms=5000,
            heartbeat_codes=(322, 904),
            force_register_false_groups=1,
            raw_body_groups=1,
            compressed_body_groups=2,
        ),
        timing=TimingConfig(hours=2.0),
        incidents=IncidentConfig(
            crashes=3,
            graceful_shutdowns=2,
            promotions=2,
            namesrv_restarts=1,
            partitions=2,
            topic_creates=3,
            topic_updates=2,
            topic_deletes=2,
            perm_wipes=2,
            kv_puts=2,
            kv_deletes=1,
        ),
        traffic=TrafficConfig(clients=6, topics_per_client=3, dashboards=1, dashboard_poll_ms=60000),
        junk=JunkConfig(lines_per_reason=3, duplicate_batches=12, duplicate_batch_lines=(1, 20)),
        output=OutputConfig(shards=6, shuffle_block_lines=40),
    )


def _bench(hours: float, name: str) -> GeneratorConfig:
    day = hours >= 24
    return GeneratorConfig(
        preset=name,
        seed=4242,
        topology=TopologyConfig(
            namesrvs=3,
            namesrv_versions=("4.9.4", "5.3.3", "5.3.3"),
            clusters=2,
            groups=64,
            slaves_per_group=1,
            topics=1000,
            groups_per_topic=16,
            retry_topics_per_group=4,
            acting_master_groups=0,
            force_register_false_groups=2,
            raw_body_groups=2,
            compressed_body_groups=4,
        ),
        timing=TimingConfig(hours=hours),
        incidents=IncidentConfig(
            crashes=8 if day else 1,
            graceful_shutdowns=6 if day else 1,
            promotions=3 if day else 1,
            namesrv_restarts=1,
            partitions=1,
            topic_creates=24 if day else 2,
            topic_updates=12 if day else 1,
            topic_deletes=6 if day else 1,
            perm_wipes=3 if day else 1,
            kv_puts=2 if day else 1,
            kv_deletes=1 if day else 0,
            crash_downtime_s=(60, 600) if day else (60, 300),
            shutdown_downtime_s=(30, 300),
        ),
        traffic=TrafficConfig(clients=16, topics_per_client=4, dashboards=2, dashboard_poll_ms=60000,
                              response_fraction=0.2),
        junk=JunkConfig(lines_per_reason=0, duplicate_batches=0),
        output=OutputConfig(shards=48 if day else 4, shuffle_block_lines=2000),
    )


def _stress_mixed() -> GeneratorConfig:
    """Two hours of the tiny fleet made heavy in incidents, for correctness runs rather than speed:
    three NameServers (4.9, and two 5.x: one with acting master and order messages, one deleting a
    topic's routes with its registration), a 3 s scan, acting-master and extra-slave groups, every
    kind of incident several times, and a captured answer to every route query (the ground truth of
    ``gold.route_fidelity``)."""
    tiny = _tiny()
    return replace(
        tiny,
        preset="stress-mixed",
        seed=101,
        topology=replace(
            tiny.topology,
            namesrvs=3,
            namesrv_versions=("4.9.4", "5.3.3", "5.3.3"),
            namesrv_scan_interval_ms=3000,
            namesrv_config_overrides={"1": {"supportActingMaster": True, "orderMessageEnable": True},
                                      "2": {"deleteTopicWithBrokerRegistration": True}},
            groups=5,
            groups_with_extra_slave=1,
            acting_master_groups=2,
            v5_group_fraction=0.6,
        ),
        timing=replace(tiny.timing, hours=2.0),
        incidents=replace(
            tiny.incidents, crashes=5, graceful_shutdowns=3, promotions=3, namesrv_restarts=3, partitions=3, topic_creates=4,
            topic_updates=4, topic_deletes=4, perm_wipes=3, kv_puts=3, kv_deletes=2,
        ),
        traffic=replace(tiny.traffic, response_fraction=1.0),
    )


def _stress_fast_expiry() -> GeneratorConfig:
    """Two hours of two 5.x NameServers with acting master scanning every second, and brokers whose
    heartbeats time out after 3 s (every 5.x broker sends its timeout) while GC pauses of up to 6 s
    stall them: expiries, acting masters and their returns all the time."""
    tiny = _tiny()
    return replace(
        tiny,
        preset="stress-fast-expiry",
        seed=201,
        topology=replace(
            tiny.topology,
            namesrv_versions=("5.3.3",),
            namesrv_scan_interval_ms=1000,
            namesrv_config={"supportActingMaster": True},
            groups=4,
            v5_group_fraction=1.0,
            acting_master_groups=3,
            broker_not_active_timeout_ms=3000,
            heartbeat_interval_ms=1000,
            v5_always_send_heartbeat_timeout=True,
        ),
        timing=replace(tiny.timing, hours=2.0, gc_pause_probability=0.1, gc_pause_max_ms=6000),
        incidents=replace(tiny.incidents, crashes=4, promotions=3, partitions=3, perm_wipes=3),
        traffic=replace(tiny.traffic, response_fraction=1.0),
    )


#: Named presets (see design.md, "Performance", for bench-day; the stress ones are for correctness runs, README).
PRESETS: dict[str, GeneratorConfig] = {
    "tiny": _tiny(),
    "demo": _demo(),
    "bench-day": _bench(24.0, "bench-day"),
    "bench-hour": _bench(1.0, "bench-hour"),
    "stress-mixed": _stress_mixed(),
    "stress-fast-expiry": _stress_fast_expiry(),
}


def preset(name: str) -> GeneratorConfig:
    """The preset called ``name``; raises ConfigError for an unknown one."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ConfigError(f"unknown preset {name!r}; known: {', '.join(sorted(PRESETS))}") from None


# ------------------------------------------------------------------------------------ overrides


def knob_names() -> list[str]:
    """Every overridable knob as a dotted name (``section.field``), plus ``seed``."""
    names = ["seed"]
    for section in _SECTIONS:
        cls = _section_class(section)
        names.extend(f"{section}.{f.name}" for f in fields(cls))
    return names


def _section_class(section: str) -> type:
    hints = typing.get_type_hints(GeneratorConfig)
    return hints[section]


def _resolve(name: str) -> tuple[str | None, str]:
    if name in ("seed", "preset"):
        return None, name
    if "." in name:
        section, _, leaf = name.partition(".")
        if section not in _SECTIONS:
            raise ConfigError(f"unknown knob section {section!r} in {name!r}")
        if leaf not in {f.name for f in fields(_section_class(section))}:
            raise ConfigError(f"unknown knob {name!r}")
        return section, leaf
    owners = [s for s in _SECTIONS if name in {f.name for f in fields(_section_class(s))}]
    if not owners:
        raise ConfigError(f"unknown knob {name!r} (see --list-knobs)")
    if len(owners) > 1:
        raise ConfigError(f"ambiguous knob {name!r}: use one of {', '.join(f'{o}.{name}' for o in owners)}")
    return owners[0], name


def _parse_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _coerce(value: Any, hint: Any, name: str) -> Any:
    origin = typing.get_origin(hint)
    if hint is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "1", "0"):
            return value.lower() in ("true", "yes", "1")
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        raise ConfigError(f"{name}: expected a boolean, got {value!r}")
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ConfigError(f"{name}: expected an integer, got {value!r}")
        if isinstance(value, int):
            return value
        if isinstance(value, str):
            try:  # every digit: through a float, "4611686018427387905" would lose its last ones
                return int(value)
            except ValueError:
                pass  # "1e3", "2.0": read as a number below
        try:
            number = float(value)
        except ValueError:
            raise ConfigError(f"{name}: expected an integer, got {value!r}") from None
        if not math.isfinite(number) or number != int(number):
            raise ConfigError(f"{name}: expected an integer, got {value!r}")
        return int(number)
    if hint is float:
        if isinstance(value, bool):
            raise ConfigError(f"{name}: expected a number, got {value!r}")
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{name}: expected a number, got {value!r}") from None
    if hint is str:
        return str(value)
    if origin is tuple:
        args = typing.get_args(hint)
        if isinstance(value, str):
            value = [_parse_text(v.strip()) for v in value.split(",") if v.strip()]
        if not isinstance(value, (list, tuple)):
            value = [value]
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_coerce(v, args[0], name) for v in value)
        if len(value) != len(args):
            raise ConfigError(f"{name}: expected {len(args)} values, got {value!r}")
        return tuple(_coerce(v, a, name) for v, a in zip(value, args))
    if origin in (Mapping, dict) or hint in (dict, Mapping):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{name}: expected a JSON object, got {value!r}")
        return dict(value)
    return value


def apply_overrides(config: GeneratorConfig, overrides: Mapping[str, Any]) -> GeneratorConfig:
    """A copy of ``config`` with knobs replaced; values may be text (parsed as JSON, else string)."""
    for name, raw in overrides.items():
        section, leaf = _resolve(name)
        value = _parse_text(raw) if isinstance(raw, str) else raw
        if section is None:
            hint = int if leaf == "seed" else str
            config = replace(config, **{leaf: _coerce(value, hint, name)})
            continue
        cls = _section_class(section)
        hint = typing.get_type_hints(cls)[leaf]
        current = getattr(config, section)
        config = replace(config, **{section: replace(current, **{leaf: _coerce(value, hint, name)})})
    _validate(config)
    return config


_MAX_TIMEOUT_MS = 1 << 62
#: The float knobs that are shares or probabilities.
_SHARES = frozenset({"v5_group_fraction", "gc_pause_probability", "promotion_old_master_returns",
                     "unknown_topic_query_fraction", "response_fraction", "duplicate_other_file_fraction"})


def _validate(config: GeneratorConfig) -> None:
    t = config.topology
    if t.namesrvs < 1 or t.namesrvs > 90:
        raise ConfigError("topology.namesrvs must be between 1 and 90")
    if not t.namesrv_versions:
        raise ConfigError("topology.namesrv_versions must not be empty")
    if t.clusters < 1 or t.groups < t.clusters:
        raise ConfigError("need at least one broker group per cluster")
    if t.groups > 250:
        raise ConfigError("topology.groups must be at most 250")
    for section in fields(config):
        part = getattr(config, section.name)
        if not dataclasses.is_dataclass(part):
            continue
        for knob in fields(part):
            value = getattr(part, knob.name)
            if knob.type != "float":
                continue
            if not math.isfinite(value):
                raise ConfigError(f"{section.name}.{knob.name} must be a finite number, got {value}")
            if knob.name in _SHARES and not 0.0 <= value <= 1.0:
                raise ConfigError(f"{section.name}.{knob.name} must be between 0 and 1")
    if config.timing.hours <= 0:
        raise ConfigError("timing.hours must be positive")
    if config.output.shards < 1:
        raise ConfigError("output.shards must be at least 1")
    if config.output.layout not in ("mixed", "per_namesrv"):
        raise ConfigError("output.layout must be 'mixed' or 'per_namesrv'")
    if not 0 <= config.output.gzip_level <= 9 or not 0 <= config.output.body_gzip_level <= 9:
        raise ConfigError("output.gzip_level and output.body_gzip_level must be 0..9")
    unknown = set(config.junk.per_reason) - set(JUNK_REASONS)
    if unknown:
        raise ConfigError(f"unknown junk reasons: {sorted(unknown)}")
    for code in t.heartbeat_codes:
        if code not in (322, 904):
            raise ConfigError("topology.heartbeat_codes may only hold 322 and 904")
    if not 1 <= t.broker_not_active_timeout_ms <= _MAX_TIMEOUT_MS:
        # The NameServer adds it to a timestamp as a Java long; past 2^62 that sum could wrap (the
        # model replays the wrap, the generator's own expiry and responses do not).
        raise ConfigError("topology.broker_not_active_timeout_ms must be between 1 and 2^62")
    bad = set(config.incidents.crash_outcomes) - {"close", "exception", "idle", "silent"}
    if bad:
        raise ConfigError(f"unknown crash outcomes: {sorted(bad)}")


def validate(config: GeneratorConfig) -> GeneratorConfig:
    """Check ``config``; returns it unchanged or raises ConfigError."""
    _validate(config)
    return config


def config_to_dict(config: GeneratorConfig) -> dict[str, Any]:
    """A JSON-ready dict of ``config`` (tuples become lists)."""
    return json.loads(json.dumps(dataclasses.asdict(config)))
