"""What an on-call engineer gets from a failed task of ``nsreplay_routes``: `airflow tasks test` runs
one task with real Airflow on commands that fail within seconds (before any Spark session starts),
and the tests read the task's new state and its exception from Airflow's own log lines.

A failure that the same input meets again (a usage or configuration error, and in general the types
``dags/nsreplay_routes.py`` lists in ``FINAL_REASONS``) fails the task at once; any other is retried.
Either way the exception names the command's one-line reason, not only its exit status. One case of
each kind runs on Airflow 2 too (its BashOperator and exceptions are core Airflow's, not the standard
provider's)."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from scheduling_support import AIRFLOW2, AIRFLOW_VERSIONS, ROOT

WINDOW_END = "2024-11-21T02:00:00+00:00"


def run_task(airflow, task_id: str, settings: dict, extra_env: dict | None = None, log: list | None = None) -> tuple[str, str]:
    """The task's new state and the exception it failed with ("" if none), from ``airflow tasks test``
    (whose own exit status is 0 whatever the task did; Airflow 3 logs ``new_state=failed``, Airflow 2
    ``Marking task as FAILED.``); the task log's other lines are appended to ``log`` when given."""
    result = airflow.run("airflow", "tasks", "test", "nsreplay_routes", task_id, WINDOW_END,
                         extra_env={"AIRFLOW_VAR_NSREPLAY": json.dumps(settings), **(extra_env or {})}, timeout=300)
    text = result.stdout + result.stderr
    states = [(a or b).lower() for a, b in re.findall(r"new_state=(\w+)|Marking task as (\w+)\.", text)]
    assert states, text[-4000:]
    exceptions = [line for line in text.splitlines() if re.match(r"airflow\.exceptions\.\w+: ", line)]
    if log is not None:
        log.extend(line for line in text.splitlines() if line not in exceptions)
    return states[-1], exceptions[-1] if exceptions else ""


def bad_conf(tmp_path):
    """A copy of conf/ with one invalid setting: every job fails its configuration check (status 1)."""
    conf = tmp_path / "conf"
    shutil.copytree(ROOT / "conf", conf)
    toml = conf / "base" / "nsreplay.toml"
    toml.write_text(re.sub(r"(?m)^max_window_days\s*=.*$", "max_window_days = 0", toml.read_text()))
    return conf


@pytest.mark.parametrize("case", ["usage", "config", "spark-config", "spark-submit-config"])
def test_a_failure_the_same_input_meets_again_fails_at_once_with_its_reason(airflow, tmp_path, case):
    fails_at_once(airflow, tmp_path, case)


@pytest.mark.parametrize("airflow", [AIRFLOW2], indirect=True)
def test_a_failure_the_same_input_meets_again_fails_at_once_on_airflow_2(airflow, tmp_path):
    fails_at_once(airflow, tmp_path, "usage")


def fails_at_once(airflow, tmp_path, case: str) -> None:
    """``case``'s failure fails its task at once (not up_for_retry), with its reason, once in the log."""
    settings = {"warehouse": str(tmp_path / "warehouse"), "nsreplay_env": "test"}
    log: list[str] = []
    if case == "spark-config":  # Spark refuses a setting as the session starts: exit status 1, SparkConfigError
        state, exception = run_task(airflow, "ingest", {**settings, "captures": str(tmp_path),
                                                        "spark_args": "--conf spark.sql.shuffle.partitions=abc"}, log=log)
        reason = "ingest_captures.py: SparkConfigError: Spark refused its settings"
    elif case == "spark-submit-config":  # spark-submit refuses a setting before the job runs: status 1, SparkConfigError
        state, exception = run_task(airflow, "ingest", {**settings, "captures": str(tmp_path),
                                                        "spark_args": "--conf spark.executor.memory=lots"}, log=log)
        reason = "ingest_captures.py: SparkConfigError: Spark refused its settings"
    elif case == "usage":  # spark-submit.sh refuses its settings: exit status 2, before any JVM
        state, exception = run_task(airflow, "ingest", {**settings, "captures": str(tmp_path)},
                                    extra_env={"NSREPLAY_CONF_DIR": str(tmp_path / "no-such-conf")}, log=log)
        reason = f"spark-submit.sh: NSREPLAY_CONF_DIR={tmp_path / 'no-such-conf'} is not a directory"
    else:  # the job refuses its configuration: exit status 1, ConfigError, before Spark starts
        state, exception = run_task(airflow, "replay", settings, extra_env={"NSREPLAY_CONF_DIR": str(bad_conf(tmp_path))}, log=log)
        reason = "rebuild_routes.py: ConfigError: [replay] max_window_days must be positive"
    assert state == "failed", (state, exception)  # not up_for_retry: two more runs would fail the same way
    assert exception.startswith("airflow.exceptions.AirflowFailException: ") and reason in exception, exception
    # the command's output holds the reason once (a job's reason was there twice: the job's own line,
    # which spark-submit merges into its output, and spark-submit.sh's copy of it on stderr)
    assert len([line for line in log if reason in line]) == 1, "\n".join(line for line in log if reason in line)


@pytest.mark.parametrize("airflow", AIRFLOW_VERSIONS, indirect=True)
def test_any_other_failure_is_retried_and_says_why(airflow, tmp_path):
    missing = tmp_path / "not-mounted"  # captures not there (yet): maybe a mount that comes back
    state, exception = run_task(airflow, "ingest", {"captures": str(missing), "warehouse": str(tmp_path / "wh"), "nsreplay_env": "test"})
    assert state == "up_for_retry", (state, exception)
    assert exception.startswith("airflow.exceptions.AirflowException: exit status 1: ingest_captures.py: "), exception
    assert str(missing) in exception, exception  # the job's reason, naming the path


@pytest.mark.parametrize("airflow", AIRFLOW_VERSIONS, indirect=True)
def test_no_exit_status_skips_a_task(airflow, tmp_path):
    """BashOperator skips a task whose command exits 99 (its default ``skip_on_exit_code``), and a
    skipped task skips the rest: the run would end "success" with nothing published. Here the
    project root holds a spark-submit.sh that exits 99."""
    (tmp_path / "spark-submit.sh").write_text("#!/usr/bin/env bash\necho 'spark-submit.sh: ended with status 99' >&2\nexit 99\n")
    (tmp_path / "spark-submit.sh").chmod(0o755)
    state, exception = run_task(airflow, "quality", {"project_root": str(tmp_path)})
    assert state == "up_for_retry", (state, exception)
    assert "exit status 99: spark-submit.sh: ended with status 99" in exception, exception
