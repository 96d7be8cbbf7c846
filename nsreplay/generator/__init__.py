"""Capture generator: a deterministic simulation of RocketMQ clusters that writes capture-format v1.

Public API::

    from nsreplay.generator import GeneratorConfig, PRESETS, preset, apply_overrides, generate
    summary = generate(preset("tiny"), Path("/tmp/tiny"), workers=2)

Modules: ``config`` (knobs and presets), ``world`` (NameServers, groups, topics), ``brokers`` (table
lineages, broker processes), ``scenario`` (planned incidents), ``simulate`` (records per NameServer),
``responses`` (ground-truth answers to client route queries, from an independent view of each
NameServer), ``junk`` (bad lines), ``layout`` (files, duplicates), ``render`` / ``bodies`` (text), ``writer``
(parallel gzip output, manifest), ``api`` (:func:`generate`), ``cli`` (``nsreplay generate``).
"""

from .api import CaptureSummary, generate
from .config import (
    JUNK_REASONS,
    PRESETS,
    ConfigError,
    GeneratorConfig,
    IncidentConfig,
    JunkConfig,
    OutputConfig,
    TimingConfig,
    TopologyConfig,
    TrafficConfig,
    apply_overrides,
    preset,
)

__all__ = [
    "CaptureSummary",
    "generate",
    "GeneratorConfig",
    "TopologyConfig",
    "TimingConfig",
    "IncidentConfig",
    "TrafficConfig",
    "JunkConfig",
    "OutputConfig",
    "PRESETS",
    "JUNK_REASONS",
    "ConfigError",
    "preset",
    "apply_overrides",
]
