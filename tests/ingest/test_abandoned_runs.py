"""An ingest stopped halfway (killed between two commits) leaves rows without a run row. The next
ingest under a new run id discards them and reads the files again: bronze, silver and the counts end
exactly as if the stopped run had never started. A retry under the discarded run's id writes again.

The stop is a failure injected just before one commit, which leaves the warehouse as a kill -9 at that
point does (every commit is atomic, and nothing after it runs)."""

from __future__ import annotations

import gzip
import os
import shutil
from pathlib import Path

import pytest
from chispa import assert_df_equality
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import MapType

from nsreplay.config import load_settings
from nsreplay.generator import generate, preset
from nsreplay.storage import Warehouse
from pipelines.ingest.abandoned import abandoned_runs, discard_abandoned, written_since
from pipelines.ingest.run import JOB, run_ingest
from schemas.bronze import CAPTURES_RAW, INGEST_FILES
from schemas.silver import EVENTS, INGEST_RUNS, QUARANTINE, TOPIC_CONFIGS

# new_bodies too: a stopped run's register bodies stay stored, and the run reading its files again counts them
COUNTS = ["files_read", "files_skipped", "lines_read", "accepted", "duplicates", "quarantined", "new_bodies"]


class Killed(Exception):
    pass


class StopsBefore(Warehouse):
    """A warehouse whose writer dies just before it appends to ``spec``."""

    def __init__(self, root: str, spark, spec) -> None:
        super().__init__(root, spark, "delta-rs")
        self._stop_at = spec

    def append(self, spec, df, commit):
        if spec is self._stop_at:
            raise Killed(f"stopped before {spec.name}")
        return super().append(spec, df, commit)


def content(df: DataFrame) -> DataFrame:
    """A table's rows without the run bookkeeping (run id, ingest day), maps as sorted JSON (sortable)."""
    for f in df.schema.fields:
        if isinstance(f.dataType, MapType):
            df = df.withColumn(f.name, F.to_json(F.array_sort(F.map_entries(f.name))))
    return df.drop("run_id", "ingest_date")


@pytest.fixture(scope="module")
def capture(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("abandoned-capture")
    generate(preset("tiny"), out, workers=1)  # junk lines included: the quarantine is exercised too
    return out


@pytest.fixture(scope="module")
def reference(spark, capture, tmp_path_factory) -> Warehouse:
    warehouse = Warehouse(str(tmp_path_factory.mktemp("abandoned-reference")), spark, "delta-rs")
    run_ingest(spark, warehouse, load_settings(), str(capture), "clean")
    return warehouse


@pytest.mark.parametrize("stop_before", [QUARANTINE, INGEST_RUNS], ids=["before-quarantine", "before-run-row"])
def test_the_next_ingest_discards_a_stopped_run_and_ends_as_if_it_never_ran(spark, capture, reference, tmp_path, stop_before) -> None:
    root = str(tmp_path / "wh")
    with pytest.raises(Killed):
        run_ingest(spark, StopsBefore(root, spark, stop_before), load_settings(), str(capture), "killed")
    warehouse = Warehouse(root, spark, "delta-rs")
    assert not warehouse.read(CAPTURES_RAW).where(F.col("run_id") == "killed").isEmpty()  # it did leave rows behind

    result = run_ingest(spark, warehouse, load_settings(), str(capture), "rerun")

    assert result.discarded == ("killed",) and "killed" in result.summary()
    for spec in (CAPTURES_RAW, EVENTS, QUARANTINE, INGEST_FILES):
        assert_df_equality(content(reference.read(spec)), content(warehouse.read(spec)), ignore_row_order=True, ignore_nullable=True)
    assert {r.run_id for r in warehouse.read(EVENTS).select("run_id").distinct().collect()} == {"rerun"}
    assert_df_equality(reference.read(INGEST_RUNS).select(COUNTS), warehouse.read(INGEST_RUNS).select(COUNTS), ignore_nullable=True)
    # register bodies are stored once by content, whoever stored them first
    assert_df_equality(reference.read(TOPIC_CONFIGS).drop("first_run_id"), warehouse.read(TOPIC_CONFIGS).drop("first_run_id"), ignore_row_order=True, ignore_nullable=True)


def other_bytes(path: Path) -> bytes:
    """The lines of the capture file at ``path`` in bytes of their own (a copy byte for byte is the
    file read before, and is not read: pipelines.ingest.parts_read_before)."""
    data = path.read_bytes()
    return gzip.compress(gzip.decompress(data), mtime=1) if path.name.endswith(".gz") else data.replace(b"\n", b"\r\n")


def test_a_retry_under_a_discarded_run_id_writes_its_files_again(spark, capture, reference, tmp_path) -> None:
    """An Airflow retry of a stopped run, after a manual run discarded it: without a job name of its
    own its commits would be skipped as done, with their rows gone."""
    root = tmp_path / "wh"
    shutil.copytree(reference.root, root)  # a warehouse where "clean" finished
    first, second = sorted(capture.glob("*.jsonl*"))[:2]
    stopped, other = tmp_path / "stopped", tmp_path / "other"
    stopped.mkdir()
    other.mkdir()
    copy = stopped / ("again-" + first.name)
    copy.write_bytes(other_bytes(first))  # new files: read, their records are duplicates
    (other / ("again-" + second.name)).write_bytes(other_bytes(second))
    data = copy.read_bytes()
    lines = len((gzip.decompress(data) if copy.name.endswith(".gz") else data).splitlines())

    with pytest.raises(Killed):
        run_ingest(spark, StopsBefore(str(root), spark, INGEST_RUNS), load_settings(), str(stopped), "hourly-01")
    warehouse = Warehouse(str(root), spark, "delta-rs")
    assert run_ingest(spark, warehouse, load_settings(), str(other), "manual").discarded == ("hourly-01",)
    assert warehouse.read(CAPTURES_RAW).where(F.col("run_id") == "hourly-01").isEmpty()

    retry = run_ingest(spark, warehouse, load_settings(), str(stopped), "hourly-01")
    assert (retry.files_read, retry.lines_read, retry.discarded) == (1, lines, ())
    assert retry.accepted + retry.duplicates + retry.quarantined == lines
    assert warehouse.read(CAPTURES_RAW).where(F.col("source_file") == str(copy)).count() == lines
    assert warehouse.read(QUARANTINE).where(F.col("source_file") == str(copy)).count() == retry.quarantined
    marks = warehouse.read(INGEST_FILES).where(F.col("source_file") == str(copy)).select("run_id", "status").collect()
    assert [(m.run_id, m.status) for m in marks] == [("hourly-01", "read")]
    # and once finished, the same run id again changes nothing
    before = {spec.name: warehouse.version(spec) for spec in (CAPTURES_RAW, EVENTS, QUARANTINE, INGEST_FILES)}
    run_ingest(spark, warehouse, load_settings(), str(stopped), "hourly-01")
    assert {spec.name: warehouse.version(spec) for spec in (CAPTURES_RAW, EVENTS, QUARANTINE, INGEST_FILES)} == before


def test_a_retry_under_its_own_run_id_ends_as_if_the_stopped_attempts_never_ran(spark, capture, reference, tmp_path) -> None:
    """An Airflow retry of a stopped ingest, under the same run id, once and again: its earlier
    attempts' events must not count as its duplicates (nor hide the late records among them from the
    stale check): they are discarded like any abandoned run's, and every table is written anew."""
    root = str(tmp_path / "wh")
    with pytest.raises(Killed):  # the events, quarantine and file marks committed; no run row
        run_ingest(spark, StopsBefore(root, spark, INGEST_RUNS), load_settings(), str(capture), "hourly-02")
    with pytest.raises(Killed):  # its first retry discards that attempt and stops in turn, earlier on
        run_ingest(spark, StopsBefore(root, spark, QUARANTINE), load_settings(), str(capture), "hourly-02")
    warehouse = Warehouse(root, spark, "delta-rs")
    assert not warehouse.read(EVENTS).where(F.col("run_id") == "hourly-02").isEmpty()

    retry = run_ingest(spark, warehouse, load_settings(), str(capture), "hourly-02")

    assert retry.discarded == ("hourly-02",)
    for spec in (CAPTURES_RAW, EVENTS, QUARANTINE, INGEST_FILES):
        assert_df_equality(content(reference.read(spec)), content(warehouse.read(spec)), ignore_row_order=True, ignore_nullable=True)
    assert_df_equality(reference.read(INGEST_RUNS).select(COUNTS), warehouse.read(INGEST_RUNS).select(COUNTS), ignore_nullable=True)
    # finished now: the same run id again changes nothing
    before = {spec.name: warehouse.version(spec) for spec in (CAPTURES_RAW, EVENTS, QUARANTINE, INGEST_FILES, INGEST_RUNS)}
    assert run_ingest(spark, warehouse, load_settings(), str(capture), "hourly-02").discarded == ()
    assert {spec.name: warehouse.version(spec) for spec in (CAPTURES_RAW, EVENTS, QUARANTINE, INGEST_FILES, INGEST_RUNS)} == before


def test_only_commits_after_the_newest_finished_run_name_abandoned_runs() -> None:
    def commit(run_id, job=JOB, discarded=None):
        return {"run_id": run_id, "job": job, "extra": {"discarded": discarded} if discarded else {}}

    newest_first = [
        commit("me"),                                   # this run's own earlier attempt, stopped: abandoned too
        commit("b"),
        commit("c", job="ingest-discard-abandoned:0123456789abcdef", discarded='["a"]'),
        commit("a"),                                    # discarded already by c
        commit("d", job="ingest@7"),                    # a retry of d after an earlier discard
        commit("done"),                                 # finished: older commits are never looked at
        commit("old"),
        commit(None, job=None),                         # the table's creation
    ]
    assert abandoned_runs(newest_first, {"done", "c"}, JOB) == (("b", "d", "me"), True)
    assert abandoned_runs(newest_first[:4], {"done"}, JOB) == (("b", "me"), False)
    assert abandoned_runs(newest_first, {"done", "c", "me"}, JOB) == ((), True)  # a finished run id run again
    assert abandoned_runs([commit(None, job=None)], set(), JOB) == ((), False)


def with_maps_as_json(df: DataFrame) -> DataFrame:
    """``df`` with its map columns as sorted JSON (sortable), every other column as it is."""
    for f in df.schema.fields:
        if isinstance(f.dataType, MapType):
            df = df.withColumn(f.name, F.to_json(F.array_sort(F.map_entries(f.name))))
    return df


def test_a_discard_reads_only_the_files_written_since_the_stopped_run(spark, capture, tmp_path) -> None:
    """The rows of a stopped run are looked for among the data files added since its first commit to
    each table, not in the whole history's: with every file the tables held before it moved away
    (unreadable), the discard still deletes its rows, and nothing else: each table is, whole, what it
    was before the stopped run."""
    files = sorted(capture.glob("*.jsonl*"))
    assert len(files) >= 2
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    for i, f in enumerate(files):
        shutil.copy(f, (first if i < len(files) // 2 else second) / f.name)
    root = tmp_path / "wh"
    warehouse = Warehouse(str(root), spark, "delta-rs")
    run_ingest(spark, warehouse, load_settings(), str(first), "first")
    before = Warehouse(str(tmp_path / "before"), spark, "delta-rs")
    shutil.copytree(root, before.root)
    with pytest.raises(Killed):  # events, quarantine rows, file marks and bronze lines committed; no run row
        run_ingest(spark, StopsBefore(str(root), spark, INGEST_RUNS), load_settings(), str(second), "killed")
    tables = (CAPTURES_RAW, EVENTS, QUARANTINE, INGEST_FILES)
    for spec in tables:
        assert not warehouse.read(spec).where(F.col("run_id") == "killed").isEmpty(), spec.name

    old = [root / Path(f).relative_to(before.root) for spec in tables for f in before.file_uris(spec)]
    aside = tmp_path / "aside"
    aside.mkdir()
    moved = [(f, aside / str(i)) for i, f in enumerate(old)]
    for src, dst in moved:
        os.replace(src, dst)
    try:
        assert discard_abandoned(spark, warehouse, JOB, "next") == ("killed",)
    finally:
        for src, dst in moved:
            os.replace(dst, src)
    for spec in tables:
        assert_df_equality(with_maps_as_json(before.read(spec)), with_maps_as_json(warehouse.read(spec)), ignore_row_order=True, ignore_nullable=True)


def test_the_rows_of_runs_lie_in_the_files_added_since_their_oldest_commit() -> None:
    def commit(version, run_id):
        return {"version": version, "run_id": run_id}

    newest_first = [commit(6, "c"), commit(5, "b"), commit(4, "a"), commit(3, "b"), commit(2, "done"), commit(1, None), commit(0, None)]
    assert written_since(newest_first, ["b", "c"]) == 3
    assert written_since(newest_first, ["a"]) == 4
    assert written_since(newest_first, ["never"]) == 7  # the whole log, and no commit of theirs: no row of theirs
    assert written_since(newest_first[:4], ["never"]) is None  # the log before version 3 expired: it may hold them
    assert written_since([], ["a"]) is None
