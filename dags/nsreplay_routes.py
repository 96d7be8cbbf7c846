"""Airflow DAGs of nsreplay: ``nsreplay_routes`` keeps the published NameServer route history
current; ``nsreplay_maintenance`` keeps its files few and its storage bounded.

``nsreplay_routes``: one DAG run per data interval (T1, T2], four tasks, each one
``./spark-submit.sh`` call:

    ingest  ->  replay  ->  quality  ->  publish

* ``ingest``   jobs/ingest_captures.py: reads capture files it has not read before into bronze/silver.
* ``replay``   jobs/rebuild_routes.py --stage replay: the window (T1, T2] from the state published at T1.
* ``quality``  ... --stage quality: Great Expectations on what ``replay`` wrote; fails the run if they fail.
* ``publish``  ... --stage publish: readers see the window only after this.

Scheduling only: every decision about data lives in the jobs. Run ids come from the data interval
(``ingest-<T1>``, ``routes-<T1>``), so a retry or a cleared re-run of a window reuses its run id and the
jobs (idempotent per run id) do not duplicate anything. Windows build on their predecessor's published
state, hence ``max_active_runs=1`` and ``depends_on_past``. See docs/operations.md.

Failures (both DAGs, :class:`NsreplayBashOperator`): a task whose command exits non-zero fails with the
command's one-line reason in its error (``exit status 1: rebuild_routes.py: GoldQualityError: ...``).
A failure the same input meets again (a usage or configuration error, a data-quality verdict, a
schema mismatch, the driver out of memory: :func:`retry_is_futile`) fails at once, without retries;
any other (a lost executor, a killed JVM, storage) is retried.

``nsreplay_maintenance``: once a day (no catch-up: a missed day is done by the next one), three
tasks, each one call of the project's ``nsreplay`` command (no Spark; ``.venv`` is bootstrapped
first, as ``spark-submit.sh`` does):

    compact      ->  vacuum
    thin_states  ->

* ``compact``      nsreplay compact: merges the small files of the settled, published history, of
  the past days' events and capture lines, and of the tables every run reads whole.
* ``thin_states``  nsreplay thin-states: removes the replay states of window ends that no run resumes
  from by default (``[thin_states]`` in ``conf/`` says which are kept).
* ``vacuum``       nsreplay vacuum: deletes the files no retained version names (the merged and the
  thinned ones among them, once the retention of ``[vacuum]`` has passed); it runs even when one of
  the others failed.

All may run while a window of ``nsreplay_routes`` runs (docs/operations.md, "Compaction").

Settings. At parse time (environment of the DAG processor/scheduler; no database access):
``NSREPLAY_SCHEDULE`` (cron or preset, default ``@hourly``), ``NSREPLAY_START_DATE`` (ISO-8601, start
of the first window, which must end at or after the first record; default 2024-11-20T23:00:00+00:00,
the hour before the demo capture's first record), ``NSREPLAY_POOL`` (default ``default_pool``),
``NSREPLAY_MAINTENANCE_SCHEDULE`` (cron or preset, default ``30 3 * * *``: 03:30 UTC).
At run time each setting is the first non-empty of: the DAG run's params (trigger conf), the key of
the JSON Airflow Variable ``nsreplay``, the environment at parse time, the default:

    setting        environment            default
    project_root   NSREPLAY_ROOT          the checkout holding this file (symlinks resolved)
    captures       NSREPLAY_CAPTURES      captures/incoming
    warehouse      NSREPLAY_WAREHOUSE     warehouse
    nsreplay_env   NSREPLAY_ENV           local  (conf/<env>/ of the project)
    spark_args     NSREPLAY_SPARK_ARGS    none; spark-submit options, e.g. --master yarn --deploy-mode client
    delta          NSREPLAY_DELTA         none; "spark" adds the delta-spark package

e.g. ``airflow variables set nsreplay '{"warehouse": "s3a://bucket/nsreplay", "captures": "/data/captures"}'``.
Relative captures/warehouse paths are relative to the project root; URIs (s3a://, abfss://, hdfs://)
pass through unchanged. An unknown key in the Variable fails the task (typos do not go unnoticed).
"""

from __future__ import annotations

import os
import re
import shlex
from datetime import datetime, timedelta, timezone
from functools import cached_property
from pathlib import Path

try:  # Airflow 3
    from airflow.providers.standard.hooks.subprocess import SubprocessHook
    from airflow.providers.standard.operators.bash import BashOperator
    from airflow.sdk import DAG, Param
except ImportError:  # Airflow 2.x: core Airflow only (tested on 2.11.2, docs/operations.md)
    from airflow import DAG
    from airflow.hooks.subprocess import SubprocessHook
    from airflow.models.param import Param
    from airflow.operators.bash import BashOperator
from airflow.exceptions import AirflowException, AirflowFailException
from airflow.timetables.interval import CronDataIntervalTimetable

DAG_ID = "nsreplay_routes"
MAINTENANCE_DAG_ID = "nsreplay_maintenance"

# Explicit data-interval timetable: on Airflow 3 a plain cron string means CronTriggerTimetable, whose
# runs have an empty interval (start == end) - useless for windows.
SCHEDULE = CronDataIntervalTimetable(os.environ.get("NSREPLAY_SCHEDULE", "@hourly"), timezone="UTC")
MAINTENANCE_SCHEDULE = CronDataIntervalTimetable(os.environ.get("NSREPLAY_MAINTENANCE_SCHEDULE", "30 3 * * *"), timezone="UTC")
START_DATE = datetime.fromisoformat(os.environ.get("NSREPLAY_START_DATE", "2024-11-20T23:00:00+00:00").replace("Z", "+00:00"))
if START_DATE.tzinfo is None:
    START_DATE = START_DATE.replace(tzinfo=timezone.utc)

DEFAULTS = {
    "project_root": os.environ.get("NSREPLAY_ROOT") or str(Path(__file__).resolve().parents[1]),
    "captures": os.environ.get("NSREPLAY_CAPTURES", "captures/incoming"),
    "warehouse": os.environ.get("NSREPLAY_WAREHOUSE", "warehouse"),
    "nsreplay_env": os.environ.get("NSREPLAY_ENV", "local"),
    "spark_args": os.environ.get("NSREPLAY_SPARK_ARGS", ""),
    "delta": os.environ.get("NSREPLAY_DELTA", ""),
}


def nsreplay_settings(variable: object, params: object) -> dict[str, str]:
    """The run-time settings (macro; no I/O): defaults, overlaid by the Variable, then by params."""
    if not isinstance(variable, dict):
        raise ValueError(f"Airflow Variable 'nsreplay' must be a JSON object, not {type(variable).__name__}")
    unknown = sorted(set(variable) - set(DEFAULTS))
    if unknown:
        raise ValueError(f"Airflow Variable 'nsreplay' has unknown keys {unknown}; known: {sorted(DEFAULTS)}")
    merged = dict(DEFAULTS)
    for source in (variable, params):
        for key in DEFAULTS:
            value = source.get(key)
            if value not in (None, ""):
                merged[key] = str(value)
    return merged


#: The start of every task's command: the run's settings as ``s`` (one Variable read).
SETTINGS = "{% set s = nsreplay_settings(var.json.get('nsreplay', {}), params) %}"


def settings_arguments() -> dict[str, object]:
    """The DAG arguments both DAGs read their settings through: a param per setting, the
    ``nsreplay_settings`` macro, the ``sh`` filter (shell quoting)."""
    return {
        "params": {
            name: Param("", type="string", description=f"overrides setting {name} for this run (empty: not overridden)")
            for name in DEFAULTS
        },
        "user_defined_macros": {"nsreplay_settings": nsreplay_settings},
        "user_defined_filters": {"sh": shlex.quote},
    }


#: Exit statuses after which the same command fails the same way: 2, a usage or configuration error
#: (the job's arguments, spark-submit.sh's settings); 52, the driver JVM ran out of memory (the same
#: data in the same memory runs out again; the reason names the setting to raise).
FINAL_STATUSES = frozenset({2, 52})
#: Failures whose one-line reason (``<job>: <Type>: <message>``, nsreplay.runtime.guarded) names one of
#: these types are verdicts on the data, the configuration or the run's state, which the same input
#: meets again: a retry minutes later changes nothing until someone acts. Any other failure (a lost
#: executor or JVM, storage, a capture path not there yet, ...) is retried.
FINAL_REASONS = frozenset({
    "ConfigError",              # conf/<env>/nsreplay.toml
    "SparkConfigError",         # a Spark setting Spark refuses (spark_args, conf/<env>/spark-defaults.conf)
    "IngestQualityError",       # the ingest's data-quality check: too many bad lines
    "GoldQualityError",         # the window's gold checks (quality)
    "SchemaMismatchError",      # a table written by another schema
    "StateFormatError",         # replay states of another nsreplay version
    "RunIdSpentError",          # this run id cannot publish consistently any more
    "NotWrittenError",          # quality/publish of a run whose replay wrote nothing
    "PublishRefusedError",      # publish of a run whose quality failed, or whose tables moved on
    "MissingPredecessorError",  # the previous window is not published
    "NothingToReplayError",     # no record at or before the window's end
})
_REASON_TYPE = re.compile(r"^[\w.-]+: (\w+): ")


def retry_is_futile(status: int, reason: str) -> bool:
    """Whether a command that ended with ``status`` and the last output line ``reason`` would fail the
    same way if run again on the same input (:data:`FINAL_STATUSES`, :data:`FINAL_REASONS`)."""
    if status in FINAL_STATUSES:
        return True
    named = _REASON_TYPE.match(reason.strip())
    return status == 1 and named is not None and named.group(1) in FINAL_REASONS


class _LastResultHook(SubprocessHook):
    """A SubprocessHook that keeps the result of its last command (``result``: exit code, last line)."""

    result = None

    def run_command(self, *args, **kwargs):
        self.result = super().run_command(*args, **kwargs)
        return self.result


class NsreplayBashOperator(BashOperator):
    """The BashOperator of every nsreplay task. A command that exits non-zero fails the task with
    ``exit status N: <its last output line>``: every nsreplay command ends a failure with its one-line
    reason, which so reaches the failure itself (the UI's error, a callback, an e-mail), not only the
    log. The failure is final, without the task's retries (``AirflowFailException``), when
    :func:`retry_is_futile` says so; otherwise the retries apply. No exit status skips the task
    (BashOperator skips on 99 by default, and a skipped task skips the rest of the run, which then
    ends "success" having published nothing)."""

    def __init__(self, **kwargs):
        kwargs.setdefault("skip_on_exit_code", None)
        super().__init__(**kwargs)

    @cached_property
    def subprocess_hook(self):
        # its lines in the task log read as BashOperator's own hook's do
        return _LastResultHook(logger_name=f"{SubprocessHook.__module__}.SubprocessHook")

    def execute(self, context):
        self.subprocess_hook.result = None
        try:
            return super().execute(context)
        except AirflowException:
            result = self.subprocess_hook.result
            if result is None or result.exit_code == 0:  # failed before or after its command: as BashOperator says
                raise
            message = f"exit status {result.exit_code}: {result.output.strip() or '(no output)'}"
            if retry_is_futile(result.exit_code, result.output):
                raise AirflowFailException(message + " (not retried: the same input fails the same way; fix the cause,"
                                           " then clear the task)") from None
            raise AirflowException(message) from None


def submit(job_args: str) -> str:
    """The bash command of one task: ``spark-submit.sh`` with the run's settings (one Variable read), run
    from the project root, against which the settings' relative paths are read."""
    return (
        SETTINGS
        + "cd {{ s.project_root | sh }} && NSREPLAY_ENV={{ s.nsreplay_env | sh }} NSREPLAY_DELTA={{ s.delta | sh }} "
        "{{ s.project_root | sh }}/spark-submit.sh {{ s.spark_args }} " + job_args
    )


WINDOW = "--from {{ data_interval_start | ts }} --to {{ data_interval_end | ts }}"


def maintain(command: str) -> str:
    """The bash command of one maintenance task: the project's ``nsreplay`` command (Spark-free) on the
    run's warehouse, after the bootstrap that ``spark-submit.sh`` would do (instant once done)."""
    return (
        SETTINGS
        + "NSREPLAY_JVM_ARCHIVE=off {{ s.project_root | sh }}/scripts/bootstrap.sh && "
        "cd {{ s.project_root | sh }} && NSREPLAY_ENV={{ s.nsreplay_env | sh }} {{ s.project_root | sh }}/.venv/bin/nsreplay " + command
        + " --warehouse {{ s.warehouse | sh }}"
    )


def rebuild_stage(stage: str) -> str:
    return submit("jobs/rebuild_routes.py --warehouse {{ s.warehouse | sh }} " + WINDOW
                  + " --run-id routes-{{ data_interval_start | ts_nodash }} --stage " + stage)


with DAG(
    dag_id=DAG_ID,
    description="Ingest NameServer captures, replay each window into the route history, check, publish",
    schedule=SCHEDULE,
    start_date=START_DATE,
    catchup=True,  # every window since start_date, in order: the history has no gaps
    max_active_runs=1,  # a window resumes from its predecessor's published state
    dagrun_timeout=timedelta(hours=6),
    default_args={
        "owner": "nsreplay",
        "retries": 2,
        "retry_delay": timedelta(minutes=5),
        "retry_exponential_backoff": True,
        "max_retry_delay": timedelta(minutes=30),
        "pool": os.environ.get("NSREPLAY_POOL", "default_pool"),
    },
    **settings_arguments(),
    tags=["nsreplay", "spark", "rocketmq"],
    doc_md=__doc__,
) as dag:
    ingest = NsreplayBashOperator(
        task_id="ingest",
        bash_command=submit("jobs/ingest_captures.py --captures {{ s.captures | sh }} --warehouse {{ s.warehouse | sh }} "
                            "--run-id ingest-{{ data_interval_start | ts_nodash }}"),
        execution_timeout=timedelta(hours=1),
    )
    replay = NsreplayBashOperator(
        task_id="replay",
        bash_command=rebuild_stage("replay"),
        execution_timeout=timedelta(hours=2),
        depends_on_past=True,
        wait_for_downstream=True,  # also the previous window's quality
    )
    quality = NsreplayBashOperator(
        task_id="quality",
        bash_command=rebuild_stage("quality"),
        execution_timeout=timedelta(minutes=30),
        depends_on_past=True,
        wait_for_downstream=True,  # also the previous window's publish
    )
    publish = NsreplayBashOperator(
        task_id="publish",
        bash_command=rebuild_stage("publish"),
        execution_timeout=timedelta(minutes=15),
        depends_on_past=True,
    )

    ingest >> replay >> quality >> publish


with DAG(
    dag_id=MAINTENANCE_DAG_ID,
    description="Merge the published route history's small files, thin the replay states, then delete the files no reader needs",
    schedule=MAINTENANCE_SCHEDULE,
    start_date=START_DATE,
    catchup=False,  # each run does all there is to do: a missed day is done by the next run
    max_active_runs=1,
    dagrun_timeout=timedelta(hours=4),
    default_args={
        "owner": "nsreplay",
        "retries": 2,  # a compaction that lost a race with a window's restore fails and is simply run again
        "retry_delay": timedelta(minutes=10),
        "pool": os.environ.get("NSREPLAY_POOL", "default_pool"),
    },
    **settings_arguments(),
    tags=["nsreplay", "maintenance"],
    doc_md=__doc__,
) as maintenance:
    compact = NsreplayBashOperator(task_id="compact", bash_command=maintain("compact"), execution_timeout=timedelta(hours=2))
    thin_states = NsreplayBashOperator(task_id="thin_states", bash_command=maintain("thin-states"), execution_timeout=timedelta(hours=1))
    vacuum = NsreplayBashOperator(
        task_id="vacuum",
        bash_command=maintain("vacuum"),
        execution_timeout=timedelta(hours=1),
        trigger_rule="all_done",  # the files to delete do not wait for a compaction or a thinning that failed
    )

    [compact, thin_states] >> vacuum
