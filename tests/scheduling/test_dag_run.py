"""A real test-run of the DAG: `airflow dags test` runs ONE data interval end to end (four
spark-submit.sh calls: ingest, replay, quality, publish) on a generated tiny capture into a fresh
warehouse; the published history must be that run's and answer like the reference model.

Slow (each spark-submit is ~0.5-3 min on a busy 2-core machine) but part of the default suite: the
DAG is only proven by running it. On Airflow 2 (the second release the DAG is tested on) a window
runs through `airflow dags test` too, in CI with a project root whose spark-submit.sh records its
calls: what differs between the two is Airflow (the run's interval, the order of the tasks, the
commands rendered from params, Variable and interval), not the jobs."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

from scheduling_support import AIRFLOW2

HOUR_MS = 3_600_000


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat()


def records(capture: Path) -> list[dict]:
    out = []
    for path in sorted(capture.glob("*.jsonl*")):
        with (gzip.open if path.suffix == ".gz" else open)(path, "rb") as fh:
            out.extend(json.loads(line) for line in fh)
    return out


def test_one_window_end_to_end(airflow, tmp_path):
    capture, warehouse = tmp_path / "capture", tmp_path / "warehouse"
    generated = subprocess.run(
        [str(Path(sys.executable).parent / "nsreplay"), "generate", "--preset", "tiny", "--out", str(capture),
         "--start", "2024-11-21T01:05:00Z", "--set", "junk.lines_per_reason=0"],
        capture_output=True, text=True, timeout=300)
    assert generated.returncode == 0, generated.stderr
    manifest = json.loads((capture / "_manifest.json").read_text())
    first, last = manifest["window"]["first_ts"], manifest["window"]["last_ts"]
    t1 = (first - 1) // HOUR_MS * HOUR_MS  # the hourly window (t1, t2] holding the whole capture
    t2 = t1 + HOUR_MS
    assert t1 < first and last <= t2

    settings = {"captures": str(capture), "warehouse": str(warehouse), "nsreplay_env": "test",  # conf/test: short-lived JVMs
                "spark_args": "--driver-memory 2g --conf spark.sql.shuffle.partitions=4"}
    result = airflow.run(
        "airflow", "dags", "test", "nsreplay_routes", iso(t2),  # a manual run at t2 covers the interval before it
        extra_env={"NSREPLAY_SCHEDULE": "@hourly", "NSREPLAY_START_DATE": iso(t1), "AIRFLOW_VAR_NSREPLAY": json.dumps(settings)},
        timeout=2400)
    log = result.stdout + result.stderr
    finished = [line for line in log.splitlines() if "DagRun Finished" in line]
    assert result.returncode == 0 and finished and "state=success" in finished[-1], log[-6000:]
    for task_id in ("ingest", "replay", "quality", "publish"):
        assert f"end task task_id={task_id}" in log

    from nsreplay.config import load_settings
    from nsreplay.history import PublishedHistory
    from nsreplay.model import replay, route_info

    history = PublishedHistory(str(warehouse))
    run_id = "routes-" + datetime.fromtimestamp(t1 / 1000, tz=timezone.utc).strftime("%Y%m%dT%H%M%S")
    assert history.run_id == run_id
    coverage = {c.namesrv: c for c in history.coverage()}
    assert sorted(coverage) == sorted(manifest["namesrvs"])
    for namesrv, info in manifest["namesrvs"].items():
        assert (coverage[namesrv].from_ts, coverage[namesrv].to_ts) == (info["first_ts"], t2)

    # Answers: the reference model over the same records, at sampled ticks of every NameServer.
    conf = load_settings()
    states: dict[str, list] = {}
    for state in replay(records(capture), default_profile=conf.replay.default_profile,
                        default_config=conf.replay.default_config, until=t2):
        states.setdefault(state.namesrv, []).append(state)
    assert sorted(states) == sorted(coverage)
    compared_routes = 0
    for namesrv, ticks in states.items():
        for state in ticks[:: max(1, len(ticks) // 12)] + [ticks[-1]]:
            gold = history.snapshot_at(namesrv, state.tick)
            assert gold == state.snapshot, f"{namesrv} at {state.tick}"
            for topic in sorted(state.snapshot.topicQueueTable):
                for version in (121, 401):
                    assert history.route_at(namesrv, topic, state.tick, request_version=version) == \
                        route_info(state.snapshot, topic, request_version=version)
                    compared_routes += 1
    assert compared_routes > 0


@pytest.mark.parametrize("airflow", [AIRFLOW2], indirect=True)
def test_one_window_runs_its_four_commands_in_order(airflow, tmp_path):
    """`airflow dags test nsreplay_routes` at 02:00 on Airflow 2: the window (01:00, 02:00], its four
    tasks in order, each calling the project root's spark-submit.sh from that root with the
    environment and the arguments of Airflow 3's run of the same window (test_one_window_end_to_end);
    the Variable's settings, a param given as the run's conf on top. The recorded calls are compared
    whole."""
    root = tmp_path / "root"
    root.mkdir()
    calls = tmp_path / "calls"
    (root / "spark-submit.sh").write_text(  # a line per call: its directory, environment and arguments, each in <>
        "#!/usr/bin/env bash\n"
        f"{{ printf '%s|%s|%s|' \"$PWD\" \"$NSREPLAY_ENV\" \"$NSREPLAY_DELTA\"; printf '<%s>' \"$@\"; echo; }} >> {calls}\n")
    (root / "spark-submit.sh").chmod(0o755)
    settings = {"project_root": str(root), "captures": "/data/cap tures", "warehouse": "s3a://bucket/nsreplay",
                "nsreplay_env": "test", "spark_args": "--master yarn", "delta": "spark"}
    result = airflow.run(
        "airflow", "dags", "test", "nsreplay_routes", "2024-11-21T02:00:00+00:00", "--conf", json.dumps({"nsreplay_env": "prod"}),
        extra_env={"NSREPLAY_SCHEDULE": "@hourly", "NSREPLAY_START_DATE": "2024-11-21T01:00:00+00:00",
                   "AIRFLOW_VAR_NSREPLAY": json.dumps(settings)},
        timeout=300)
    log = result.stdout + result.stderr
    finished = [line for line in log.splitlines() if "DagRun Finished" in line]
    assert result.returncode == 0 and finished and "state=success" in finished[-1], log[-6000:]
    window = ["--from", "2024-11-21T01:00:00+00:00", "--to", "2024-11-21T02:00:00+00:00", "--run-id", "routes-20241121T010000"]
    expected = [
        ["jobs/ingest_captures.py", "--captures", "/data/cap tures", "--warehouse", "s3a://bucket/nsreplay", "--run-id", "ingest-20241121T010000"],
        *(["jobs/rebuild_routes.py", "--warehouse", "s3a://bucket/nsreplay", *window, "--stage", stage] for stage in ("replay", "quality", "publish")),
    ]
    assert calls.read_text().splitlines() == [
        f"{root}|prod|spark|" + "".join(f"<{arg}>" for arg in ["--master", "yarn", *job]) for job in expected
    ]


def test_the_maintenance_dag_compacts_then_vacuums_a_published_warehouse(airflow, demo_published, tmp_path):
    """`airflow dags test nsreplay_maintenance`: the three tasks run the project's command on the
    Variable's warehouse (a copy of the published demo); the files merged are those a dry run plans,
    each group becomes one file, the replay states thinned are those a dry run plans, and the
    published history reads the same rows afterwards (the vacuum keeps the files of the published
    versions)."""
    import shutil

    from nsreplay.compaction import HISTORY_TABLES, Policy, compact_warehouse
    from nsreplay.config import load_settings
    from nsreplay.history import PublishedHistory
    from nsreplay.state_thinning import Policy as ThinningPolicy
    from nsreplay.state_thinning import thin_states
    from nsreplay.storage import Warehouse
    from schemas.gold import REPLAY_STATE

    root = tmp_path / "wh"
    shutil.copytree(demo_published[1], root)
    warehouse = Warehouse(str(root), None, "delta-rs")
    planned = {r.table: r.result for r in compact_warehouse(warehouse, Policy.from_config(load_settings().compact), dry_run=True, run_id="plan")}
    files_before = {spec.name: len(warehouse.files(spec)) for spec, _ in HISTORY_TABLES}
    thinning = thin_states(warehouse, ThinningPolicy.from_config(load_settings().thin_states), dry_run=True, run_id="plan")
    states_before = len(warehouse.files(REPLAY_STATE))
    assert thinning.error is None and thinning.skipped is None and thinning.files == states_before
    assert sum(len(r.removed) for r in planned.values() if r) > 0  # something to merge, or the test proves nothing
    history = PublishedHistory(str(root))
    instants = {c.namesrv: [c.from_ts, (c.from_ts + c.to_ts) // 2, c.to_ts] for c in history.coverage()}
    before = {(ns, t): history.snapshot_at(ns, t) for ns, ts in instants.items() for t in ts}

    settings = {"warehouse": str(root), "nsreplay_env": "test"}
    result = airflow.run("airflow", "dags", "test", "nsreplay_maintenance", "2024-11-22T03:30:00+00:00",
                         extra_env={"AIRFLOW_VAR_NSREPLAY": json.dumps(settings)}, timeout=900)
    log = result.stdout + result.stderr
    finished = [line for line in log.splitlines() if "DagRun Finished" in line]
    assert result.returncode == 0 and finished and "state=success" in finished[-1], log[-6000:]
    for task_id in ("compact", "thin_states", "vacuum"):
        assert f"end task task_id={task_id}" in log
    assert f"compaction of {root}" in log and f"thinning of {root}" in log and f"vacuum of {root}" in log, log[-6000:]
    assert len(warehouse.files(REPLAY_STATE)) == states_before - thinning.removed_files

    for spec, _ in HISTORY_TABLES:
        merged = planned[spec.name]
        groups = 0 if merged is None else len(merged.removed)
        removed = 0 if merged is None else sum(len(g) for g in merged.removed)
        assert len(warehouse.files(spec)) == files_before[spec.name] - removed + groups, spec.name
        if groups:
            assert warehouse.history(spec, limit=1)[0]["mode"] == "compact", spec.name
    published = PublishedHistory(str(root))
    assert published.run_id == history.run_id
    assert {key: published.snapshot_at(*key) for key in before} == before
