"""The backfill commands of docs/operations.md ("Backfill through Airflow"), run as written on the
Airflow release they are given for: which windows they run, which they leave alone, what they refuse.

On Airflow 3 ``airflow backfill create`` only creates the backfill's DAG runs (the scheduler runs them),
so the runs it creates are the whole of what it decides; they are read from the metadata database. On
Airflow 2 ``airflow dags backfill`` runs the tasks itself: its ``--dry-run`` renders each task's
command, which names the window, without running it. What the tasks do is tested by test_dag_run."""

from __future__ import annotations

import json
import re
import shlex
from datetime import datetime, timedelta

import pytest

from scheduling_support import AIRFLOW2, AIRFLOW3, ROOT, tail

DAG_ID = "nsreplay_routes"
HOUR = timedelta(hours=1)
RUNS = str(ROOT / "tests" / "scheduling" / "dag_runs.py")


def _bullet() -> str:
    """The "Backfill through Airflow" item of docs/operations.md, its lines joined."""
    text = (ROOT / "docs" / "operations.md").read_text()
    found = re.search(r"(?ms)^- \*\*Backfill through Airflow.*?(?=^- |^$)", text)
    assert found, "docs/operations.md has no 'Backfill through Airflow' item"
    return " ".join(line.strip() for line in found.group(0).splitlines())


BULLET = _bullet()
SPANS = re.findall(r"`([^`]+)`", BULLET)
EXAMPLE = re.fullmatch(r"-s (\S+) -e (\S+)", next(s for s in SPANS if s.startswith("-s ")))
A, B = (datetime.fromisoformat(EXAMPLE.group(i)) for i in (1, 2))


def documented(prefix: str, start: datetime, end: datetime) -> list[str]:
    """The documented command that starts with ``prefix``, its A and B the given window starts."""
    (command,) = [s for s in SPANS if s.startswith(prefix)]
    return [{"A": start.isoformat(), "B": end.isoformat()}.get(arg, arg) for arg in shlex.split(command)]


def hhmm(t: datetime) -> str:
    return t.strftime("%H:%M")


def test_the_documented_example_names_the_windows_of_an_hourly_schedule():
    """The example's windows, as the text states them, are the hourly windows starting at A and B,
    which the tests below expect the commands to run."""
    assert B - A == HOUR
    assert f"runs ({hhmm(A)}, {hhmm(A + HOUR)}] and ({hhmm(B)}, {hhmm(B + HOUR)}])" in BULLET


@pytest.mark.parametrize("airflow", [AIRFLOW2], indirect=True)
def test_the_airflow2_command_runs_the_windows_starting_at_a_through_b(airflow):
    result = airflow.run(*documented("airflow dags backfill", A, B), "--dry-run", timeout=180)
    assert result.returncode == 0, tail(result.stdout + result.stderr)
    replays = [line.split("jobs/rebuild_routes.py", 1)[1].strip() for line in result.stdout.splitlines()
               if "jobs/rebuild_routes.py" in line and "--stage replay" in line]
    assert replays == [
        f"--warehouse warehouse --from {t.isoformat()} --to {(t + HOUR).isoformat()} --run-id routes-{t:%Y%m%dT%H%M%S} --stage replay"
        for t in (A, B)
    ]


@pytest.mark.parametrize("airflow", [AIRFLOW2], indirect=True)
def test_the_airflow2_command_refuses_to_run_backwards(airflow):
    result = airflow.run(*documented("airflow dags backfill", A, B), "--run-backwards", timeout=180)
    assert result.returncode != 0
    assert "You cannot backfill backwards because one or more tasks depend_on_past: replay,quality,publish" in result.stderr


def listed(airflow) -> dict:
    result = airflow.run("python", RUNS, "list", DAG_ID, timeout=120)
    assert result.returncode == 0, tail(result.stderr)
    return json.loads(result.stdout.strip().splitlines()[-1])


def runs(airflow) -> dict[str, dict]:
    """The DAG's runs by logical date."""
    return {r["logical_date"]: r for r in listed(airflow)["runs"]}


def ran(airflow, logical_date: datetime, state: str, *, scheduled: bool) -> None:
    """A finished run at ``logical_date``: triggered as ``airflow dags trigger`` does (a manual run,
    whose data interval ends at its logical date), then ended in ``state``; with ``scheduled``, the
    run a scheduler makes for the hour starting at ``logical_date``."""
    triggered = airflow.run("airflow", "dags", "trigger", DAG_ID, "--logical-date", logical_date.isoformat(), timeout=120)
    assert triggered.returncode == 0, tail(triggered.stdout + triggered.stderr)
    settled = airflow.run("python", RUNS, "settle", DAG_ID, logical_date.isoformat(), state, *(["--scheduled", "1"] if scheduled else []), timeout=120)
    assert settled.returncode == 0, tail(settled.stderr)


@pytest.mark.parametrize("airflow", [AIRFLOW3], indirect=True)
def test_the_airflow3_command_runs_the_windows_that_never_ran_or_failed_and_leaves_the_completed(airflow):
    """From A - 1 h to B + 1 h: the scheduler's run of (A - 1 h, A] completed, its run of (A, A + 1 h]
    failed, (B, B + 1 h] never ran, and a run triggered at B + 1 h (manual: it covers (B, B + 1 h])
    completed. The backfill runs the failed window again under its run and creates the one that never
    ran; it leaves the completed run alone, and the triggered run's too, whose logical date is the
    start of the window after the one it covered: that window, (B + 1 h, B + 2 h], counts as run."""
    assert airflow.run("airflow", "dags", "reserialize", timeout=180).returncode == 0
    ran(airflow, A - HOUR, "success", scheduled=True)
    ran(airflow, A, "failed", scheduled=True)
    ran(airflow, B + HOUR, "success", scheduled=False)
    before = runs(airflow)

    result = airflow.run(*documented("airflow backfill create", A - HOUR, B + HOUR), timeout=180)
    assert result.returncode == 0, tail(result.stdout + result.stderr)
    after = runs(airflow)

    assert sorted(after) == sorted([*before, B.isoformat()])
    for untouched in (A - HOUR, B + HOUR):
        assert after[untouched.isoformat()] == before[untouched.isoformat()]
    rerun, created = after[A.isoformat()], after[B.isoformat()]
    assert (rerun["run_id"], rerun["state"], rerun["backfill_id"]) == (before[A.isoformat()]["run_id"], "queued", 1)
    assert (created["run_type"], created["state"], created["backfill_id"]) == ("backfill", "queued", 1)
    assert (created["data_interval_start"], created["data_interval_end"]) == (B.isoformat(), (B + HOUR).isoformat())
    assert (rerun["data_interval_start"], rerun["data_interval_end"]) == (A.isoformat(), (A + HOUR).isoformat())
    # one window at a time, as the DAG's max_active_runs (a backfill's own default is 10): ingests
    # do not depend on the past, so more would run side by side
    assert listed(airflow)["backfills"] == [{"id": 1, "max_active_runs": 1, "reprocess_behavior": "failed"}]


@pytest.mark.parametrize("airflow", [AIRFLOW3], indirect=True)
@pytest.mark.parametrize("change, refusal", [
    ("without --reprocess-behavior",
     "DAG has tasks for which depends_on_past=True. You must set reprocess behavior to reprocess completed or reprocess failed."),
    ("with --run-backwards", "Backfill cannot be run in reverse when the DAG has tasks where depends_on_past=True."),
])
def test_the_airflow3_command_is_refused_without_a_reprocess_behavior_or_backwards(airflow, change, refusal):
    command = documented("airflow backfill create", A, B)
    if change == "with --run-backwards":
        command.append("--run-backwards")
    else:
        at = command.index("--reprocess-behavior")
        del command[at:at + 2]
    assert airflow.run("airflow", "dags", "reserialize", timeout=180).returncode == 0
    result = airflow.run(*command, "--dry-run", timeout=180)
    assert result.returncode != 0
    assert refusal in result.stderr
