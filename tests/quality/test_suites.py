"""The Great Expectations runner behind every suite: counts for every expectation, and samples of
the unexpected values of those that fail (asked for in a second pass only when one fails)."""

from __future__ import annotations

import json

from pipelines.quality.suites import UNEXPECTED_SAMPLES, _context, _gx, _validate


def _rows(spark, values: list[int | None]) -> list[dict]:
    e = _gx().expectations
    df = spark.createDataFrame([(v,) for v in values], "n int")
    checks = [e.ExpectColumnValuesToBeBetween(column="n", min_value=0, max_value=9), e.ExpectColumnValuesToNotBeNull(column="n")]
    return _validate(_context(), "test.numbers", df, checks, "run-1")


def test_passing_expectations_have_counts_and_no_sample(spark) -> None:
    got = [(r["expectation"], r["success"], r["element_count"], r["unexpected_count"], json.loads(r["details"])["sample"]) for r in _rows(spark, [1, 2, 3])]
    assert got == [("expect_column_values_to_be_between", True, 3, 0, None), ("expect_column_values_to_not_be_null", True, 3, 0, None)]


def test_a_failing_expectation_keeps_a_sample_of_its_unexpected_values(spark) -> None:
    values = [1, 20, 30, 40, 50, 60, 70, 80, None]
    rows = {r["expectation"]: r for r in _rows(spark, values)}
    between, not_null = rows["expect_column_values_to_be_between"], rows["expect_column_values_to_not_be_null"]
    assert (between["success"], between["element_count"], between["unexpected_count"]) == (False, 9, 7)
    sample = json.loads(between["details"])["sample"]
    assert len(sample) == UNEXPECTED_SAMPLES and set(sample) <= {20, 30, 40, 50, 60, 70, 80}
    assert (not_null["success"], not_null["unexpected_count"]) == (False, 1)


def test_great_expectations_can_be_imported_while_the_job_waits_for_spark() -> None:
    """In a fresh interpreter (this one has imported it already): the import starts in a thread
    of its own that an early exit waits for, a second call starts nothing, and the first
    validation's ``_gx`` waits for the thread and gets the module."""
    import subprocess
    import sys

    script = (
        "import sys, threading\n"
        "from pipelines.quality import suites\n"
        "assert 'great_expectations' not in sys.modules\n"
        "suites.import_in_background()\n"
        "thread = suites._importing\n"
        "assert thread is not None and thread.name == 'nsreplay-gx-import' and not thread.daemon\n"
        "suites.import_in_background()\n"
        "assert suites._importing is thread\n"
        "gx = suites._gx()\n"
        "assert not thread.is_alive() and gx is sys.modules['great_expectations'] and hasattr(gx, 'expectations')\n"
        "print('ok')\n"
    )
    from nsreplay.config import PROJECT_ROOT

    done = subprocess.run([sys.executable, "-c", script], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
