"""Vacuum: delete the files of a warehouse that no reader can need, never those of the published history.

Every run adds files and some runs remove them from their tables: a re-run or a backfill replaces
its window's slice, the next replay RESTOREs the published version over an unpublished run's
writes, an ingest discards a killed run's rows. Delta keeps the removed files on disk, so that
readers of older versions still read them, until a vacuum deletes them. A killed write also
leaves files that no commit names. :func:`vacuum_warehouse` deletes both kinds, table by table,
and keeps every file a reader can still open:

* the files of each table's **latest version**, which the next run builds on;
* the files of the version of each gold table that the **latest publish** names: the serving
  shim, ``nsreplay.history.PublishedHistory`` and the SQL views read those versions, and the next
  replay restores them over an unpublished run's writes;
* files removed less than **the retention** ago (``[vacuum] retention_hours``, 168 by default,
  Delta's own default), and files no commit names that are younger than that: a shim that has not
  reloaded yet, an analyst's long query or time travel to a recent version still reads them, and
  a running write's files are not in the log until it commits.

A version older than the retention, other than the published one, may no longer be readable after
a vacuum. Nothing else changes: no row of any version that stays readable, and the vacuum's own
commits change no row (``VACUUM START`` / ``VACUUM END``, job ``vacuum``), so the next replay does
not take them for an unpublished run's writes.

    results = vacuum_warehouse(Warehouse(root, None, "delta-rs"), retention_hours=168, dry_run=True,
                               run_id="vacuum-20261126T150000Z")
    print(render(results, dry_run=True))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from nsreplay.history import latest_publish_row
from nsreplay.runtime import format_size
from nsreplay.storage import CommitInfo, StorageError, TableSpec, VacuumResult, Warehouse
from schemas import ALL_TABLES
from schemas.gold import GOLD_TABLES, REPLAY_RUNS, REPLAY_STATE, STALE_WINDOWS

__all__ = ["JOB", "TableVacuum", "WAREHOUSE_TABLES", "vacuum_warehouse", "render"]

#: The job name of a vacuum's commits.
JOB = "vacuum"

#: Every table of a warehouse, in the order the data flows.
WAREHOUSE_TABLES: tuple[TableSpec, ...] = ALL_TABLES + GOLD_TABLES + (REPLAY_STATE, REPLAY_RUNS, STALE_WINDOWS)


@dataclass(frozen=True)
class TableVacuum:
    """The outcome for one table: what was (or would be) deleted, the published version kept
    (``None``: not a published table, or nothing published), or why it failed (``error``), or that
    the table does not exist (``result`` and ``error`` both ``None``)."""

    table: str
    published_version: int | None
    result: VacuumResult | None
    error: str | None = None


def vacuum_warehouse(
    warehouse: Warehouse, *, retention_hours: int, dry_run: bool, run_id: str, tables: Sequence[TableSpec] = WAREHOUSE_TABLES,
) -> list[TableVacuum]:
    """Vacuum ``tables`` of ``warehouse`` (see the module docstring), one :class:`TableVacuum` each, in
    order. A table that fails (storage unreachable, a concurrent commit conflicts) is reported and the
    others go on; a table that does not exist is reported as such. ``retention_hours`` must be >= 0:
    the caller decides the floor (``[vacuum] min_retention_hours`` for the command)."""
    publish = latest_publish_row(warehouse)
    published = dict(publish["table_versions"]) if publish else {}
    commit = CommitInfo(run_id=run_id, job=JOB)
    results = []
    for spec in tables:
        version = published.get(spec.name)
        if not warehouse.exists(spec):
            results.append(TableVacuum(spec.name, version, None))
            continue
        try:
            result = warehouse.vacuum(spec, retention_hours=retention_hours, keep_versions=() if version is None else (version,),
                                      dry_run=dry_run, commit=commit)
        except StorageError as exc:
            results.append(TableVacuum(spec.name, version, None, f"{type(exc).__name__}: {exc}"))
            continue
        results.append(TableVacuum(spec.name, version, result))
    return results


def render(results: Sequence[TableVacuum], *, dry_run: bool) -> str:
    """A report of ``results``: one line per table, then the totals."""
    verb = "would delete" if dry_run else "deleted"
    lines = [f"{'table':<30} {'files':>7} {'size':>10}  kept published version"]
    for r in results:
        kept = "-" if r.published_version is None else f"v{r.published_version}"
        if r.error is not None:
            lines.append(f"{r.table:<30} {'failed':>7} {'':>10}  {kept}  {r.error}")
        elif r.result is None:
            lines.append(f"{r.table:<30} {'-':>7} {'-':>10}  (no such table)")
        else:
            lines.append(f"{r.table:<30} {len(r.result.files):>7} {format_size(r.result.bytes):>10}  {kept}")
    done = [r.result for r in results if r.result is not None]
    failed = [r.table for r in results if r.error is not None]
    lines.append(f"{verb} {sum(len(d.files) for d in done)} files, {format_size(sum(d.bytes for d in done))}"
                 + (f"; failed: {', '.join(failed)}" if failed else ""))
    return "\n".join(lines)
