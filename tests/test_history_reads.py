"""PublishedHistory reads the files that may hold rows alive at the instants asked, not a
NameServer's whole history: checked on a history published in three windows (several files per
table and NameServer), against a scan of every file of the published versions."""

from __future__ import annotations

import pyarrow.dataset as pads
import pytest

import nsreplay.storage.stored_table as stored
from nsreplay.history import PublishedHistory, build_snapshot
from nsreplay.storage import Warehouse, dataset
from schemas.gold import NAMESRV_EPOCHS

INTERVALS = ("topic_queue", "broker_addr", "cluster_addr", "broker_live", "filter_server", "order_topic")


def _alive_between(first: int, last: int) -> pads.Expression:
    return (pads.field("valid_from") <= last) & (pads.field("valid_to").is_null() | (pads.field("valid_to") > first))


@pytest.fixture(scope="module")
def history(windowed) -> tuple[PublishedHistory, Warehouse]:
    root, _ = windowed
    return PublishedHistory(root), Warehouse(root, None, "delta-rs")


def _opened(monkeypatch) -> list:
    """The files each read hands to pyarrow, as (table name, paths)."""
    seen: list = []
    real = stored.dataset

    def spy(spec, files, **kwargs):
        files = list(files)
        seen.append((spec.name, {f.path for f in files}))
        return real(spec, files, **kwargs)

    monkeypatch.setattr(stored, "dataset", spy)
    return seen


def _all_rows(warehouse: Warehouse, h: PublishedHistory, namesrv: str, first: int, last: int) -> dict:
    """Every published row of ``namesrv`` alive in [first, last], from every file of the versions."""
    out = {}
    for spec in h._stored.values():
        files = warehouse.files(spec.spec, h.versions[spec.spec.name])
        condition = pads.field("namesrv") == namesrv
        if spec.spec is not NAMESRV_EPOCHS:
            condition = condition & _alive_between(first, last)
        out[spec.spec.name] = dataset(spec.spec, files).to_table(filter=condition)
    return out


def test_snapshot_at_opens_only_the_files_that_may_hold_the_instant(history, windowed, monkeypatch) -> None:
    h, warehouse = history
    _, ends = windowed
    namesrv = h.coverage()[0].namesrv
    t = h.coverage()[0].from_ts + (ends[0] - h.coverage()[0].from_ts) // 2  # inside the first window
    seen = _opened(monkeypatch)
    snap = h.snapshot_at(namesrv, t)
    monkeypatch.undo()

    assert snap == build_snapshot(_all_rows(warehouse, h, namesrv, t, t), t)
    skipped_somewhere = False
    for name, opened in seen:
        spec = h._stored[name].spec
        every = {f.path for f in warehouse.files(spec, h.versions[name]) if f.partition_values["namesrv"] == namesrv}
        assert opened <= every, name
        if spec is NAMESRV_EPOCHS:
            assert opened == every
            continue
        # a file left out holds no row alive at t: the pruning loses nothing
        left_out = [f for f in warehouse.files(spec, h.versions[name]) if f.path in every - opened]
        if left_out:
            rows = dataset(spec, left_out).to_table(filter=(pads.field("namesrv") == namesrv) & _alive_between(t, t))
            assert rows.num_rows == 0, name
            skipped_somewhere = True
    assert {name for name, _ in seen} >= {f"gold.{n}_intervals" for n in INTERVALS} | {NAMESRV_EPOCHS.name}
    # the later windows' files (rows that begin after t) are not opened
    assert skipped_somewhere


def test_snapshots_at_reads_the_rows_alive_between_its_instants_once(history, windowed, monkeypatch) -> None:
    h, warehouse = history
    _, ends = windowed
    cov = h.coverage()[-1]
    instants = [ends[0] + 1, ends[0] + 60_000, ends[1]]
    seen = _opened(monkeypatch)
    walked = list(h.snapshots_at(cov.namesrv, instants))
    monkeypatch.undo()

    assert len(seen) == len(h._stored)  # one read per table, whatever the number of instants
    rows = _all_rows(warehouse, h, cov.namesrv, instants[0], instants[-1])
    assert walked == [
        (t, build_snapshot({name: table if name == NAMESRV_EPOCHS.name else table.filter(_alive_between(t, t)) for name, table in rows.items()}, t))
        for t in instants
    ]


def test_a_history_at_a_path_that_does_not_exist_says_so_not_unpublished(tmp_path, monkeypatch) -> None:
    """A relative path is read from the working directory (a notebook in notebooks/ asking for
    "warehouse"): the error names the missing directory, not an empty warehouse."""
    import pytest

    from nsreplay.history import NotPublishedError, PublishedHistory

    monkeypatch.chdir(tmp_path)
    with pytest.raises(NotPublishedError, match=rf"^warehouse: no such directory \(from {tmp_path}\)$"):
        PublishedHistory("warehouse")
    (tmp_path / "warehouse").mkdir()
    with pytest.raises(NotPublishedError, match=r"^warehouse: nothing has been published yet"):
        PublishedHistory("warehouse")
