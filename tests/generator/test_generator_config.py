"""Knobs, presets and the ``generate`` command line."""

from __future__ import annotations

import argparse
import json
from collections import Counter

import pytest

from nsreplay.generator import PRESETS, ConfigError, apply_overrides, preset
from nsreplay.generator.cli import main, register
from nsreplay.generator.config import knob_names
from nsreplay.generator.plan import build_plan

INCIDENT_KINDS = {"crash", "graceful_shutdown", "promotion", "namesrv_restart", "partition", "topic_create",
                  "topic_update", "topic_delete", "perm_wipe", "kv_put", "kv_delete"}


def test_overrides_by_dotted_and_bare_name_with_typed_values():
    cfg = apply_overrides(preset("tiny"), {
        "incidents.crashes": "3", "groups": 5, "hours": "0.5", "namesrv_versions": "5.3.3,4.9.4",
        "crash_downtime_s": "[10, 20]", "compress": "false", "namesrv_config": '{"supportActingMaster": true}',
        "seed": "99",
    })
    assert cfg.incidents.crashes == 3 and cfg.topology.groups == 5 and cfg.timing.hours == 0.5
    assert cfg.topology.namesrv_versions == ("5.3.3", "4.9.4")
    assert cfg.incidents.crash_downtime_s == (10, 20)
    assert cfg.output.compress is False and cfg.seed == 99
    assert cfg.topology.namesrv_config == {"supportActingMaster": True}
    assert preset("tiny").incidents.crashes == 1, "presets are not modified"


@pytest.mark.parametrize("name, value", [("no_such_knob", "1"), ("incidents.crashes", "many"),
                                         ("output.layout", "sideways"), ("junk.per_reason", '{"bogus": 1}'),
                                         ("incidents.crashes", "inf"), ("incidents.crashes", "nan"),
                                         ("timing.hours", "inf"), ("timing.hours", "nan"), ("timing.hours", "1e400"),
                                         ("timing.gc_pause_probability", "1.5"), ("topology.v5_group_fraction", "-0.1"),
                                         ("incidents.promotion_old_master_returns", "nan"),
                                         ("topology.broker_not_active_timeout_ms", "0"),
                                         ("topology.broker_not_active_timeout_ms", str(2**62 + 1))])
def test_bad_knobs_are_rejected(name, value):
    with pytest.raises(ConfigError):
        apply_overrides(preset("tiny"), {name: value})


def test_every_share_the_validation_checks_is_a_float_knob():
    """The 0..1 check names its knobs: a renamed knob must not drop out of it unnoticed."""
    from dataclasses import fields

    from nsreplay.generator.config import _SHARES, GeneratorConfig

    floats = {k.name for s in fields(GeneratorConfig) if s.type not in ("str", "int")
              for k in fields(getattr(GeneratorConfig(), s.name)) if k.type == "float"}
    assert _SHARES <= floats


def test_an_integer_knob_keeps_every_digit():
    """Read through a float, 2^62 + 1 would become 2^62 and pass the check that rejects it."""
    assert apply_overrides(preset("tiny"), {"seed": str(2**62 + 1)}).seed == 2**62 + 1
    assert apply_overrides(preset("tiny"), {"seed": "1e3"}).seed == 1000


def test_every_knob_is_listed_and_settable():
    names = knob_names()
    assert "incidents.crashes" in names and "output.gzip_level" in names and "seed" in names
    assert len(names) == len(set(names)) > 60


def test_presets_plan_their_workloads():
    assert set(PRESETS) == {"tiny", "demo", "bench-day", "bench-hour", "stress-mixed", "stress-fast-expiry"}
    demo = build_plan(preset("demo"))
    kinds = Counter(i["kind"] for i in demo.scenario.describe(demo.world))
    assert set(kinds) == INCIDENT_KINDS, "demo has every incident kind"
    outcomes = {i["outcome"] for i in demo.scenario.describe(demo.world) if "outcome" in i}
    assert outcomes == {"close", "exception", "idle", "silent"}
    assert len(demo.world.namesrvs) == 3 and {n.rocketmq_version for n in demo.world.namesrvs} == {"4.9.4", "5.3.3"}
    assert any(len(g.members) == 3 for g in demo.world.groups)
    assert demo.stats.junk_lines > 0 and demo.stats.duplicate_lines > 0
    day = preset("bench-day")
    assert (day.topology.namesrvs, day.topology.groups, day.topology.slaves_per_group, day.topology.topics,
            day.topology.groups_per_topic, day.timing.hours) == (3, 64, 1, 1000, 16, 24.0)
    assert day.junk.lines_per_reason == 0 and day.junk.duplicate_batches == 0
    hour = build_plan(preset("bench-hour"))
    per_master = [len(g.initial_topics) for g in hour.world.groups]
    assert 200 <= sum(per_master) / len(per_master) <= 300, "a master reports ~250 topics"


def test_the_stress_presets_plan_many_incidents_and_answer_every_route_query():
    mixed = build_plan(preset("stress-mixed"))
    kinds = Counter(i["kind"] for i in mixed.scenario.describe(mixed.world))
    assert set(kinds) == INCIDENT_KINDS and min(kinds.values()) >= 2 and kinds["crash"] >= 5
    assert [n.rocketmq_version for n in mixed.world.namesrvs] == ["4.9.4", "5.3.3", "5.3.3"]
    assert mixed.world.namesrvs[1].config["orderMessageEnable"] and mixed.world.namesrvs[2].config["deleteTopicWithBrokerRegistration"]
    fast = build_plan(preset("stress-fast-expiry"))
    assert {n.rocketmq_version for n in fast.world.namesrvs} == {"5.3.3"} and all(n.config["supportActingMaster"] for n in fast.world.namesrvs)
    assert fast.world.namesrvs[0].config["scanNotActiveBrokerInterval"] == 1000
    for name in ("stress-mixed", "stress-fast-expiry"):
        assert (preset(name).traffic.response_fraction, preset(name).timing.hours) == (1.0, 2.0)


def test_cli_generates_and_prints_a_summary(tmp_path, capsys):
    out = tmp_path / "cli"
    assert main(["--preset", "tiny", "--out", str(out), "--workers", "1", "--hours", "0.25",
                 "--set", "incidents.crashes=0", "--set", "junk.lines_per_reason=0", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    manifest = json.loads((out / "_manifest.json").read_text())
    assert summary["lines"] == manifest["lines_total"] and summary["junk_lines"] == 0
    assert manifest["config"]["timing"]["hours"] == 0.25
    assert not [i for i in manifest["incidents"] if i["kind"] == "crash"]


def test_cli_rejects_a_bad_knob_with_status_2(tmp_path, capsys):
    assert main(["--preset", "tiny", "--out", str(tmp_path), "--set", "nope=1"]) == 2
    assert "nope" in capsys.readouterr().err


def test_register_adds_the_generate_subcommand():
    parser = argparse.ArgumentParser(prog="nsreplay")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["generate", "--preset", "tiny", "--out", "/tmp/x", "--set", "seed=3"])
    assert args.command == "generate" and args.preset == "tiny" and args.overrides == ["seed=3"]
    assert callable(args.func)


def test_out_is_relative_to_where_the_command_runs_as_every_command_path(tmp_path, monkeypatch):
    """``generate --out`` resolves as ``--warehouse``, ``--captures`` and ``bench --out`` do: against
    the working directory (or the one ``spark-submit.sh`` was run from), not the project's."""
    monkeypatch.delenv("NSREPLAY_CALLER_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    parser = argparse.ArgumentParser(prog="nsreplay")
    register(parser.add_subparsers(dest="command"))
    assert parser.parse_args(["generate", "--out", "captures/incoming"]).out == tmp_path / "captures" / "incoming"
    assert parser.parse_args(["generate", "--out", str(tmp_path / "abs")]).out == tmp_path / "abs"