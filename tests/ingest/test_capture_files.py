"""Listing and opening capture files: whatever sits in a capture directory is either read or becomes
an ``unreadable_file`` line saying why; nothing stops the run, hangs it or vanishes from the counts."""

from __future__ import annotations

import gzip
import json
import os

import pytest
from chispa import assert_df_equality
from pyspark.sql.types import StructType

from nsreplay.config import load_settings
from nsreplay.runtime import local_frame
from nsreplay.storage import CommitInfo, Warehouse
from pipelines.ingest.capture_files import CaptureFile, CaptureListing, CaptureNotFoundError, _list_remote, list_capture_files, list_captures, open_capture
from pipelines.ingest.capture_reader import read_capture_file
from pipelines.ingest.run import IngestResult, _listed_before, run_ingest
from schemas.bronze import INGEST_FILES
from schemas.silver import EVENTS, INGEST_RUNS, QUARANTINE


def read(path: str) -> list:
    return list(read_capture_file(path, open_capture, max_line_bytes=1000, keep_bytes=100))


def _size_and_mtime(path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_size, int(st.st_mtime * 1000)


@pytest.mark.parametrize("how", ["local", "pyarrow"])
def test_files_and_folders_whose_names_start_with_a_dot_or_underscore_are_skipped(tmp_path, how) -> None:
    """``_tmp/`` and ``.partial/`` are where files are written before they are moved in."""
    for rel in ("a/x.jsonl", "a/b/y.jsonl.gz", "_tmp/z.jsonl", ".partial/w.jsonl", "a/_c/v.jsonl", "a/_u.jsonl", "a/.p.jsonl", "top.jsonl"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text('{"a":1}\n')
    # the pyarrow listing serves URIs with a scheme (hdfs://, s3://); file:// reaches it here
    listed = list_capture_files(str(tmp_path)) if how == "local" else _list_remote(f"file://{tmp_path}").files
    assert [os.path.relpath(f.path.removeprefix("file://"), tmp_path) for f in listed] == ["a/b/y.jsonl.gz", "a/x.jsonl", "top.jsonl"]
    # a glob reads what it matches, as documented
    matched = list_capture_files(str(tmp_path / "a" / "*.jsonl"))
    assert sorted(os.path.basename(f.path) for f in matched) == ["_u.jsonl", "x.jsonl"]


@pytest.mark.parametrize("how", ["local", "pyarrow"])
def test_capture_names_match_in_any_case_and_the_other_files_are_named_not_dropped(tmp_path, how) -> None:
    """``.ndjson`` and upper-case names are captures, and so are logrotate's names of a rotated
    capture log (a number or a date after the suffix); a file with another name (a ``.json`` or
    ``.json.gz`` one too: one JSON document, not JSON Lines) is not read but listed as ignored, so
    that the run can say so; hidden names are neither."""
    others = ("m.json", "m.json.1", "notes.txt", "notes.txt.1", "sub/N.JSON.gz", "sub/e.csv", "x.jsonl.bak", "x.jsonl.1.bak")
    rotated = ("r.jsonl.1", "r.jsonl.12", "r.jsonl-20241121", "sub/n.LOG-2024-11-21", "sub/s.ndjson.3")
    for rel in ("A.JSONL.GZ", "b.ndjson", "sub/c.NDJSON.gz", "d.jsonl", *rotated, *others, "_partial.txt", ".x/f.txt", ".DS_Store"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("{}\n")
    prefix = "" if how == "local" else "file://"
    listing = list_captures(str(tmp_path)) if how == "local" else _list_remote(f"file://{tmp_path}")
    captures = sorted(("A.JSONL.GZ", "b.ndjson", "d.jsonl", "sub/c.NDJSON.gz", *rotated))
    assert [f.path for f in listing.files] == [f"{prefix}{tmp_path}/{n}" for n in captures]
    assert [(f.path, f.size_bytes) for f in listing.ignored] == [(f"{prefix}{tmp_path}/{n}", 3) for n in sorted(others)]


def test_a_link_to_a_folder_is_not_entered_but_named(tmp_path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "x.jsonl").write_text("{}\n")
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "y.jsonl").write_text("{}\n")
    os.symlink(tmp_path / "elsewhere", tmp_path / "in" / "linked")
    os.symlink(tmp_path / "elsewhere", tmp_path / "in" / "_hidden_link")
    assert list_captures(str(tmp_path / "in")) == CaptureListing(
        [CaptureFile(str(tmp_path / "in" / "y.jsonl"), 3, list_capture_files(str(tmp_path / "in"))[0].mtime_ms)],
        (CaptureFile(str(tmp_path / "in" / "linked"), *_size_and_mtime(tmp_path / "in" / "linked")),),
    )
    assert list_captures(str(tmp_path / "in" / "y.jsonl")).ignored == ()  # a file, or a glob: nothing to report


def test_a_directory_holding_only_other_files_is_an_empty_capture_that_names_them(tmp_path) -> None:
    (tmp_path / "capture.jsonl.bak").write_text("{}\n")
    bak = tmp_path / "capture.jsonl.bak"
    assert list_captures(str(tmp_path)) == CaptureListing([], (CaptureFile(str(bak), *_size_and_mtime(bak)),))


def test_the_ingest_summary_names_what_was_not_read() -> None:
    result = IngestResult("r1", 1, 1, 0, 2, 2, 0, 0, {}, 0, None, "succeeded", ignored=tuple(f"/in/{n}" for n in "abcde"))
    assert result.summary().splitlines()[1:] == [
        "not read: 5 entries of the capture directory are not capture files by name (a name ending in .jsonl, "
        ".jsonl.gz, .ndjson, .ndjson.gz, .gz, .log, any case, but not .json, .json.gz; or a rotated log's) or are links to folders "
        "(bronze.ingest_files status not_capture): /in/a, /in/b, /in/c and 2 more"
    ]
    assert "not read" not in IngestResult("r1", 1, 1, 0, 2, 2, 0, 0, {}, 0, None, "succeeded").summary()


def test_links_that_lead_nowhere_and_fifos_are_listed_and_read_as_unreadable(tmp_path) -> None:
    (tmp_path / "good.jsonl.gz").write_bytes(gzip.compress(b'{"a":1}\n'))
    os.symlink(tmp_path / "gone.jsonl", tmp_path / "dangling.jsonl")
    os.symlink(tmp_path / "loop.jsonl", tmp_path / "loop.jsonl")
    os.mkfifo(tmp_path / "pipe.jsonl")  # opening it for reading would wait for a writer forever
    files = {os.path.basename(f.path): f for f in list_capture_files(str(tmp_path))}
    assert sorted(files) == ["dangling.jsonl", "good.jsonl.gz", "loop.jsonl", "pipe.jsonl"]
    assert (files["dangling.jsonl"].size_bytes, files["loop.jsonl"].size_bytes) == (0, 0)
    for name in ("dangling.jsonl", "loop.jsonl", "pipe.jsonl"):
        got = read(files[name].path)
        assert [line.read_error for line in got] == ["unreadable_file"], name
    assert [line.text for line in read(files["good.jsonl.gz"].path)] == ['{"a":1}']


def test_a_glob_lists_what_the_directory_form_lists_for_the_same_entries(tmp_path) -> None:
    """A dangling link or a FIFO that a glob matches is listed (and read as an unreadable_file line),
    as the directory form lists it: nothing it names vanishes without a trace. (A glob names files: a
    directory it matches is not read, in both forms of listing.)"""
    (tmp_path / "sub.jsonl").mkdir()
    (tmp_path / "sub.jsonl" / "inner.jsonl").write_text('{"a":1}\n')
    (tmp_path / "good.jsonl").write_text('{"a":1}\n')
    os.symlink(tmp_path / "gone.jsonl", tmp_path / "dangling.jsonl")
    os.mkfifo(tmp_path / "pipe.jsonl")
    names = lambda files: sorted(os.path.relpath(f.path, tmp_path) for f in files)  # noqa: E731
    want = ["dangling.jsonl", "good.jsonl", "pipe.jsonl", "sub.jsonl/inner.jsonl"]
    assert names(list_capture_files(str(tmp_path))) == want
    assert names(list_capture_files(str(tmp_path / "*.jsonl*"))) == want[:3]
    assert names(list_capture_files(str(tmp_path / "**"))) == want
    assert names(list_capture_files(str(tmp_path / "pipe.jsonl"))) == ["pipe.jsonl"]  # a path naming one


def test_a_file_that_could_not_be_read_is_read_again_by_the_next_ingest(spark, tmp_path) -> None:
    """bronze.ingest_files status 'unreadable' does not count as ingested: once readable, the same
    file (same size and modification time) is read; nor does 'not_capture' (not read for its name):
    a glob naming the file reads it."""
    warehouse = Warehouse(str(tmp_path / "wh"), spark, "delta-rs")
    warehouse.ensure(INGEST_FILES)
    rows = [("r1", "/c/a.jsonl", 10, 5, "read", 1, None), ("r1", "/c/b.jsonl", 20, 6, "unreadable", 1, None),
            ("r1", "/c/c.jsonl", 30, 7, "skipped", None, "already ingested"), ("r1", "/c/d.jsonl", 0, 0, "empty", 0, None),
            ("r1", "/c/e.json", 40, 8, "not_capture", None, "not a capture file by name")]  # read since by a glob naming it
    rows = [row + (None,) * (len(INGEST_FILES.schema) - len(row)) for row in rows]
    warehouse.append(INGEST_FILES, local_frame(spark, rows, INGEST_FILES.schema), CommitInfo(run_id="r1", job="ingest"))
    files = [CaptureFile("/c/a.jsonl", 10, 5), CaptureFile("/c/b.jsonl", 20, 6), CaptureFile("/c/c.jsonl", 30, 7), CaptureFile("/c/d.jsonl", 0, 0),
             CaptureFile("/c/e.json", 40, 8)]
    before = _listed_before(spark, warehouse, CaptureListing(files))
    assert (before.ingested, before.not_capture) == ({("/c/a.jsonl", 10, 5), ("/c/d.jsonl", 0, 0)}, {("/c/e.json", 40, 8)})


def test_a_file_that_cannot_be_read_does_not_fail_the_runs_that_find_nothing_else_new(spark, tmp_path) -> None:
    """Each run reads an unreadable file again (and quarantines it again, saying why) until it can be
    read; the run's quarantine-ratio check counts only the lines read from files, so a quiet run
    (nothing else new) is not failed by it, while the first run's good lines are ingested as usual."""
    capture = tmp_path / "incoming"
    capture.mkdir()
    (capture / "good.jsonl").write_text('{"namesrv":"10.0.0.10:9876","ts":1732147200123,"kind":"channel","event":"CONNECT","conn":"c1","remote":"10.0.1.5:1"}\n')
    os.symlink(tmp_path / "gone.jsonl", capture / "dangling.jsonl")
    warehouse = Warehouse(str(tmp_path / "wh"), spark, "delta-rs")
    first = run_ingest(spark, warehouse, load_settings(), str(capture), "r1")
    quiet = run_ingest(spark, warehouse, load_settings(), str(capture), "r2")
    assert [(r.status, r.lines_read, r.accepted, r.quarantined) for r in (first, quiet)] == [("succeeded", 2, 1, 1), ("succeeded", 1, 0, 1)]
    rows = warehouse.read(QUARANTINE).select("run_id", "reason").orderBy("run_id").collect()
    assert [tuple(r) for r in rows] == [("r1", "unreadable_file"), ("r2", "unreadable_file")]


def test_files_not_named_as_captures_are_recorded_as_not_read_and_fill_no_quarantine(spark, tmp_path) -> None:
    """A manifest, notes or a README beside the captures is no capture: the run does not read it, so
    its lines are neither quarantined nor counted in the quarantine ratio (a pretty-printed
    ``manifest.json`` beside a quiet hour's capture failed the whole ingest, 6 of 7 lines
    quarantined), and ``bronze.ingest_files`` lists it, with why, as the summary names it."""
    capture = tmp_path / "incoming"
    capture.mkdir()
    (capture / "good.jsonl").write_text('{"namesrv":"10.0.0.10:9876","ts":1732147200123,"kind":"channel","event":"CONNECT","conn":"c1","remote":"10.0.1.5:1"}\n')
    (capture / "manifest.json").write_text(json.dumps({"files": ["good.jsonl"], "owner": "sre", "lines": 1}, indent=2) + "\n")
    (capture / "notes.JSON.gz").write_bytes(gzip.compress(b'{"note":"ns-1 restarted at 03:10"}\n'))
    (capture / "README.md").write_text("# captures of ns-1\n")
    (capture / ".DS_Store").write_bytes(b"\0")  # hidden: skipped without a word, as before
    warehouse = Warehouse(str(tmp_path / "wh"), spark, "delta-rs")
    result = run_ingest(spark, warehouse, load_settings(), str(capture), "r1")
    assert (result.status, result.files_read, result.lines_read, result.accepted, result.quarantined) == ("succeeded", 1, 1, 1, 0)
    assert warehouse.read(QUARANTINE).isEmpty()
    by_name = "not a capture file by name (not .jsonl, .jsonl.gz, .ndjson, .ndjson.gz, .gz, .log, nor a rotated .jsonl, .ndjson or .log: audit.jsonl.1)"
    document = "not a capture file by name: a .json file holds one JSON document, not JSON Lines"
    columns = ["run_id", "source_file", "size_bytes", "mtime_ms", "status", "lines", "detail"]
    expected = [("r1", str(capture / name), *_size_and_mtime(capture / name), status, lines, detail) for name, status, lines, detail in (
        ("README.md", "not_capture", None, by_name), ("good.jsonl", "read", 1, None),
        ("manifest.json", "not_capture", None, document), ("notes.JSON.gz", "not_capture", None, document))]
    assert_df_equality(warehouse.read(INGEST_FILES).select(columns), local_frame(spark, expected, StructType([INGEST_FILES.schema[c] for c in columns])),
                       ignore_row_order=True, ignore_nullable=True)
    assert result.summary().splitlines()[-1].endswith(
        f"(bronze.ingest_files status not_capture): {capture}/README.md, {capture}/manifest.json, {capture}/notes.JSON.gz")
    # the next runs of a schedule find them again: each is listed once, and again once changed
    (capture / "README.md").write_text("# captures of ns-1, from 03:00\n")
    again = run_ingest(spark, warehouse, load_settings(), str(capture), "r2")
    assert again.ignored == result.ignored
    expected.append(("r2", str(capture / "README.md"), *_size_and_mtime(capture / "README.md"), "not_capture", None, by_name))
    assert_df_equality(warehouse.read(INGEST_FILES).select(columns), local_frame(spark, expected, StructType([INGEST_FILES.schema[c] for c in columns])),
                       ignore_row_order=True, ignore_nullable=True)


def test_the_quarantine_ratio_leaves_out_the_files_that_could_not_be_read() -> None:
    from pipelines.quality.suites import RunMetrics

    assert RunMetrics(10, 4, 1, 5).quarantine_ratio == 0.5
    assert RunMetrics(12, 4, 1, 7, unreadable_files=2).quarantine_ratio == 0.5
    assert RunMetrics(2, 0, 0, 2, unreadable_files=2).quarantine_ratio == 0.0  # nothing was read
    assert RunMetrics(0, 0, 0, 0).quarantine_ratio == 0.0


def test_a_capture_path_that_names_no_file_fails_before_any_table_is_created(spark, tmp_path) -> None:
    """A typo in --captures (or --warehouse) must not leave a warehouse skeleton of empty tables."""
    root = tmp_path / "wh"
    with pytest.raises(CaptureNotFoundError, match="no capture file"):
        run_ingest(spark, Warehouse(str(root), spark, "delta-rs"), load_settings(), str(tmp_path / "no-such-dir"), "typo")
    assert not root.exists() or not any(root.iterdir()), sorted(p.name for p in root.rglob("*"))


@pytest.mark.parametrize("how", ["local", "pyarrow"])
def test_a_directory_without_capture_files_is_an_empty_capture(tmp_path, how) -> None:
    """A schedule's incoming directory between two deliveries: files still being written (``_``,
    ``.``) and no capture file. Nothing to read is not an error there; a path naming nothing is."""
    (tmp_path / "_partial.jsonl").write_text('{"a":1}\n')
    (tmp_path / ".writing.jsonl.gz").write_bytes(b"")
    (tmp_path / "_tmp").mkdir()
    (tmp_path / "_tmp" / "z.jsonl").write_text('{"a":1}\n')
    (tmp_path / "notes.txt").write_text("not a capture file")
    listing = list_capture_files if how == "local" else (lambda spec: _list_remote(spec).files)
    prefix = "" if how == "local" else "file://"
    assert listing(f"{prefix}{tmp_path}") == []
    for wrong in (tmp_path / "no-such-dir", tmp_path / "*.log"):
        with pytest.raises(CaptureNotFoundError, match="no capture file"):
            listing(f"{prefix}{wrong}")


def test_an_ingest_of_an_empty_directory_succeeds_and_records_a_run_of_nothing(spark, tmp_path) -> None:
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    (incoming / "_partial.jsonl").write_text('{"a":1}\n')
    warehouse = Warehouse(str(tmp_path / "wh"), spark, "delta-rs")
    result = run_ingest(spark, warehouse, load_settings(), str(incoming), "quiet-hour")
    assert (result.status, result.files_seen, result.files_read, result.lines_read, result.accepted, result.quarantined) == ("succeeded", 0, 0, 0, 0, 0)
    runs = [(r.run_id, r.files_seen, r.files_read, r.lines_read, r.status) for r in warehouse.read(INGEST_RUNS).collect()]
    assert runs == [("quiet-hour", 0, 0, 0, "succeeded")]
    for spec in (EVENTS, QUARANTINE, INGEST_FILES):
        assert warehouse.read(spec).isEmpty(), spec.name


def test_a_local_file_uri_lists_the_directory_it_names_in_each_spelling(tmp_path) -> None:
    """``file:///my%20caps`` is the directory ``my caps`` (as ``--warehouse`` and Hadoop read it, and
    as the command line now hands it over), not ``my%20caps``; ``file:/`` and ``file://localhost/``
    name local paths too. Before, the listing stripped ``file://`` alone: "no capture file at ..."."""
    (tmp_path / "my caps").mkdir()
    (tmp_path / "my caps" / "é x.jsonl").write_text('{"a":1}\n')
    want = [str(tmp_path / "my caps" / "é x.jsonl")]
    encoded = (tmp_path / "my caps").as_uri()  # file:///.../my%20caps
    for spec in (encoded, f"{encoded}/*.jsonl", f"file:{tmp_path}/my caps", f"file://localhost{tmp_path}/my caps"):
        assert [f.path for f in list_captures(spec).files] == want, spec
    assert [line.text for line in read(want[0])] == ['{"a":1}']
