"""The DAG as the scheduler sees it: a DagBag of dags/ (no examples) in the pinned Airflow venv. The
shape and the rendering of the settings are checked on Airflow 3 and on Airflow 2 alike."""

from __future__ import annotations

import json

import pytest

from scheduling_support import AIRFLOW_VERSIONS, ROOT

TASKS = ("ingest", "replay", "quality", "publish")


def load(airflow) -> dict:
    result = airflow.run("python", str(ROOT / "tests" / "scheduling" / "inspect_dag.py"), timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def rendered(airflow, dag_id: str, task_id: str, at: str, setting: dict, marker: str) -> str:
    """The line of ``airflow tasks render`` holding ``marker``, with ``setting`` as the Variable."""
    result = airflow.run("airflow", "tasks", "render", dag_id, task_id, at, extra_env={"AIRFLOW_VAR_NSREPLAY": json.dumps(setting)}, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    return next(line for line in result.stdout.splitlines() if marker in line)


@pytest.mark.parametrize("airflow", AIRFLOW_VERSIONS, indirect=True)
def test_dag_imports_with_expected_shape(airflow):
    bag = load(airflow)
    assert bag["import_errors"] == {}
    assert bag["dag_ids"] == ["nsreplay_maintenance", "nsreplay_routes"]

    dag = bag["dags"]["nsreplay_routes"]
    assert dag["catchup"] is True
    assert dag["max_active_runs"] == 1
    assert dag["dagrun_timeout"] and dag["dagrun_timeout"] > 0
    assert dag["timetable"] == "CronDataIntervalTimetable" and dag["periodic"]  # runs span real intervals
    assert "nsreplay" in dag["tags"] and dag["has_doc"]
    assert {"warehouse", "captures", "spark_args"} <= set(dag["params"])

    tasks = dag["tasks"]
    assert sorted(tasks) == sorted(TASKS)
    for before, after in zip(TASKS, TASKS[1:]):  # a straight line: ingest -> replay -> quality -> publish
        assert tasks[before]["downstream"] == [after]
        assert tasks[after]["upstream"] == [before]
    assert tasks["ingest"]["upstream"] == [] and tasks["publish"]["downstream"] == []

    for task_id, task in tasks.items():
        assert task["type"] == "NsreplayBashOperator"
        assert task["retries"] >= 1 and task["retry_delay"] > 0, task_id
        assert task["execution_timeout"] and task["execution_timeout"] > 0, task_id
        assert "spark-submit.sh" in task["bash_command"], task_id
    for task_id in ("replay", "quality", "publish"):  # each window builds on the previous one
        assert tasks[task_id]["depends_on_past"] is True, task_id
    assert tasks["ingest"]["depends_on_past"] is False
    assert tasks["replay"]["wait_for_downstream"] is True

    assert "jobs/ingest_captures.py" in tasks["ingest"]["bash_command"]
    for stage in ("replay", "quality", "publish"):
        command = tasks[stage]["bash_command"]
        assert "jobs/rebuild_routes.py" in command and f"--stage {stage}" in command
        assert "--from {{ data_interval_start | ts }} --to {{ data_interval_end | ts }}" in command
        assert "--run-id routes-{{ data_interval_start | ts_nodash }}" in command


@pytest.mark.parametrize("airflow", AIRFLOW_VERSIONS, indirect=True)
def test_maintenance_dag_compacts_and_thins_then_vacuums_daily_without_catch_up(airflow):
    dag = load(airflow)["dags"]["nsreplay_maintenance"]
    assert dag["catchup"] is False and dag["max_active_runs"] == 1 and dag["periodic"]
    assert dag["dagrun_timeout"] and dag["has_doc"] and "maintenance" in dag["tags"]
    assert {"warehouse", "nsreplay_env"} <= set(dag["params"])
    tasks = dag["tasks"]
    assert sorted(tasks) == ["compact", "thin_states", "vacuum"]
    assert tasks["compact"]["downstream"] == tasks["thin_states"]["downstream"] == ["vacuum"]
    assert sorted(tasks["vacuum"]["upstream"]) == ["compact", "thin_states"] and tasks["compact"]["upstream"] == tasks["thin_states"]["upstream"] == []
    assert tasks["vacuum"]["trigger_rule"] == "all_done" and tasks["compact"]["trigger_rule"] == tasks["thin_states"]["trigger_rule"] == "all_success"
    for task_id, task in tasks.items():
        assert task["type"] == "NsreplayBashOperator" and task["retries"] >= 1 and task["execution_timeout"] > 0, task_id
        assert task["depends_on_past"] is False, task_id
        assert "spark-submit.sh" not in task["bash_command"], task_id  # Spark-free
        assert f"/.venv/bin/nsreplay {task_id.replace('_', '-')} --warehouse" in task["bash_command"], task_id


def test_maintenance_settings_render_into_the_commands(airflow):
    setting = {"warehouse": "/tmp/a warehouse", "nsreplay_env": "prod"}
    assert rendered(airflow, "nsreplay_maintenance", "vacuum", "2024-11-21T03:30:00+00:00", setting, "/.venv/bin/nsreplay") == (
        f"NSREPLAY_JVM_ARCHIVE=off {ROOT}/scripts/bootstrap.sh && "
        f"cd {ROOT} && NSREPLAY_ENV=prod {ROOT}/.venv/bin/nsreplay vacuum --warehouse '/tmp/a warehouse'"
    )


@pytest.mark.parametrize("airflow", AIRFLOW_VERSIONS, indirect=True)
def test_unknown_setting_in_the_variable_fails_the_render(airflow):
    result = airflow.run("airflow", "tasks", "render", "nsreplay_routes", "ingest", "2024-11-21T02:00:00+00:00",
                         extra_env={"AIRFLOW_VAR_NSREPLAY": '{"wharehouse": "/tmp/x"}'}, timeout=180)
    assert "unknown keys ['wharehouse']" in result.stdout + result.stderr


@pytest.mark.parametrize("airflow", AIRFLOW_VERSIONS, indirect=True)
def test_settings_render_into_the_commands(airflow):
    setting = {"warehouse": "/tmp/a warehouse", "captures": "s3a://bucket/captures", "spark_args": "--master yarn",
               "nsreplay_env": "prod", "delta": "spark"}
    assert rendered(airflow, "nsreplay_routes", "ingest", "2024-11-21T02:00:00+00:00", setting, "spark-submit.sh") == (
        f"cd {ROOT} && NSREPLAY_ENV=prod NSREPLAY_DELTA=spark {ROOT}/spark-submit.sh --master yarn jobs/ingest_captures.py "
        "--captures s3a://bucket/captures --warehouse '/tmp/a warehouse' --run-id ingest-20241121T010000"
    )


def test_the_callers_python_path_does_not_reach_the_airflow_venv(airflow, tmp_path):
    """A PYTHONPATH in the caller's environment (a Spark install's python/, this project's root with
    its nsreplay.egg-info) does not reach the Airflow venv: with the project's root on it, pip check
    of a fresh venv failed on nsreplay's own requirements, and a package on it shadowed the pinned
    one in every command the script runs."""
    stray = tmp_path / "stray" / "airflow"
    stray.mkdir(parents=True)
    (stray / "__init__.py").write_text("raise ImportError('the airflow package on the caller PYTHONPATH')\n")
    result = airflow.run("python", "-c", "import os, airflow; print(os.environ.get('PYTHONPATH'))", extra_env={"PYTHONPATH": str(stray.parent)})
    assert (result.returncode, result.stdout.split()[-1:]) == (0, ["None"]), result.stderr[-3000:]
