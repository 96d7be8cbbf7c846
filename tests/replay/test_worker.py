"""gc_paused: the collector is off inside the block and back to its previous state after it.
table_rows: the rows to_pylist gives, with maps as dicts, for chunked, sliced and null maps.
steady_archive_imports: modules still import from the archives, an unchanged archive's directory is
not read again by importlib.invalidate_caches(), a changed one is."""

from __future__ import annotations

import gc
import importlib
import os
import sys
import zipfile
import zipimport
from pathlib import Path
from typing import Iterator

import pyarrow as pa
import pytest

from pipelines import worker
from pipelines.worker import gc_paused, steady_archive_imports, table_rows


def test_gc_paused_restores_the_previous_state_even_on_error() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError):
        with gc_paused():
            raise RuntimeError("boom")
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # it was off before: it stays off
    finally:
        gc.enable()


def test_table_rows_are_to_pylist_with_maps_as_dicts() -> None:
    schema = pa.schema([("ts", pa.int64()), ("ext_fields", pa.map_(pa.string(), pa.string())), ("config", pa.map_(pa.string(), pa.string())), ("tags", pa.list_(pa.string()))])
    first = pa.table(
        {
            "ts": [1, 2, 3],
            "ext_fields": [[("brokerName", "b1"), ("brokerId", "0")], [("x", "y")], []],
            "config": [[("q", "0")], [("a", "1")], None],
            "tags": [["x"], None, []],
        },
        schema=schema,
    )
    second = pa.table({"ts": [4, 5], "ext_fields": [[("k", "v")], [("k", "w"), ("z", "")]], "config": [None, None], "tags": [None, ["y"]]}, schema=schema)
    table = pa.concat_tables([first, second]).slice(1, 4)  # two chunks, both cut
    assert table_rows(table) == [
        {"ts": 2, "ext_fields": {"x": "y"}, "config": {"a": "1"}, "tags": None},
        {"ts": 3, "ext_fields": {}, "config": None, "tags": []},
        {"ts": 4, "ext_fields": {"k": "v"}, "config": None, "tags": None},
        {"ts": 5, "ext_fields": {"k": "w", "z": ""}, "config": None, "tags": ["y"]},
    ]
    expected = [{k: dict(v) if k in ("ext_fields", "config") and v is not None else v for k, v in row.items()} for row in table.to_pylist()]
    assert table_rows(table) == expected
    assert table_rows(table.slice(0, 0)) == []
    nulls = pa.table({"ts": [7], "ext_fields": [None], "config": [None], "tags": [None]}, schema=schema)
    assert table_rows(nulls) == [{"ts": 7, "ext_fields": None, "config": None, "tags": None}]


# ------------------------------------------------------------------------------ steady_archive_imports


def _archive(path: Path, modules: dict[str, str]) -> None:
    with zipfile.ZipFile(path, "w") as z:
        for name, source in modules.items():
            z.writestr(f"{name}.py", source)


@pytest.fixture
def archive_on_path(tmp_path: Path) -> Iterator[Path]:
    """A zip archive holding module ``steady_one``, on sys.path; the import state is restored after."""
    path = tmp_path / "code.zip"
    _archive(path, {"steady_one": "VALUE = 1\n"})
    saved_path, saved_cache = list(sys.path), dict(sys.path_importer_cache)
    sys.path.insert(0, str(path))
    try:
        yield path
    finally:
        sys.path[:] = saved_path
        sys.path_importer_cache.clear()
        sys.path_importer_cache.update(saved_cache)
        for name in ("steady_one", "steady_two"):
            sys.modules.pop(name, None)


def test_steady_archive_imports_reads_an_archive_again_only_when_it_changed(archive_on_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import steady_one  # noqa: F401 - creates the archive's zipimporter, as a worker's imports do

    reads: list[str] = []
    real_read = zipimport._read_directory
    monkeypatch.setattr(zipimport, "_read_directory", lambda path: reads.append(path) or real_read(path))
    importlib.invalidate_caches()
    assert reads.count(str(archive_on_path)) == 1  # what every task start costs without it

    steady_archive_imports()
    finder = sys.path_importer_cache[str(archive_on_path)]
    assert isinstance(finder, worker._SteadyArchiveImporter)
    steady_archive_imports()
    assert sys.path_importer_cache[str(archive_on_path)] is finder  # idempotent

    reads.clear()
    importlib.invalidate_caches()  # the first call reads, as the stdlib does
    importlib.invalidate_caches()
    importlib.invalidate_caches()
    assert reads.count(str(archive_on_path)) == 1

    # the archive changes (a module added): the next invalidation reads it and the module imports
    _archive(archive_on_path, {"steady_one": "VALUE = 1\n", "steady_two": "VALUE = 2\n"})
    os.utime(archive_on_path, ns=(0, 10**18))  # a distinct mtime even on a coarse clock
    reads.clear()
    importlib.invalidate_caches()
    assert reads.count(str(archive_on_path)) == 1
    assert importlib.import_module("steady_two").VALUE == 2


def test_steady_archive_imports_leaves_a_vanished_archive_and_other_finders_alone(archive_on_path: Path) -> None:
    import steady_one  # noqa: F401

    others = {p: f for p, f in sys.path_importer_cache.items() if type(f) is not zipimport.zipimporter}
    archive_on_path.unlink()
    steady_archive_imports()
    assert type(sys.path_importer_cache[str(archive_on_path)]) is zipimport.zipimporter
    assert all(sys.path_importer_cache[p] is f for p, f in others.items())
