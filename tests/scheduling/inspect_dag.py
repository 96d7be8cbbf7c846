"""Run by the Airflow venv's python (tests/scheduling/test_dag_loads.py): loads the dags folder through a
DagBag exactly as the scheduler would and prints what the tests check, as JSON on the last line."""

from __future__ import annotations

import json
import os
import sys


def seconds(delta):
    return None if delta is None else delta.total_seconds()


def main() -> int:
    from airflow.models.dagbag import DagBag

    bag = DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"], include_examples=False)
    out = {"import_errors": {str(k): str(v) for k, v in bag.import_errors.items()}, "dag_ids": sorted(bag.dag_ids)}
    out["dags"] = {}
    for dag_id, dag in bag.dags.items():
        timetable = dag.timetable
        out["dags"][dag_id] = {
            "catchup": dag.catchup,
            "max_active_runs": dag.max_active_runs,
            "dagrun_timeout": seconds(dag.dagrun_timeout),
            "tags": sorted(dag.tags),
            "has_doc": bool(dag.doc_md),
            "timetable": type(timetable).__name__,
            "periodic": bool(getattr(timetable, "periodic", False)),
            "params": sorted(dag.params.keys()),
            "tasks": {
                task.task_id: {
                    "type": type(task).__name__,
                    "upstream": sorted(task.upstream_task_ids),
                    "downstream": sorted(task.downstream_task_ids),
                    "retries": task.retries,
                    "retry_delay": seconds(task.retry_delay),
                    "execution_timeout": seconds(task.execution_timeout),
                    "depends_on_past": task.depends_on_past,
                    "wait_for_downstream": task.wait_for_downstream,
                    "trigger_rule": str(getattr(task.trigger_rule, "value", task.trigger_rule)),
                    "bash_command": task.bash_command,
                }
                for task in dag.tasks
            },
        }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
