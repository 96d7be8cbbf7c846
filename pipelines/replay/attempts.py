"""Attempts of one replay run id: a run id whose gold quality check failed, run again once the cause
is fixed, replays its window anew.

Every write of a run is idempotent per (job, run id): a repeated write is skipped as done, which makes
a retry safe (the scheduler retries a task, or a cleared task runs again, under the same run id). A
run whose check *failed* is the exception: run again under its run id after the cause was fixed (a
replay defect fixed by a new release, say), its writes would all be skipped, its check would read the
failed attempt's rows again, and its publish would be refused for ever. So a run id's replay starts
by looking at its latest attempt (:func:`latest_attempt`, from the commits of ``gold.replay_runs``):
when that attempt's gold check ran and failed, it is **discarded** and the run writes as the next
attempt, ``n``:

* the gold tables are put back to their published versions (a Delta RESTORE, as for another run's
  unpublished writes), or, with nothing published, to the versions before the failed attempt wrote;
* the failed attempt's ``gold.replay_runs`` row is deleted, last (a discard stopped halfway is
  finished by the next attempt, which finds the row still there); the delete's commit, job
  ``replay/discard-failed@n``, is what records the discard;
* attempt ``n`` then commits under job names of its own (:func:`attempt_job`: ``replay@n``,
  ``gold-quality@n``), so its writes are new commits, and idempotent again if it is retried in turn;
  the first attempt keeps the plain names (``replay``, ``gold-quality``), as before attempts existed.

The failed attempts' rows in ``silver.quality_results`` stay (a record of the checks that ran), each
with its ``attempt``; the publish decides on the results of the attempt ``gold.replay_runs`` holds
(its summary's ``attempt``, 1 when absent), and publishes under the one ``publish`` job of the run id.
A run id whose latest attempt passed its check, or has not been checked yet, is retried as before.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

#: the commit of ``gold.replay_runs`` that deletes a failed attempt's row; ``@n``: by attempt ``n``
DISCARD_FAILED_JOB = "replay/discard-failed"
_REPLAY_JOB = "replay"


def attempt_job(job: str, attempt: int) -> str:
    """The job name under which attempt ``attempt`` (1, 2, ...) of a run commits ``job``'s writes:
    ``job`` itself for the first, ``job@n`` for attempt ``n``."""
    if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 1:
        raise ValueError(f"attempt must be an int >= 1, got {attempt!r}")
    return job if attempt == 1 else f"{job}@{attempt}"


def attempt_of(job: str | None, base: str) -> int | None:
    """The attempt whose job name for ``base`` is ``job`` (the inverse of :func:`attempt_job`), or
    None when ``job`` is not one of ``base``'s."""
    if job == base:
        return 1
    if job is None or not job.startswith(base + "@"):
        return None
    number = job[len(base) + 1:]
    return int(number) if number.isdigit() and int(number) > 1 else None


def latest_attempt(history: Iterable[Mapping[str, Any]], run_id: str) -> tuple[int, bool] | None:
    """``(attempt, written)`` from ``gold.replay_runs``' commits (newest first), by ``run_id``'s
    newest one: a run row of attempt ``n`` (job ``replay`` or ``replay@n``): ``(n, True)``; the discard
    of the attempt before, by attempt ``n`` (job ``replay/discard-failed@n``): ``(n, False)``, attempt
    ``n`` has not written its run row yet. None when ``run_id`` has no such commit among ``history``."""
    for entry in history:
        if entry.get("run_id") != run_id:
            continue
        job = entry.get("job")
        written = attempt_of(job, _REPLAY_JOB)
        if written is not None:
            return written, True
        discarded_by = attempt_of(job, DISCARD_FAILED_JOB)
        if discarded_by is not None:
            return discarded_by, False
    return None


def run_attempt(summary: Mapping[str, Any]) -> int:
    """The attempt a ``gold.replay_runs`` row is of, from its summary (``quality`` column, parsed):
    rows of a first attempt (and rows written before attempts existed) carry none."""
    return int(summary.get("attempt", 1))


__all__ = ["DISCARD_FAILED_JOB", "attempt_job", "attempt_of", "latest_attempt", "run_attempt"]
