"""Identifiers with unusual characters (``unusual_identifiers``) through the whole pipeline: nothing
valid is quarantined, and the published history is the reference model's at every tick, in the change
log, the intervals and the keyframes; every change-log key decodes back to the exact identifiers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from differential import compare_changes, compare_every_tick, compare_keyframes, quarantined_lines
from nsreplay.config import load_settings
from nsreplay.storage import Warehouse
from pipelines.ingest.run import run_ingest
from pipelines.replay.run import run_replay
from schemas.gold import ROUTE_FIDELITY
from unusual_identifiers import AFTER_RESERVED_NAMES, S, capture, with_route_answers


@pytest.fixture(scope="module")
def unusual_published(spark, tmp_path_factory) -> tuple[Path, str]:
    """(capture dir, warehouse root) of the unusual-identifier capture, ingested, replayed, published;
    one file written with JSON escapes, the other with raw UTF-8; with captured route answers."""
    root_dir = tmp_path_factory.mktemp("unusual")
    records = with_route_answers(capture())
    half = len(records) // 2
    (root_dir / "b.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records[half:]), encoding="utf-8")
    (root_dir / "a.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records[:half]), encoding="utf-8")
    root = str(tmp_path_factory.mktemp("unusual-wh"))
    warehouse = Warehouse(root, spark, "delta-rs")
    run_ingest(spark, warehouse, load_settings(), str(root_dir), "unusual-ingest")
    run_replay(spark, warehouse, load_settings(), "unusual-replay")
    return root_dir, root


def test_no_valid_record_is_quarantined(unusual_published) -> None:
    capture_dir, _ = unusual_published
    assert quarantined_lines(sorted(capture_dir.glob("*.jsonl")), load_settings()) == {}


def assert_published_as_the_model(spark, capture_dir: Path, root: str) -> None:
    """The published history of ``root`` is the model's replay of ``capture_dir``: the state at every
    tick, the change log with its causes, and the keyframes."""
    compared, mismatches, notes = compare_every_tick(capture_dir, root)
    assert compared > 20 and mismatches == 0, "\n".join(notes[:20])
    compare_changes(spark, capture_dir, root)
    keyframes, mismatches, notes = compare_keyframes(capture_dir, root)
    assert keyframes >= 2 and mismatches == 0, "\n".join(notes[:20])


def test_unusual_identifiers_match_the_model(spark, unusual_published) -> None:
    capture_dir, root = unusual_published
    assert_published_as_the_model(spark, capture_dir, root)


def test_unusual_identifiers_match_the_model_in_windows(spark, tmp_path_factory) -> None:
    """The same capture replayed in windows, each resuming from the one before: a cut right after
    the brokerNames ``~base``, ``~kv``, ``~facts`` and ``~starts`` (spelled like the replay's own unit
    ids) registered and before ``*`` and ``a|b|c`` first did (new groups, which start from the base
    unit's state), and one more after the admin requests. The NameServers' own addresses are IPv6 here,
    unbracketed (as a JDK 8 peer's) and with a numbered zone: the replay states carried from window to
    window are theirs."""
    root_dir = tmp_path_factory.mktemp("unusual-windows")
    records = capture(("2001:db8::10:9876", "[fe80:0:0:0:0:0:0:1%2]:9876"))
    (root_dir / "all.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    root = str(tmp_path_factory.mktemp("unusual-windows-wh"))
    warehouse = Warehouse(root, spark, "delta-rs")
    run_ingest(spark, warehouse, load_settings(), str(root_dir), "unusual-w-ingest")
    cuts = [AFTER_RESERVED_NAMES, S + 11_005, max(r["ts"] for r in records)]
    for i, (after, cut) in enumerate(zip([None, *cuts], cuts)):
        run_replay(spark, warehouse, load_settings(), f"unusual-window-{i}", window_from=after, window_to=cut)
    assert_published_as_the_model(spark, root_dir, root)


def test_captured_route_answers_for_unusual_topics_all_match(spark, unusual_published) -> None:
    """gold.route_fidelity judges every captured answer (each the model's own) a match."""
    _, root = unusual_published
    judged = Warehouse(root, spark, "delta-rs").read(ROUTE_FIDELITY).select("topic", "request_version", "match").collect()
    responses = sum(1 for r in with_route_answers(capture()) if r["kind"] == "response")
    assert len(judged) == responses and [r for r in judged if not r["match"]] == []
