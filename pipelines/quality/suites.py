"""Great Expectations suites over what an ingest run is about to write to silver.

Row-level problems never reach these suites: the parser quarantines them (``pipelines.quality.rules``).
The suites re-check the same rules on the accepted rows, add table-level expectations (unique keys,
non-null columns, the share of quarantined lines, reconciled counts) and decide whether the run may
write silver. Results come back as plain rows for ``silver.quality_results`` plus a readable report.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from dataclasses import dataclass
from typing import Any, Iterable

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from nsreplay.runtime import local_frame
from pipelines.quality.rules import RowRule

os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")

UNEXPECTED_SAMPLES = 5  # unexpected values kept per failed expectation (silver.quality_results.details)


@dataclass(frozen=True)
class QualityReport:
    passed: bool
    rows: tuple[dict[str, Any], ...]

    def failures(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if not r["success"]]

    def text(self) -> str:
        """A readable summary: one line per failed expectation (or a line saying all passed)."""
        if self.passed:
            return f"data quality: all {len(self.rows)} expectations passed"
        lines = [f"data quality: {len(self.failures())} of {len(self.rows)} expectations failed"]
        for r in self.failures():
            column = f" on {r['column']}" if r["column"] else ""
            lines.append(f"  - {r['suite']}: {r['expectation']}{column}: {r['unexpected_count']} unexpected ({r['details']})")
        return "\n".join(lines)


@dataclass(frozen=True)
class RunMetrics:
    """An ingest run's line counts. ``unreadable_files``: the ``unreadable_file`` lines among the
    quarantined ones, one per file that could not be opened or read (no line of it was read)."""

    lines_read: int
    accepted: int
    duplicates: int
    quarantined: int
    unreadable_files: int = 0

    @property
    def quarantine_ratio(self) -> float:
        """The quarantined share of the lines read from the files, for the run's check that the input
        is a capture at all. A file that could not be read is not counted: it holds no line that was
        read, it is read again by each run until it can be, and a run with nothing else new must not
        fail for it."""
        read = self.lines_read - self.unreadable_files
        return (self.quarantined - self.unreadable_files) / read if read > 0 else 0.0


_importing: threading.Thread | None = None


def import_in_background() -> None:
    """Start importing Great Expectations (2.5–3.5 s of Python here) in a thread of its own, so that
    it overlaps something that keeps this process waiting, such as the start of the Spark session,
    instead of delaying the first validation. The first validation waits for it. Call it before
    the wait, from the main thread; calling it again, or after the import, does nothing. The
    thread is not a daemon: a run that ends early waits for the import to end, rather than leaving
    it half done at the interpreter's exit."""
    global _importing
    if _importing is None and "great_expectations" not in sys.modules:
        _importing = threading.Thread(target=_import_quietly, name="nsreplay-gx-import")
        _importing.start()


def _import_quietly() -> None:
    try:
        import great_expectations  # noqa: F401
    except Exception:  # noqa: BLE001 - the first validation imports it again, and fails with the cause
        pass


def wait_for_import() -> None:
    """Return once the import :func:`import_in_background` started has ended (at once if none)."""
    if _importing is not None:
        _importing.join()


def _gx():
    wait_for_import()
    import great_expectations as gx

    logging.getLogger("great_expectations").setLevel(logging.ERROR)
    return gx


def _context():
    gx = _gx()
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
    return context


def _rule_expectation(gx: Any, rule: RowRule) -> Any:
    if rule.regex is not None:
        return gx.expectations.ExpectColumnValuesToMatchRegex(column=rule.column, regex=rule.regex)
    return gx.expectations.ExpectColumnValuesToBeBetween(column=rule.column, min_value=rule.min_value, max_value=rule.max_value)


def _validate(context: Any, suite_name: str, df: DataFrame, expectations: Iterable[Any], run_id: str, *, cheap: bool = False) -> list[dict[str, Any]]:
    """Run the expectations over ``df`` and return ``silver.quality_results`` rows. ``df`` is cached
    for the validation unless it is cached already or ``cheap`` (a projection of a cached frame)."""
    gx = _gx()
    # persist=False: GE would otherwise cache every batch frame, and never release it; the caching
    # is decided here (a frame that is cheap to scan again, such as a projection of a cache, is not)
    source = context.data_sources.add_or_update_spark(name="nsreplay", persist=False)
    asset = source.add_dataframe_asset(name=suite_name)
    # Each expectation's metrics are separate Spark jobs: compute the frame once, not once per metric.
    # The cache has as many partitions as the session has cores, not one per input file or per branch
    # of a union (the gold intervals: six tables, ~20 partitions for a small window): every metric
    # job scans it with a task per core instead of a task per slice (a narrow coalesce: no shuffle).
    own_cache = not cheap and not df.storageLevel.useMemory and not df.storageLevel.useDisk
    cached = df.coalesce(df.sparkSession.sparkContext.defaultParallelism).persist(StorageLevel.MEMORY_AND_DISK) if own_cache else df
    try:
        batch = asset.add_batch_definition_whole_dataframe(f"{suite_name}:run").get_batch(batch_parameters={"dataframe": cached})
        suite = gx.ExpectationSuite(name=suite_name)
        for expectation in expectations:
            suite.add_expectation(expectation)
        # BASIC: counts and a sample of unexpected values (all that is stored), without SUMMARY's
        # per-value tallies. The sample is a Spark job per expectation that finds nothing when the
        # expectation holds, so it is only asked for when some expectation failed (a second pass).
        result = batch.validate(suite, result_format={"result_format": "BASIC", "partial_unexpected_count": 0})
        if not result.success:
            result = batch.validate(suite, result_format={"result_format": "BASIC", "partial_unexpected_count": UNEXPECTED_SAMPLES})
    finally:
        if own_cache:
            cached.unpersist()
    rows = []
    for r in result.results:
        res = r.result or {}
        partial = res.get("partial_unexpected_list")
        rows.append(
            {
                "run_id": run_id,
                "suite": suite_name,
                "expectation": r.expectation_config.type,
                "column": r.expectation_config.kwargs.get("column"),
                "success": bool(r.success),
                "element_count": res.get("element_count"),
                "unexpected_count": res.get("unexpected_count"),
                "unexpected_percent": res.get("unexpected_percent"),
                "details": json.dumps({"sample": partial[:UNEXPECTED_SAMPLES] if partial else None, "observed": res.get("observed_value")}, default=str),
            }
        )
    return rows


def validate_ingest(
    spark: SparkSession,
    *,
    run_id: str,
    events: DataFrame,
    bodies: DataFrame,
    metrics: RunMetrics,
    rules: tuple[RowRule, ...],
    max_queue_nums: int,
    max_perm: int,
    max_quarantine_ratio: float,
    events_cheap: bool = False,
) -> QualityReport:
    """Validate the new silver rows of one ingest run; ``passed`` False means: write nothing.
    ``events_cheap``: the events are a projection of a cached frame (they are not cached again)."""
    gx = _gx()
    context = _context()
    e = gx.expectations
    event_checks = [_rule_expectation(gx, rule) for rule in rules]
    event_checks += [e.ExpectColumnValuesToNotBeNull(column=c) for c in ("namesrv", "ts", "kind", "record_id")]
    event_checks.append(e.ExpectColumnValuesToBeUnique(column="record_id"))
    rows = _validate(context, "silver.events", events, event_checks, run_id, cheap=events_cheap)

    configs = bodies.select(F.explode("topic_configs").alias("c")).select("c.*")
    config_checks = [e.ExpectColumnValuesToBeBetween(column=c, min_value=0, max_value=max_queue_nums) for c in ("read_queue_nums", "write_queue_nums")]
    config_checks.append(e.ExpectColumnValuesToBeBetween(column="perm", min_value=0, max_value=max_perm))
    rows += _validate(context, "silver.topic_configs", configs, config_checks, run_id)

    ratio = metrics.quarantine_ratio
    unreconciled = metrics.lines_read - (metrics.accepted + metrics.duplicates + metrics.quarantined)
    run = local_frame(spark, [(float(ratio), int(unreconciled))], "quarantine_ratio double, unreconciled_lines long")
    run_checks = [
        e.ExpectColumnValuesToBeBetween(column="quarantine_ratio", min_value=0.0, max_value=max_quarantine_ratio),
        e.ExpectColumnValuesToBeBetween(column="unreconciled_lines", min_value=0, max_value=0),
    ]
    rows += _validate(context, "ingest.run", run, run_checks, run_id)
    return QualityReport(all(r["success"] for r in rows), tuple(rows))
