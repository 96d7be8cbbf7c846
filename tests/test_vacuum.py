"""``nsreplay vacuum`` on a published warehouse: it deletes exactly the files no reader can need, and
every answer of the published history stays what it was (the Spark-free oracle, before and after)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nsreplay.history import PublishedHistory, latest_publish_row
from nsreplay.storage import CommitInfo, Warehouse
from nsreplay.vacuum import WAREHOUSE_TABLES
from pipelines.replay.run import _discard_unpublished, latest_publish
from schemas.gold import BROKER_LIVE_INTERVALS, KEYFRAMES, ROUTE_CHANGES, TOPIC_QUEUE_INTERVALS
from table_files import table_files

ROOT = Path(__file__).resolve().parents[1]


def stored(table_root: str) -> set[str]:
    return set(table_files(table_root))


def relative(wh: Warehouse, spec, version: int) -> set[str]:
    return {os.path.relpath(p, wh.path(spec)) for p in wh.file_uris(spec, version)}


def answers(root: str) -> dict:
    """What the published history answers: every NameServer's snapshot at its first, middle and last
    covered instant, and the route of every topic there."""
    history = PublishedHistory(root)
    out = {}
    for cov in history.coverage():
        for t in (cov.from_ts, (cov.from_ts + cov.to_ts) // 2, cov.to_ts):
            snap = history.snapshot_at(cov.namesrv, t)
            out[cov.namesrv, t] = snap
            for topic in sorted(snap.topicQueueTable):
                out[cov.namesrv, t, topic] = history.route_at(cov.namesrv, topic, t)
    return out


def vacuum(root: str, conf: Path, *args: str, environment: str = "vacuum-test") -> subprocess.CompletedProcess:
    env = {**os.environ, "NSREPLAY_CONF_DIR": str(conf), "NSREPLAY_ENV": environment}
    return subprocess.run([sys.executable, "-m", "nsreplay.cli", "vacuum", "--warehouse", root, *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def counts(report: str) -> dict[str, int]:
    """The files column of the command's per-table lines."""
    rows = {}
    for line in report.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] in {s.name for s in WAREHOUSE_TABLES} and parts[1].isdigit():
            rows[parts[0]] = int(parts[1])
    return rows


@pytest.fixture
def conf(tmp_path: Path) -> Path:
    """conf/ with an environment that allows a retention of 0 hours (the files these tests remove are
    seconds old)."""
    target = tmp_path / "conf"
    shutil.copytree(ROOT / "conf", target)
    (target / "vacuum-test").mkdir()
    (target / "vacuum-test" / "nsreplay.toml").write_text("[vacuum]\nmin_retention_hours = 0\n")
    return target


def test_a_vacuum_deletes_an_unpublished_runs_files_and_every_published_answer_stays(demo_published, spark, tmp_path, conf) -> None:
    _, source = demo_published
    root = str(tmp_path / "wh")
    shutil.copytree(source, root)
    before = answers(root)
    wh = Warehouse(root, spark, "delta-rs")
    published = latest_publish(wh)
    # A failed re-run of the window replaced two gold tables whole; the next replay put the published
    # versions back and failed too, after replacing them again. On disk: the published files (which
    # the latest version no longer names), the first run's (which no version to keep names) and the
    # second run's (the latest).
    tables = (ROUTE_CHANGES, BROKER_LIVE_INTERVALS)
    for spec in tables:
        wh.overwrite(spec, wh.read(spec, version=published.versions[spec.name]).limit(3), CommitInfo(run_id="failed-1", job="replay"))
    _discard_unpublished(wh, published, "failed-2")
    for spec in tables:
        wh.overwrite(spec, wh.read(spec, version=published.versions[spec.name]).limit(5), CommitInfo(run_id="failed-2", job="replay"))
    orphaned = {spec.name: relative(wh, spec, published.versions[spec.name] + 1) for spec in tables}
    published_files = {spec.name: relative(wh, spec, published.versions[spec.name]) for spec in tables}
    assert all(orphaned.values()) and all(not (published_files[s.name] & relative(wh, s, wh.version(s))) for s in tables)
    assert answers(root) == before
    on_disk = {spec.name: stored(wh.path(spec)) for spec in WAREHOUSE_TABLES if wh.exists(spec)}

    dry = vacuum(root, conf, "--retention-hours", "0", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    expected = {name: len(orphaned.get(name, ())) for name in on_disk}
    assert counts(dry.stdout) == expected and "dry run: nothing deleted" in dry.stdout
    assert {spec.name: stored(wh.path(spec)) for spec in WAREHOUSE_TABLES if wh.exists(spec)} == on_disk

    done = vacuum(root, conf, "--retention-hours", "0")
    assert done.returncode == 0, done.stderr
    assert counts(done.stdout) == expected
    for name, files in on_disk.items():
        assert stored(wh.path(name)) == files - orphaned.get(name, set()), name
    assert answers(root) == before  # the published versions read exactly as before
    assert latest_publish_row(wh)["run_id"] == published.run_id
    for spec in tables:  # the published files and the latest version's are all there
        assert published_files[spec.name] | relative(wh, spec, wh.version(spec)) <= stored(wh.path(spec))


def test_a_vacuums_commits_are_not_taken_for_an_unpublished_runs_writes(demo_published, spark, tmp_path, conf) -> None:
    _, source = demo_published
    root = str(tmp_path / "wh")
    shutil.copytree(source, root)
    wh = Warehouse(root, spark, "delta-rs")
    published = latest_publish(wh)
    left = Path(wh.path(KEYFRAMES), "part-of-a-killed-write.parquet")  # no commit names it
    left.write_bytes(b"x")
    then = time.time() - 3600
    os.utime(left, (then, then))
    done = vacuum(root, conf, "--retention-hours", "0", "--table", KEYFRAMES.name, "--table", TOPIC_QUEUE_INTERVALS.name)
    assert done.returncode == 0, done.stderr
    assert counts(done.stdout) == {KEYFRAMES.name: 1, TOPIC_QUEUE_INTERVALS.name: 0} and not left.exists()
    operations = [h["operation"] for h in wh.history(KEYFRAMES, limit=2)]
    assert operations == ["VACUUM END", "VACUUM START"] and wh.version(KEYFRAMES) == published.versions[KEYFRAMES.name] + 2
    _discard_unpublished(wh, published, "next-run")  # nothing to put back: a vacuum changes no row
    assert wh.version(KEYFRAMES) == published.versions[KEYFRAMES.name] + 2


def test_the_command_refuses_a_retention_below_the_configured_floor_and_unknown_tables(tmp_path) -> None:
    (tmp_path / "wh").mkdir()
    short = vacuum(str(tmp_path / "wh"), ROOT / "conf", "--retention-hours", "1", environment="local")
    assert short.returncode == 2 and "below [vacuum] min_retention_hours (24)" in short.stderr
    unknown = vacuum(str(tmp_path / "wh"), ROOT / "conf", "--table", "gold.nope", environment="local")
    assert unknown.returncode == 2 and "--table gold.nope: not a warehouse table" in unknown.stderr
    empty = vacuum(str(tmp_path / "wh"), ROOT / "conf", "--dry-run", environment="local")
    assert empty.returncode != 0 and "not an nsreplay warehouse" in empty.stderr
