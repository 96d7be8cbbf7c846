"""Project configuration: ``conf/base/nsreplay.toml`` overlaid with ``conf/<env>/nsreplay.toml``.

Config is data; this module only turns it into typed, validated dataclasses. Transforms never see
these objects whole: jobs pick the plain values a transform needs and pass them as arguments.
The environment is ``NSREPLAY_ENV`` (default ``local``); ``NSREPLAY_CONF_DIR`` points at another
``conf`` folder (a cluster deployment ships its own).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Mapping, TypeVar

from nsreplay.model.tables import NamesrvConfig

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

def _project_root() -> Path:
    """The checkout holding ``conf/``. When the code runs from a zip shipped with ``--py-files``,
    ``NSREPLAY_ROOT`` (set by spark-submit.sh) or the working directory says where it is."""
    here = Path(__file__).resolve().parents[1]
    if (here / "conf").is_dir():
        return here
    return Path(os.environ.get("NSREPLAY_ROOT", os.getcwd()))


PROJECT_ROOT = _project_root()

PROFILES = ("rocketmq-4.9", "rocketmq-5")

T = TypeVar("T")


class ConfigError(ValueError):
    """The configuration files are missing, malformed or hold a value out of range."""


@dataclass(frozen=True)
class WarehouseConfig:
    root: str
    backend: str


@dataclass(frozen=True)
class IngestConfig:
    max_line_bytes: int
    quarantine_keep_bytes: int
    route_changing_codes: tuple[int, ...]
    read_only_codes: tuple[int, ...]
    channel_events: tuple[str, ...]
    files_per_task: int

    @property
    def known_codes(self) -> frozenset[int]:
        return frozenset(self.route_changing_codes) | frozenset(self.read_only_codes)


@dataclass(frozen=True)
class QualityConfig:
    min_ts: int
    max_ts: int
    max_queue_nums: int
    max_perm: int
    max_quarantine_ratio: float


@dataclass(frozen=True)
class ReplayConfig:
    default_profile: str
    default_tick_origin: str
    default_config: Mapping[str, Any]
    keyframe_every_ticks: int
    write_threads: int
    max_window_days: int
    #: Tasks of the unit replay per core of the cluster (``replay_partitions``).
    unit_tasks_per_core: int
    #: NameServer address -> ``{"profile": ..., "config": {...}}`` (either key optional): what that
    #: NameServer runs before its first start record, instead of the defaults above.
    namesrvs: Mapping[str, Mapping[str, Any]]

    def defaults_for(self, namesrv: str) -> tuple[str, dict[str, Any]]:
        """(profile, settings) of ``namesrv`` before its first start record in the capture: its own
        ``profile`` or ``default_profile``; ``default_config`` overlaid key by key with its own
        ``config``. A start record replaces both from its ``ts`` on (capture-format.md)."""
        own = self.namesrvs.get(namesrv, {})
        return own.get("profile", self.default_profile), {**self.default_config, **own.get("config", {})}


@dataclass(frozen=True)
class VacuumConfig:
    retention_hours: int
    min_retention_hours: int


@dataclass(frozen=True)
class CompactConfig:
    target_file_mb: int
    span_hours: int
    row_group_rows: int
    ledger_file_mb: int
    ledger_row_group_rows: int


@dataclass(frozen=True)
class ThinStatesConfig:
    keep_recent_hours: int
    checkpoint_hours: int


@dataclass(frozen=True)
class DemoConfig:
    preset: str
    seed: int
    captures: str


@dataclass(frozen=True)
class Settings:
    env: str
    conf_dir: Path
    warehouse: WarehouseConfig
    ingest: IngestConfig
    quality: QualityConfig
    replay: ReplayConfig
    vacuum: VacuumConfig
    compact: CompactConfig
    thin_states: ThinStatesConfig
    demo: DemoConfig

    def spark_defaults_files(self) -> list[Path]:
        """The spark-defaults files to apply, base first (later ones override earlier ones)."""
        names = [self.conf_dir / "base" / "spark-defaults.conf", self.conf_dir / self.env / "spark-defaults.conf"]
        return [p for p in names if p.is_file()]


def _merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _section(cls: type, raw: Mapping[str, Any], name: str) -> Any:
    data = raw.get(name)
    if not isinstance(data, Mapping):
        raise ConfigError(f"[{name}] is missing from the configuration")
    values = {}
    for f in fields(cls):
        if f.name not in data:
            raise ConfigError(f"[{name}] {f.name} is missing from the configuration")
        value = data[f.name]
        values[f.name] = tuple(value) if isinstance(value, list) else value
    return cls(**values)


def _validate(settings: Settings) -> None:
    if settings.warehouse.backend not in ("auto", "delta-rs", "delta-spark"):
        raise ConfigError(f"[warehouse] backend must be auto, delta-rs or delta-spark, not {settings.warehouse.backend!r}")
    if settings.replay.default_profile not in PROFILES:
        raise ConfigError(f"[replay] default_profile must be one of {', '.join(PROFILES)}")
    if settings.ingest.max_line_bytes <= 0 or settings.ingest.quarantine_keep_bytes <= 0:
        raise ConfigError("[ingest] byte limits must be positive")
    if settings.ingest.quarantine_keep_bytes > settings.ingest.max_line_bytes:
        raise ConfigError(
            f"[ingest] quarantine_keep_bytes ({settings.ingest.quarantine_keep_bytes}) must not exceed max_line_bytes "
            f"({settings.ingest.max_line_bytes}): no line kept whole is longer, and a line too long keeps its first quarantine_keep_bytes"
        )
    _validate_namesrv_defaults(settings.replay)
    if settings.replay.default_tick_origin != "first_record":
        raise ConfigError("[replay] default_tick_origin supports only \"first_record\"")
    if settings.replay.keyframe_every_ticks <= 0:
        raise ConfigError("[replay] keyframe_every_ticks must be positive")
    if settings.replay.write_threads <= 0:
        raise ConfigError("[replay] write_threads must be positive")
    if settings.replay.max_window_days <= 0:
        raise ConfigError("[replay] max_window_days must be positive")
    if isinstance(settings.replay.unit_tasks_per_core, bool) or not isinstance(settings.replay.unit_tasks_per_core, int) \
            or settings.replay.unit_tasks_per_core <= 0:
        raise ConfigError("[replay] unit_tasks_per_core must be a positive integer")
    if not 0 <= settings.vacuum.min_retention_hours <= settings.vacuum.retention_hours:
        raise ConfigError("[vacuum] needs 0 <= min_retention_hours <= retention_hours")
    for name in ("target_file_mb", "span_hours", "row_group_rows", "ledger_file_mb", "ledger_row_group_rows"):
        value = getattr(settings.compact, name)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ConfigError(f"[compact] {name} must be a positive integer")
    if isinstance(settings.thin_states.keep_recent_hours, bool) or not isinstance(settings.thin_states.keep_recent_hours, int) \
            or settings.thin_states.keep_recent_hours < 0:
        raise ConfigError("[thin_states] keep_recent_hours must be an integer >= 0")
    if isinstance(settings.thin_states.checkpoint_hours, bool) or not isinstance(settings.thin_states.checkpoint_hours, int) \
            or settings.thin_states.checkpoint_hours <= 0:
        raise ConfigError("[thin_states] checkpoint_hours must be a positive integer")
    if not 0.0 <= settings.quality.max_quarantine_ratio <= 1.0:
        raise ConfigError("[quality] max_quarantine_ratio must be between 0 and 1")


def _validate_namesrv_defaults(replay: ReplayConfig) -> None:
    """``default_config`` and each ``[replay.namesrvs."ADDR"]`` entry: known keys, a known profile,
    settings the NameServer would accept (checked as a start record's config is)."""
    if not isinstance(replay.default_config, Mapping):
        raise ConfigError("[replay] default_config must be a table of NameServer settings")
    _check_namesrv_config("[replay] default_config", replay.default_config)
    if not isinstance(replay.namesrvs, Mapping):
        raise ConfigError('[replay] namesrvs must be a table of NameServer addresses, e.g. [replay.namesrvs."10.0.0.11:9876"]')
    for namesrv, entry in replay.namesrvs.items():
        name = f'[replay.namesrvs."{namesrv}"]'
        if not isinstance(entry, Mapping):
            raise ConfigError(f"{name} must be a table with a profile, a config or both")
        unknown = sorted(set(entry) - {"profile", "config"})
        if unknown:
            raise ConfigError(f"{name}: unknown key {unknown[0]!r} (it takes profile and config)")
        if "profile" in entry and entry["profile"] not in PROFILES:
            raise ConfigError(f"{name} profile must be one of {', '.join(PROFILES)}, not {entry['profile']!r}")
        if not isinstance(entry.get("config", {}), Mapping):
            raise ConfigError(f"{name} config must be a table of NameServer settings")
        _check_namesrv_config(f"{name} config", replay.defaults_for(namesrv)[1])


def _check_namesrv_config(name: str, config: Mapping[str, Any]) -> None:
    try:  # the model's own check of a start record's config
        NamesrvConfig.from_mapping(config)
    except ValueError as exc:
        raise ConfigError(f"{name}: {exc}") from exc


def _layered(env: str | None, conf_dir: Path | None) -> tuple[str, Path, dict[str, Any]]:
    """(env, conf folder, the merged TOML): ``conf/base/nsreplay.toml`` overlaid key by key with
    ``conf/<env>/nsreplay.toml`` (``env`` default ``$NSREPLAY_ENV`` or ``local``, ``conf_dir``
    default ``$NSREPLAY_CONF_DIR`` or the project's ``conf``). An environment named (``env`` or
    ``$NSREPLAY_ENV``) must have its folder, with or without a ``nsreplay.toml``: a misspelt name
    would otherwise run on the base settings alone (another warehouse, other Spark settings).
    ``local``, taken by default, may have none."""
    named = env or os.environ.get("NSREPLAY_ENV")
    env = named or "local"
    conf_dir = Path(conf_dir or os.environ.get("NSREPLAY_CONF_DIR", PROJECT_ROOT / "conf"))
    base_file = conf_dir / "base" / "nsreplay.toml"
    if not base_file.is_file():
        raise ConfigError(f"{base_file} not found")
    if named and not (conf_dir / env).is_dir():
        known = sorted(p.name for p in conf_dir.iterdir() if p.is_dir() and p.name != "base")
        raise ConfigError(f"NSREPLAY_ENV={env}: {conf_dir / env} is not a folder (the environments of {conf_dir}: {', '.join(known) or 'none'})")
    try:
        raw = tomllib.loads(base_file.read_text(encoding="utf-8"))  # TOML is UTF-8, whatever the locale's charset
        env_file = conf_dir / env / "nsreplay.toml"
        if env_file.is_file():
            raw = _merge(raw, tomllib.loads(env_file.read_text(encoding="utf-8")))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:  # not TOML, or not UTF-8
        raise ConfigError(f"malformed configuration: {exc}") from exc
    return env, conf_dir, raw


def load_section(cls: type[T], name: str, env: str | None = None, conf_dir: Path | None = None) -> T:
    """The one section ``[name]`` of the layered configuration as the dataclass ``cls`` (every field
    required; ``cls`` validates its values), for a process that needs no other section: the other
    sections are not read, so their errors do not stop it. Raises ConfigError."""
    return _section(cls, _layered(env, conf_dir)[2], name)


def load_settings(env: str | None = None, conf_dir: Path | None = None) -> Settings:
    """Load and validate the configuration for ``env`` (default: ``$NSREPLAY_ENV`` or ``local``)."""
    env, conf_dir, raw = _layered(env, conf_dir)
    settings = Settings(
        env=env,
        conf_dir=conf_dir,
        warehouse=_section(WarehouseConfig, raw, "warehouse"),
        ingest=_section(IngestConfig, raw, "ingest"),
        quality=_section(QualityConfig, raw, "quality"),
        replay=_section(ReplayConfig, raw, "replay"),
        vacuum=_section(VacuumConfig, raw, "vacuum"),
        compact=_section(CompactConfig, raw, "compact"),
        thin_states=_section(ThinStatesConfig, raw, "thin_states"),
        demo=_section(DemoConfig, raw, "demo"),
    )
    _validate(settings)
    return settings
