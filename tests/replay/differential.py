"""Differential comparison helpers: the published gold history against the reference model.

Three comparisons, each with the model run over each whole NameServer (``NamesrvReplay.steps``: every
record the ingest accepts, :func:`capture_records`, and every scan tick, with the state right after it):

* :func:`compare_every_tick` - the published state against the model's at every scan tick (whole
  snapshot, settings and every route answer) and at every other instant it can change: after each
  distinct record ``ts``, one millisecond before it, and at every published interval boundary;
* :func:`compare_changes` - ``gold.route_changes`` and the interval tables (values and
  ``start_cause``/``end_cause``), whole, against the rows the model's steps imply;
* :func:`compare_keyframes` - every ``gold.keyframes`` instant, decoded, against the model's snapshot.
"""

from __future__ import annotations

import json
import re
import zlib
from bisect import bisect_right
from collections import Counter
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, NamedTuple

from nsreplay.config import Settings, load_settings
from nsreplay.history import PublishedHistory, build_snapshot
from nsreplay.model import ROUTE_TABLES, BrokerData, BrokerLiveInfo, DataVersion, FrozenDict, QueueData, Snapshot, route_info
from nsreplay.model.replay import NamesrvReplay, Step, group_by_namesrv
from pipelines.ingest.capture_files import list_capture_files, open_capture
from pipelines.ingest.capture_reader import read_capture_raw
from pipelines.ingest.records import LineParser
from pipelines.ingest.run import parse_options
from pipelines.ingest.transforms import read_line_row
from pipelines.quality.rules import register_body_problem
from schemas.gold import (
    BROKER_ADDR_INTERVALS,
    BROKER_LIVE_INTERVALS,
    CLUSTER_ADDR_INTERVALS,
    FILTER_SERVER_INTERVALS,
    INTERVAL_TABLES,
    KEYFRAMES,
    NAMESRV_EPOCHS,
    ORDER_TOPIC_INTERVALS,
    ROUTE_CHANGES,
    TOPIC_QUEUE_INTERVALS,
)

INTERVAL_SPECS = (TOPIC_QUEUE_INTERVALS, BROKER_ADDR_INTERVALS, CLUSTER_ADDR_INTERVALS, BROKER_LIVE_INTERVALS, FILTER_SERVER_INTERVALS, ORDER_TOPIC_INTERVALS)


def quarantined_lines(paths: Iterable[Path], settings: Settings) -> dict[tuple[str, int], str]:
    """(file, line number) -> reason of every line of ``paths`` that the ingest quarantines instead of
    accepting into ``silver.events``. The verdict is the ingest's own, made by the pure functions its
    Spark tasks call (``read_capture_raw``, then ``read_line_row``: the parser, the register body
    rules and the row rules), so it covers every reason it has, not only ``crc_mismatch``. Lines are
    numbered from 1 as :func:`capture_records` numbers them."""
    options = parse_options(settings)
    limits = dict(max_queue_nums=options.max_queue_nums, max_perm=options.max_perm)
    # one parser for every file: what it remembers makes it faster, never changes a verdict (ParserMemory)
    parser = LineParser(options.limits, lambda body: register_body_problem(body, **limits))
    reasons: dict[tuple[str, int], str] = {}
    for path in paths:
        lines = read_capture_raw(str(path), open_capture, max_line_bytes=settings.ingest.max_line_bytes, keep_bytes=options.keep_bytes)
        for line in lines:
            row = read_line_row(parser, str(path), line, options, set())
            if row["status"] != "accepted":
                reasons[(str(path), line.line_no)] = row["reason"]
    return reasons


#: How far before the byte where a member's damage showed the ingest's reader looks for the next
#: member (``capture_reader.RESYNC_LOOKBACK_BYTES``; restated here, a rule of the reader's contract).
RESYNC_LOOKBACK = 64 * 1024
_NONZERO = re.compile(rb"[^\0]")  # where zero padding, or a hole of zeros, ends
_LINE_ENDS = re.compile(rb"\n|\0+")  # a newline, or a hole in the text


#: Where a gzip member can start (RFC 1952): the magic, method 8 (deflate), no reserved flag bit; or
#: the magic and the method cut by the end of the file.
_MEMBER_HEADER = re.compile(rb"\x1f\x8b\x08(?:[\x00-\x1f]|\Z)")


class Inflated(NamedTuple):
    """What a gzip file reads as (``data``); ``failures``: for each member that failed its check
    (deflate data that does not decode, a trailer that does not match, a member found after damage or
    a gap and cut before its check) and each hole of zeros after a member, the offsets in ``data``
    where its output began and where it stopped, in order; ``plain``: for each gap after a member
    (bytes that start no member, after zeros or not), the offsets in ``data`` of its bytes, which the
    reader passes on as they are."""

    data: bytes
    failures: tuple[tuple[int, int], ...]
    plain: tuple[tuple[int, int], ...] = ()


def _inflated(data: bytes) -> Inflated:
    """What a gzip stream of (possibly) several members inflates to, fed one byte at a time so that
    every byte before the damage counts, going on after damage as the reader's contract says: at the
    first ``1f 8b`` after the failed member's first byte and no more than :data:`RESYNC_LOOKBACK`
    before the byte that raised. Zero bytes after a member up to the end are padding; a gap after a
    member (zeros with more after them, or a first byte other than the magic's) runs from its first
    non-zero byte to the next member header (or the end), and its bytes are output as they are
    (``plain``); its zeros, if any, are a failure with no output. Deliberately not the ingest's reader
    (slow, and only for test captures)."""
    out = bytearray()
    failures: list[tuple[int, int]] = []
    plain: list[tuple[int, int]] = []
    at, found = 0, False
    while at < len(data):
        start, began, member = at, len(out), zlib.decompressobj(wbits=31)
        try:
            while at < len(data) and not member.eof:
                out += member.decompress(data[at:at + 1])
                at += 1
        except zlib.error:
            failures.append((began, len(out)))
            at = data.find(b"\x1f\x8b", max(start + 1, at + 1 - RESYNC_LOOKBACK))
            if at < 0:
                break
            found = True
            continue
        if not member.eof:  # cut: a member found after damage was never checked
            if found:
                failures.append((began, len(out)))
            break
        found = False
        nonzero = _NONZERO.search(data, at)
        if nonzero is None:
            break  # the end, or zero padding up to it
        gap = nonzero.start()  # the first byte after any zeros
        if gap > at or data[gap] != 0x1F:  # a hole of zeros, or bytes that start no member
            if gap > at:
                failures.append((len(out), len(out)))
            header = _MEMBER_HEADER.search(data, gap)
            end = len(data) if header is None else header.start()
            plain.append((len(out), len(out) + end - gap))
            out += data[gap:end]
            if header is None:
                break
            at, found = end, True
    return Inflated(bytes(out), tuple(failures), tuple(plain))


def damaged_lines(data: bytes, failures: tuple[tuple[int, int], ...]) -> set[int]:
    """The numbers of the lines of the inflated ``data`` that a failed member (:class:`Inflated`)
    may have garbled: each line holding a byte of its output, its newline included, and the line in
    progress where its output stopped (the next bytes come from the next member found, and may start
    in the middle of a line)."""
    return {no for began, stop in failures for no in range(data.count(b"\n", 0, began) + 1, data.count(b"\n", 0, stop) + 2)}


def plain_lines(data: bytes, plain: tuple[tuple[int, int], ...]) -> set[int]:
    """The numbers of the lines of ``data`` holding a byte of a gap after a gzip member
    (:class:`Inflated`), its newline included."""
    return {no for began, stop in plain if stop > began for no in range(data.count(b"\n", 0, began) + 1, data.count(b"\n", 0, stop - 1) + 2)}


def text_lines(data: bytes) -> list[bytes | None]:
    """The lines of a file's text as the reader's contract numbers them: split at newlines (no line
    after the last one); a run of zero bytes ends the line in progress if it holds a byte, and is a
    line of its own, ``None`` here (a hole: no record)."""
    lines: list[bytes | None] = []
    start = 0
    for end in _LINE_ENDS.finditer(data):
        if end.group() == b"\n" or end.start() > start:
            lines.append(data[start:end.start()])
        if end.group() != b"\n":
            lines.append(None)
        start = end.end()
    if start < len(data):
        lines.append(data[start:])
    return lines


def capture_records(root: Path, settings: Settings | None = None) -> list[dict[str, Any]]:
    """Every record of the capture that the ingest accepts, read independently of the ingest (json,
    file, line), from the files the ingest lists (``list_capture_files``: nested directories, plain
    and gzip, hidden files left out).

    Only the verdict on each line by itself is the ingest's word (:func:`quarantined_lines`, with
    ``settings``, by default the job's): a quarantined line never reaches silver, so the replay never
    sees it and ``gold.route_changes`` gives it no ``record_rank`` (schemas/gold.py); the model must not
    see it either. A line the ingest's reader does not yield at all is kept, so a reader that loses
    lines shows as a difference. A damaged gzip file gives the lines it inflates to (:func:`_inflated`),
    less those a failed member may have garbled (:func:`damaged_lines`) and those holding bytes of a
    gap between members (:func:`plain_lines`): the ingest quarantines those, and a cut line. A run of zero bytes in a file's text is a line of its own, and ends the line it
    cuts (:func:`text_lines`)."""
    paths = [Path(f.path) for f in list_capture_files(str(root))]
    quarantined = quarantined_lines(paths, settings or load_settings())
    records = []
    for path in paths:
        data, damaged = path.read_bytes(), set()
        if data[:2] == b"\x1f\x8b":
            data, failures, plain = _inflated(data)
            damaged = damaged_lines(data, failures) | plain_lines(data, plain)
            assert not damaged or b"\0" not in data, "damaged_lines numbers lines by newlines only"
        for line_no, raw in enumerate(text_lines(data), start=1):
            if raw is None or (str(path), line_no) in quarantined or line_no in damaged:
                continue
            record = json.loads(raw)
            record["_file"], record["_line"] = str(path), line_no
            records.append(record)
    return records


def keys_reversed(value: Any) -> Any:
    """``value`` with the keys of every object in it in reverse order: the same JSON value, spelled
    another way (a duplicate of a record, as capture-format.md counts them)."""
    return {k: keys_reversed(v) for k, v in reversed(value.items())} if isinstance(value, dict) else value


def same_routes(gold: Any, model: Any) -> bool:
    """The rendered GET_ROUTEINFO_BY_TOPIC answers (standard and legacy) agree for every topic."""
    for topic in set(gold.topicQueueTable) | set(model.topicQueueTable):
        for version in (121, 401):
            if route_info(gold, topic, request_version=version) != route_info(model, topic, request_version=version):
                return False
    return True


# The interval tables of render.ROUTE_TABLES: what a route answer is made of, with the profile and config.
ROUTE_SPECS = frozenset({TOPIC_QUEUE_INTERVALS.name, BROKER_ADDR_INTERVALS.name, FILTER_SERVER_INTERVALS.name, ORDER_TOPIC_INTERVALS.name})


def gold_snapshots(history: PublishedHistory, namesrv: str, ticks: list[int]) -> Iterator[tuple[int, Any, frozenset[str]]]:
    """(tick, the published state at the tick, the interval tables whose alive rows changed since the
    previous tick), by a sweep over the interval boundaries."""
    events: list[tuple[int, int, str, int, dict[str, Any]]] = []
    for spec in INTERVAL_SPECS:
        for i, row in enumerate(history.rows(spec, namesrv)):
            events.append((row["valid_from"], 1, spec.name, i, row))
            if row["valid_to"] is not None:
                events.append((row["valid_to"], 0, spec.name, i, row))
    events.sort(key=lambda e: (e[0], e[1]))
    epochs = history.rows(NAMESRV_EPOCHS, namesrv)
    alive: dict[str, dict[int, dict[str, Any]]] = {spec.name: {} for spec in INTERVAL_SPECS}
    at = 0
    for tick in ticks:
        touched: set[str] = set()
        while at < len(events) and events[at][0] <= tick:
            _, is_start, table, i, row = events[at]
            touched.add(table)
            if is_start:
                alive[table][i] = row
            else:
                alive[table].pop(i, None)
            at += 1
        rows = {name: list(rows.values()) for name, rows in alive.items()}
        rows[NAMESRV_EPOCHS.name] = epochs
        yield tick, build_snapshot(rows, tick), frozenset(touched)


def _same_setup(now: Any, before: Any) -> bool:
    return before is not None and now.profile == before.profile and now.config == before.config


def model_routes_unchanged(now: Any, before: Any) -> bool:
    """Every route answer of model snapshot ``now`` is the one of ``before``: same profile and config,
    and the very same route table objects (the model hands out a new one for any table it touched)."""
    return _same_setup(now, before) and all(getattr(now, t) is getattr(before, t) for t in ROUTE_TABLES)


def gold_routes_unchanged(now: Any, before: Any, touched: frozenset[str]) -> bool:
    """Every route answer of published snapshot ``now`` is the one of ``before``: same profile and
    config, and no interval of a route table began or ended in between (``touched``)."""
    return _same_setup(now, before) and not touched & ROUTE_SPECS


# ------------------------------------------------------------------------------ the model's steps


def model_steps(records: Iterable[Mapping[str, Any]], until: int, settings: Settings) -> dict[str, list[Step]]:
    """Every step (record applied, scan tick) of every NameServer up to ``until``, with the state after
    it: ``NamesrvReplay.steps`` over each whole NameServer, with the job's defaults for it. A
    NameServer whose first record is after ``until`` has no step and is left out."""
    def run(namesrv: str, own: list[Mapping[str, Any]]) -> NamesrvReplay:
        profile, config = settings.replay.defaults_for(namesrv)
        return NamesrvReplay(namesrv, own, default_profile=profile, default_config=config)

    steps = {namesrv: list(run(namesrv, own).steps(until)) for namesrv, own in sorted(group_by_namesrv(records).items())}
    return {namesrv: own for namesrv, own in steps.items() if own}


# ------------------------------------------------------------------------------ table entries
# A snapshot as entries ``(table, key) -> value``, one per row its interval table would hold: topic
# routes by (topic, brokerName), cluster membership by (cluster, brokerName) (value True), the other
# tables by their own key. Values are never None, so None stands for "absent".

TABLES = tuple(INTERVAL_TABLES)  # topicQueueTable, brokerAddrTable, clusterAddrTable, brokerLiveTable, filterServerTable, orderTopicConf


def _table_entries(table: str, mapping: Mapping[Any, Any]) -> Iterator[tuple[Any, Any]]:
    if table == "topicQueueTable":
        for topic, by_name in mapping.items():
            for name, queue in by_name.items():
                yield (topic, name), queue
    elif table == "clusterAddrTable":
        for cluster, names in mapping.items():
            for name in names:
                yield (cluster, name), True
    else:
        yield from mapping.items()


def snapshot_entries(snapshot: Snapshot) -> dict[tuple[str, Any], Any]:
    """Every entry of the six tables of ``snapshot`` (orderTopicConf included)."""
    return {(table, key): value for table in TABLES for key, value in _table_entries(table, getattr(snapshot, table))}


def entry_of(snapshot: Snapshot, table: str, key: Any) -> Any:
    """The value of one entry of ``snapshot``, None when absent."""
    if table == "topicQueueTable":
        return snapshot.topicQueueTable.get(key[0], {}).get(key[1])
    if table == "clusterAddrTable":
        return True if key[1] in snapshot.clusterAddrTable.get(key[0], ()) else None
    return getattr(snapshot, table).get(key)


def _diff(table: str, old: Mapping[Any, Any], new: Mapping[Any, Any]) -> Iterator[tuple[str, Any, Any, Any]]:
    for key, value in new.items():
        before = old.get(key)
        if before != value:
            yield table, key, before, value
    for key, value in old.items():
        if key not in new:
            yield table, key, value, None


def changed_entries(before: Snapshot, after: Snapshot) -> Iterator[tuple[str, Any, Any, Any]]:
    """(table, key, value before, value after) of every entry that differs (None: absent). Tables and
    topic maps shared by the two snapshots (the model hands out a new one only for what changed) are
    skipped without looking inside."""
    for table in TABLES:
        old_t, new_t = getattr(before, table), getattr(after, table)
        if old_t is new_t:
            continue
        if table in ("topicQueueTable", "clusterAddrTable"):
            for outer in old_t.keys() | new_t.keys():
                o, n = old_t.get(outer), new_t.get(outer)
                if o is not n:
                    yield from _diff(table, dict(_table_entries(table, {outer: o} if o else {})), dict(_table_entries(table, {outer: n} if n else {})))
        else:
            yield from _diff(table, old_t, new_t)


def empty_snapshot(profile: str) -> Snapshot:
    """A NameServer's state before its first record."""
    return Snapshot(profile, FrozenDict(), FrozenDict(), FrozenDict(), FrozenDict(), FrozenDict())  # type: ignore[arg-type]


# ------------------------------------------------------------------------------ every tick, every instant


def compare_every_tick(capture: Path, warehouse_root: str, settings: Settings | None = None) -> tuple[int, int, list[str]]:
    """(states compared, mismatches, first differences) between the model and the published gold: at
    every scan tick the whole snapshot, the settings and every route answer; and every table at every
    other instant the state can change at (see :func:`compare_instants`). ``settings``: the job's
    (by default those of the environment)."""
    settings = settings or load_settings()
    history = PublishedHistory(warehouse_root)
    covered_to = max(c.to_ts for c in history.coverage())
    oracle = model_steps(capture_records(capture, settings), covered_to, settings)
    assert sorted(oracle) == [c.namesrv for c in history.coverage()]
    compared, mismatches, notes = 0, 0, []
    for namesrv, steps in oracle.items():
        states = [s for s in steps if s.record is None]  # the scans: NamesrvReplay.run's ticks
        ticks = [s.ts for s in states]
        # the published tick grids, each cut at its epoch's end (a restart within the first scan
        # interval leaves an epoch without any tick), must give exactly the model's ticks
        published_ticks = sorted(
            tick
            for r in history.rows(NAMESRV_EPOCHS, namesrv)
            for tick in range(r["first_tick"], min(r["end_ts"] - 1, covered_to) + 1, r["tick_interval"])
        )
        assert published_ticks == ticks, f"{namesrv}: published ticks {published_ticks[:3]}... model ticks {ticks[:3]}..."
        previous_gold = previous_model = None
        routes_agreed = False
        for state, (tick, gold, touched) in zip(states, gold_snapshots(history, namesrv, ticks)):
            compared += 1
            # Rendering every topic's answer on both sides at every tick is the bulk of the cost; an
            # answer is a pure function of its inputs, so when neither side's inputs changed since a
            # tick whose answers agreed, they still agree.
            unchanged = routes_agreed and gold_routes_unchanged(gold, previous_gold, touched) and model_routes_unchanged(state.snapshot, previous_model)
            routes_agreed = unchanged or same_routes(gold, state.snapshot)
            previous_gold, previous_model = gold, state.snapshot
            if gold != state.snapshot or gold.config != state.snapshot.config or not routes_agreed:
                mismatches += 1
                if len(notes) < 3:
                    want, got = state.snapshot.to_plain(), gold.to_plain()
                    diff = {t: (want[t], got[t]) for t in want if want[t] != got[t]}
                    notes.append(f"{namesrv} tick {tick}: {str(diff)[:1500]}")
        instants, different, instant_notes = compare_instants(history, namesrv, steps)
        compared += instants
        mismatches += different
        notes += instant_notes[: max(0, 6 - len(notes))]
    return compared, mismatches, notes


def published_entries(history: PublishedHistory, namesrv: str) -> list[tuple[int, int | None, tuple[str, Any], Any]]:
    """(valid_from, valid_to, (table, key), value) of every published interval row of ``namesrv``,
    each row decoded as the reader decodes it (``build_snapshot`` of that row alone)."""
    epochs = history.rows(NAMESRV_EPOCHS, namesrv)
    nothing: dict[str, Any] = {spec.name: [] for spec in INTERVAL_SPECS}
    out = []
    for spec in INTERVAL_SPECS:
        for row in history.rows(spec, namesrv):
            (entry, value), = snapshot_entries(build_snapshot({**nothing, spec.name: [row], NAMESRV_EPOCHS.name: epochs}, row["valid_from"])).items()
            out.append((row["valid_from"], row["valid_to"], entry, value))
    return out


def compare_instants(history: PublishedHistory, namesrv: str, steps: list[Step]) -> tuple[int, int, list[str]]:
    """(instants compared, instants whose states differ, first differences): every table, the profile
    and the settings of the published state against the model's at every instant of the covered range
    where either side can change - each step's ``ts`` (after all the records of that ts, and the scan
    when a tick falls on it: the model's ``at_instant`` states) and one millisecond before it, and each
    published ``valid_from``/``valid_to``. Both sides are constant between those instants, so a change
    the scan ticks never see (a broker closed and registered again between two ticks) is compared too.

    Incremental, so that tens of thousands of instants stay cheap: entries touched since the previous
    instant (by either side) are compared, and the set of entries that differ is kept, so an instant
    is a mismatch exactly when its whole states differ."""
    cov = next(c for c in history.coverage() if c.namesrv == namesrv)
    at_instant = [s for s in steps if s.at_instant]
    events = []  # (instant, 0 end / 1 start, entry, row number, value)
    for i, (valid_from, valid_to, entry, value) in enumerate(published_entries(history, namesrv)):
        events.append((valid_from, 1, entry, i, value))
        if valid_to is not None:
            events.append((valid_to, 0, entry, i, value))
    events.sort(key=lambda e: (e[0], e[1]))
    instants = sorted(
        t for t in {s.ts for s in at_instant} | {s.ts - 1 for s in at_instant} | {e[0] for e in events}
        if cov.from_ts <= t <= cov.to_ts
    )
    epochs = sorted(history.rows(NAMESRV_EPOCHS, namesrv), key=lambda e: e["start_ts"])
    starts = [e["start_ts"] for e in epochs]
    setups: dict[int, tuple[str, Any]] = {}
    nothing = {spec.name: [] for spec in INTERVAL_SPECS}

    def published_setup(t: int) -> tuple[str, Any]:
        """The published profile and settings at ``t`` (the reader's choice of epoch)."""
        index = bisect_right(starts, t)
        if index not in setups:
            snapshot = build_snapshot({**nothing, NAMESRV_EPOCHS.name: epochs}, t)
            setups[index] = (snapshot.profile, snapshot.config)
        return setups[index]

    model = empty_snapshot(steps[0].snapshot.profile if steps else cov.profile)
    alive: dict[tuple[str, Any], dict[int, Any]] = {}
    differing: dict[tuple[str, Any], tuple[Any, list[Any]]] = {}
    step_ts = {s.ts for s in at_instant}
    mismatches, notes = 0, []
    m = g = 0
    for t in instants:
        touched: set[tuple[str, Any]] = set()
        while m < len(at_instant) and at_instant[m].ts <= t:
            touched.update((table, key) for table, key, _, _ in changed_entries(model, at_instant[m].snapshot))
            model = at_instant[m].snapshot
            m += 1
        while g < len(events) and events[g][0] <= t:
            _, is_start, entry, i, value = events[g]
            rows = alive.setdefault(entry, {})
            if is_start:
                rows[i] = value
            else:
                rows.pop(i, None)
            touched.add(entry)
            g += 1
        for entry in touched:
            want, got = entry_of(model, *entry), list(alive.get(entry, {}).values())
            if got == ([] if want is None else [want]):
                differing.pop(entry, None)
            else:
                differing[entry] = (want, got)
        setup = (model.profile, model.config)
        if differing or published_setup(t) != setup:
            mismatches += 1
            if len(notes) < 3:
                when = "after the records/scan of that ts" if t in step_ts else "1 ms before a model step" if t + 1 in step_ts else "a published interval boundary"
                shown = {f"{table} {key!r}": {"model": want, "published": got} for (table, key), (want, got) in list(differing.items())[:3]}
                if published_setup(t) != setup:
                    shown["profile/config"] = {"model": setup, "published": published_setup(t)}
                notes.append(f"{namesrv} at {t} ({when}): {str(shown)[:1500]}")
    return len(instants), mismatches, notes


# ------------------------------------------------------------------------------ change log and intervals
# The canonical JSON of gold.route_changes / gold.keyframes keys and values, as documented (schemas.gold
# and the module docstring of pipelines.replay.unit_replay): sorted keys, compact; dataclasses as objects
# of their fields, map keys as strings; a key is a JSON array: [topic, brokerName], [brokerName],
# [cluster, brokerName], [cluster or null (4.9), brokerAddr] for the live and filter tables, [topic];
# a cluster membership's value is {}.

_LIVE_TABLES = ("brokerLiveTable", "filterServerTable")


def _plain(value: Any) -> Any:
    if is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value


def canonical_json(value: Any) -> str:
    return json.dumps(_plain(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def key_json(table: str, key: Any) -> str:
    if table in _LIVE_TABLES:
        return canonical_json(list(key) if isinstance(key, tuple) else [None, key])
    return canonical_json(list(key) if isinstance(key, tuple) else [key])


def value_json(table: str, value: Any) -> str:
    return "{}" if table == "clusterAddrTable" else canonical_json(value)


def decode_entry(table: str, key_text: str, value_text: str) -> tuple[Any, Any]:
    """(key, value) of a model table from the canonical JSON of a keyframe (or change) row."""
    key, value = json.loads(key_text), json.loads(value_text)
    if table in _LIVE_TABLES:
        key = key[1] if key[0] is None else (key[0], key[1])
    else:
        key = tuple(key) if len(key) > 1 else key[0]
    if table == "topicQueueTable":
        return key, QueueData(**value)
    if table == "brokerAddrTable":
        return key, BrokerData(**{**value, "brokerAddrs": FrozenDict({int(i): a for i, a in value["brokerAddrs"].items()})})
    if table == "clusterAddrTable":
        assert value == {}, f"cluster membership {key!r} with value {value_text}"
        return key, True
    if table == "brokerLiveTable":
        return key, BrokerLiveInfo(**{**value, "dataVersion": DataVersion(**value["dataVersion"])})
    if table == "filterServerTable":
        return key, tuple(value)
    assert table == "orderTopicConf" and isinstance(value, str), (table, value_text)
    return key, value


def snapshot_from_entries(entries: Mapping[tuple[str, Any], Any], profile: str, config: Any) -> Snapshot:
    """The Snapshot holding exactly ``entries`` (the inverse of :func:`snapshot_entries`)."""
    tables: dict[str, dict[Any, Any]] = {table: {} for table in TABLES}
    for (table, key), value in entries.items():
        if table == "topicQueueTable":
            tables[table].setdefault(key[0], {})[key[1]] = value
        elif table == "clusterAddrTable":
            tables[table].setdefault(key[0], set()).add(key[1])
        else:
            tables[table][key] = value
    return Snapshot(
        profile,  # type: ignore[arg-type]
        FrozenDict({t: FrozenDict(q) for t, q in tables["topicQueueTable"].items()}),
        FrozenDict(tables["brokerAddrTable"]),
        FrozenDict({c: frozenset(n) for c, n in tables["clusterAddrTable"].items()}),
        FrozenDict(tables["brokerLiveTable"]),
        FrozenDict(tables["filterServerTable"]),
        FrozenDict(tables["orderTopicConf"]),
        config,
    )


def interval_columns(table: str, key: Any, value: Any) -> dict[str, Any]:
    """The key and value columns of the typed gold interval table of ``table`` for one entry."""
    if table == "topicQueueTable":
        return {"topic": key[0], "broker_name": key[1], "read_queue_nums": value.readQueueNums,
                "write_queue_nums": value.writeQueueNums, "perm": value.perm, "topic_sys_flag": value.topicSysFlag}
    if table == "brokerAddrTable":
        return {"broker_name": key, "cluster": value.cluster, "broker_addrs": dict(value.brokerAddrs),
                "enable_acting_master": value.enableActingMaster, "zone_name": value.zoneName}
    if table == "clusterAddrTable":
        return {"cluster": key[0], "broker_name": key[1]}
    cluster, addr = key if isinstance(key, tuple) else (None, key)
    if table == "brokerLiveTable":
        dv = value.dataVersion
        return {"cluster": cluster, "broker_addr": addr, "last_update_ts": value.lastUpdateTimestamp,
                "heartbeat_timeout_ms": value.heartbeatTimeoutMillis, "dv_state_version": dv.stateVersion,
                "dv_timestamp": dv.timestamp, "dv_counter": dv.counter, "conn": value.conn, "ha_server_addr": value.haServerAddr}
    if table == "filterServerTable":
        return {"cluster": cluster, "broker_addr": addr, "filter_servers": list(value)}
    return {"topic": key, "order_conf": value}


def _tick_of_each_step(steps: list[Step]) -> list[int | None]:
    """For each step, the first scan tick whose state shows what it changed: the scan itself for a
    scan; for a record, the next scan of the grid in force (possibly after the covered range), or
    None when the NameServer restarts before that scan runs (the old grid's scan never happens)."""
    ticks: list[int | None] = [None] * len(steps)
    upcoming: tuple[str, int] | None = None  # ("tick", ts) or ("restart", ts) of the nearest later step of either kind
    for i in range(len(steps) - 1, -1, -1):
        step = steps[i]
        if step.record is None:
            ticks[i] = step.ts
            upcoming = ("tick", step.ts)
            continue
        if upcoming is None:
            ticks[i] = step.next_tick
        elif upcoming[0] == "tick":
            assert upcoming[1] == step.next_tick, (step, upcoming)
            ticks[i] = upcoming[1]
        if step.record.kind == "namesrv_start":
            upcoming = ("restart", step.ts)
    return ticks


#: The requests that can change a route table (semantics spec sections 2, 3, 5 and 6): registration,
#: unregistration, heartbeats, data-version queries, the admin requests and the order-topic KV.
ROUTE_REQUESTS = frozenset({103, 104, 904, 322, 205, 327, 216, 217, 100, 102})


def route_changing(record: Any) -> bool:
    """A record ``gold.route_changes`` ranks: a route request, a channel event or a (re)start (read-only
    requests and responses take no ``record_rank``, schemas/gold.py)."""
    return record.kind in ("channel", "namesrv_start") or (record.kind == "request" and record.code in ROUTE_REQUESTS)


def expected_history(steps_by_namesrv: Mapping[str, list[Step]], run_id: str) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """(gold.route_changes rows, interval rows by interval table) the model's steps imply.

    A change row for each entry a step changed, with the step's ``ts``; phase 0 and ``record_rank``
    (the record's place among the NameServer's route-changing records of that ``ts``, from 1:
    :func:`route_changing`; the steps must be of the accepted records only, as
    :func:`capture_records` gives them, since a quarantined record takes no rank) and the record's
    outcome cause for a record, phase 1 and the removals' cause for a scan; ``tick_ts`` the first
    scan tick showing it. An interval for each value an entry held for a non-zero time:
    ``[ts of the change that set it, ts of the next change of that entry)``, the two changes' causes."""
    changes: list[dict[str, Any]] = []
    intervals: dict[str, list[dict[str, Any]]] = {spec.name: [] for spec in INTERVAL_SPECS}
    for namesrv, steps in steps_by_namesrv.items():
        tick_ts = _tick_of_each_step(steps)
        before = empty_snapshot(steps[0].snapshot.profile)
        texts: dict[tuple[str, Any], str] = {}  # a value's JSON: each is "after" once, then "before"

        def text(table: str, value: Any) -> str | None:
            if value is None:
                return None
            found = texts.get((table, value))
            if found is None:
                found = texts[(table, value)] = value_json(table, value)
            return found

        opened: dict[tuple[str, Any], tuple[int, Any, str]] = {}  # entry -> (valid_from, value, start cause)
        rank_ts, rank = None, 0

        def close(entry: tuple[str, Any], end: tuple[int, str] | None) -> None:
            """The interval of the value ``entry`` holds ends (``end``: ts and cause; None: still open)."""
            valid_from, value, start_cause = opened.pop(entry)
            if end is not None and end[0] == valid_from:
                return  # replaced within its own ts: never the value at any instant
            table, key = entry
            intervals[INTERVAL_TABLES[table].name].append({
                "namesrv": namesrv, **interval_columns(table, key, value), "valid_from": valid_from,
                "valid_to": None if end is None else end[0], "start_cause": start_cause,
                "end_cause": None if end is None else end[1], "run_id": run_id,
            })

        for step, tick in zip(steps, tick_ts):
            if step.record is not None:
                if route_changing(step.record):
                    rank = rank + 1 if step.ts == rank_ts else 1
                    rank_ts = step.ts
                phase, record_rank, cause = 0, rank, step.record.outcome.cause
            else:
                phase, record_rank = 1, None
                causes = {r.cause for r in step.removals}
                cause = causes.pop() if len(causes) == 1 else f"scan removals {sorted(causes)}"
            for table, key, old, new in changed_entries(before, step.snapshot):
                changes.append({
                    "namesrv": namesrv, "ts": step.ts, "tick_ts": tick, "phase": phase, "record_rank": record_rank,
                    "table": table, "key": key_json(table, key), "op": "remove" if new is None else "put",
                    "before": text(table, old), "after": text(table, new),
                    "cause": cause, "run_id": run_id,
                })
                if (table, key) in opened:
                    close((table, key), (step.ts, cause))
                if new is not None:
                    opened[(table, key)] = (step.ts, new, cause)
            before = step.snapshot
        for entry in list(opened):
            close(entry, None)
    return changes, intervals


def assert_same_rows(expected: Any, published: Any, what: str) -> None:
    """chispa's whole-DataFrame equality (any row order); when it fails, an AssertionError naming the
    rows that differ (chispa's own message prints every row of both frames)."""
    from chispa import DataFramesNotEqualError, SchemasNotEqualError, assert_df_equality

    try:
        assert_df_equality(expected, published, ignore_row_order=True, ignore_nullable=True)
    except (DataFramesNotEqualError, SchemasNotEqualError) as exc:
        want, got = Counter(map(tuple, expected.collect())), Counter(map(tuple, published.collect()))
        missing, extra = want - got, got - want
        raise AssertionError(
            f"{what}: {sum(missing.values())} expected rows not published, e.g. {sorted(missing, key=repr)[:3]}; "
            f"{sum(extra.values())} published rows not expected, e.g. {sorted(extra, key=repr)[:3]}"
            + ("" if missing or extra else f"; {type(exc).__name__}: {str(exc)[:2000]}")
        ) from None


def compare_changes(spark: Any, capture: Path, warehouse_root: str, settings: Settings | None = None) -> dict[str, Counter[str]]:
    """Assert that ``gold.route_changes`` and every interval table equal, whole, the rows the model
    implies (:func:`expected_history`); returns, per table, how many rows of each cause (the start
    cause for an interval) were compared. ``settings``: the job's (by default the environment's)."""
    from nsreplay.storage import Warehouse
    from published import plain

    settings = settings or load_settings()
    history = PublishedHistory(warehouse_root)
    covered_to = max(c.to_ts for c in history.coverage())
    changes, intervals = expected_history(model_steps(capture_records(capture, settings), covered_to, settings), history.run_id)
    warehouse = Warehouse(warehouse_root, spark, "delta-rs")
    compared = {}
    for spec, rows in ((ROUTE_CHANGES, changes), *((spec, intervals[spec.name]) for spec in INTERVAL_SPECS)):
        published = warehouse.read(spec, version=history.versions[spec.name]).select(*spec.schema.fieldNames())
        # one partition each (tens of thousands of rows at most): chispa's sort is then local, without
        # the sampling job and the shuffle of a distributed sort
        assert_same_rows(plain(spark.createDataFrame(rows, spec.schema)).coalesce(1), plain(published).coalesce(1), spec.name)
        compared[spec.name] = Counter(r["cause" if spec is ROUTE_CHANGES else "start_cause"] for r in rows)
    return compared


# ------------------------------------------------------------------------------ keyframes


def published_rows(warehouse_root: str, history: PublishedHistory, spec: Any) -> list[dict[str, Any]]:
    """Every row of ``spec`` at the version the latest publish names, read without Spark."""
    from nsreplay.storage import Warehouse, dataset

    warehouse = Warehouse(warehouse_root, None, "delta-rs")
    return dataset(spec, warehouse.files(spec, history.versions[spec.name])).to_table().to_pylist()


def compare_keyframes(capture: Path, warehouse_root: str) -> tuple[int, int, list[str]]:
    """(keyframes compared, mismatches, first differences): every published keyframe instant must be
    a keyframe tick of the model (every ``keyframe_every_ticks``-th scan tick of each NameServer run,
    its first included), and every keyframe tick's rows, decoded into a Snapshot, must equal the
    model's snapshot at that tick (a keyframe of empty tables has no rows)."""
    settings = load_settings()
    every = settings.replay.keyframe_every_ticks
    history = PublishedHistory(warehouse_root)
    covered_to = max(c.to_ts for c in history.coverage())
    oracle = model_steps(capture_records(capture), covered_to, settings)
    published: dict[tuple[str, int], dict[tuple[str, Any], Any]] = {}
    notes: list[str] = []
    mismatches = 0
    for row in published_rows(warehouse_root, history, KEYFRAMES):
        entries = published.setdefault((row["namesrv"], row["keyframe_ts"]), {})
        table, (key, value) = row["table"], decode_entry(row["table"], row["key"], row["value"])
        if (table, key) in entries:
            mismatches += 1
            notes.append(f"{row['namesrv']} keyframe {row['keyframe_ts']}: two rows for {table} {row['key']}")
        entries[(table, key)] = value
    expected: set[tuple[str, int]] = set()
    nothing = {spec.name: [] for spec in INTERVAL_SPECS}
    for namesrv, steps in oracle.items():
        epochs = history.rows(NAMESRV_EPOCHS, namesrv)
        index = 0
        for step in steps:
            if step.record is not None:
                index = 0 if step.record.kind == "namesrv_start" else index
                continue
            if index % every == 0:
                expected.add((namesrv, step.ts))
                setup = build_snapshot({**nothing, NAMESRV_EPOCHS.name: epochs}, step.ts)
                decoded = snapshot_from_entries(published.get((namesrv, step.ts), {}), setup.profile, setup.config)
                if decoded != step.snapshot:
                    mismatches += 1
                    if len(notes) < 3:
                        want, got = snapshot_entries(step.snapshot), snapshot_entries(decoded)
                        diff = {f"{t} {k!r}": (want.get((t, k)), got.get((t, k))) for t, k in want.keys() | got.keys() if want.get((t, k)) != got.get((t, k))}
                        notes.append(f"{namesrv} keyframe {step.ts}: {decoded.profile}/{step.snapshot.profile} {str(diff)[:1500]}")
            index += 1
    for instant in sorted(set(published) - expected):
        mismatches += 1
        notes.append(f"{instant[0]} keyframe at {instant[1]}, not a keyframe tick of the model")
    return len(expected), mismatches, notes[:6]
