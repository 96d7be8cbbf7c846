"""Replaying one replay unit of one NameServer: its ordered records in, change rows out.

The state machine is the reference model's :class:`~nsreplay.model.NameServer` (plain Python,
``(state, event) → state``); this module is the thin adapter that feeds it silver rows in the
NameServer's order, interleaves the scan ticks (semantics spec §4: records at a tick's ``ts`` first,
then the scan; a restart restarts the grid), and turns every change of state into change rows:

    {"ts", "phase" (0 record, 1 scan tick), "record_rank", "table", "key", "op" ("put"/"remove"),
     "before", "after", "cause", "carried" (False; True only for :meth:`UnitReplay.carried` rows)}

Keys and values are canonical JSON (sorted keys, compact); the key of each table is the part that
belongs to one broker group, so rows of different units never collide:

    topicQueueTable   [topic, brokerName]      QueueData
    brokerAddrTable   [brokerName]             BrokerData (brokerAddrs keys as strings)
    clusterAddrTable  [cluster, brokerName]    {} (membership)
    brokerLiveTable   [cluster|null, addr]     BrokerLiveInfo (cluster null for 4.9)
    filterServerTable [cluster|null, addr]     [filter server addresses]
    orderTopicConf    [topic]                  "brokerName:queueNum;…"
"""

from __future__ import annotations

import pickle
from dataclasses import fields, is_dataclass
from functools import lru_cache
from typing import Any, Iterable, Iterator, Mapping

import orjson

from nsreplay.model import NameServer, Snapshot
from nsreplay.protocol.register_body import DataVersion, RegisterBody, TopicConfig

TABLES = ("topicQueueTable", "brokerAddrTable", "clusterAddrTable", "brokerLiveTable", "filterServerTable", "orderTopicConf")


def _plain(value: object) -> object:
    """orjson's fallback: a dataclass as a dict of its fields (then sorted like any dict)."""
    names = _FIELDS.get(type(value))
    if names is None:
        if not is_dataclass(value):
            raise TypeError(f"cannot serialize {type(value).__name__}")
        names = _FIELDS[type(value)] = tuple(f.name for f in fields(value))
    return {name: getattr(value, name) for name in names}


_FIELDS: dict[type, tuple[str, ...]] = {}
_JSON_OPTIONS = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATACLASS


def _json(value: object) -> str:
    return orjson.dumps(value, default=_plain, option=_JSON_OPTIONS).decode("utf-8")


def _live_key(key: object) -> list[Any]:
    return [key[0], key[1]] if isinstance(key, tuple) else [None, key]


_MISSING = object()


@lru_cache(maxsize=1 << 16)
def _key_json(table: str, key: Any) -> str:
    """Canonical JSON of a table key (memoized: a unit's few keys change again and again)."""
    if table in ("brokerLiveTable", "filterServerTable"):
        return _json(_live_key(key))
    return _json(list(key) if isinstance(key, tuple) else [key])


def _value_json(table: str, value: Any) -> str:
    """Canonical JSON of a table value (dataclasses as objects; brokerAddrs keys as strings)."""
    if table == "clusterAddrTable":
        return "{}"
    return _json(value)


ValueTexts = dict[tuple[str, Any], tuple[Any, str]]
"""(table, key) → (the value last serialized for that entry, its JSON): the value an entry had before
a change is, as the very same object, the one serialized when it was put, so it is not serialized
again."""


def _diff_entries(
    table: str, old: Mapping[Any, Any], new: Mapping[Any, Any], texts: ValueTexts
) -> Iterator[tuple[str, str, str, str | None, str | None]]:
    """Changed entries of one table; values are compared as they are and serialized only if changed."""
    for key, value in new.items():
        prev = old.get(key, _MISSING)
        if prev is value or prev == value:
            continue
        before = None if prev is _MISSING else _text_of(table, key, prev, texts)
        after = _value_json(table, value)
        texts[(table, key)] = (value, after)
        yield table, _key_json(table, key), "put", before, after
    for key, value in old.items():
        if key not in new:
            yield table, _key_json(table, key), "remove", _text_of(table, key, value, texts), None
            texts.pop((table, key), None)


def _text_of(table: str, key: Any, value: Any, texts: ValueTexts) -> str:
    known = texts.get((table, key))
    return known[1] if known is not None and known[0] is value else _value_json(table, value)


def diff_snapshots(
    before: Snapshot, after: Snapshot, topics: Iterable[str] | None = None, texts: ValueTexts | None = None
) -> Iterator[tuple[str, str, str, str | None, str | None]]:
    """(table, key, op, before, after) for every entry that differs. Shared objects are skipped
    without looking inside (the model shares unchanged tables and per-topic maps between snapshots);
    ``topics``, when given, holds every topic whose QueueData may differ (see
    ``NameServer.changed_topics_since``), so the others are not visited. ``texts``, when given, is kept
    across calls (consecutive snapshots) to serialize each value once."""
    texts = {} if texts is None else texts
    for table in TABLES:
        old_t, new_t = getattr(before, table), getattr(after, table)
        if old_t is new_t:
            continue
        if table == "topicQueueTable":
            for topic in sorted(topics) if topics is not None else old_t.keys() | new_t.keys():
                o, n = old_t.get(topic, {}), new_t.get(topic, {})
                if o is not n:
                    yield from _diff_entries(table, {(topic, b): q for b, q in o.items()}, {(topic, b): q for b, q in n.items()}, texts)
        elif table == "clusterAddrTable":
            for cluster in old_t.keys() | new_t.keys():
                o, n = old_t.get(cluster, frozenset()), new_t.get(cluster, frozenset())
                if o != n:
                    yield from _diff_entries(table, {(cluster, b): True for b in o}, {(cluster, b): True for b in n}, texts)
        else:
            yield from _diff_entries(table, old_t, new_t, texts)


def register_body(row: Mapping[str, Any]) -> RegisterBody:
    """The body of a silver.topic_configs row, as the ingest decoded it from the captured bytes."""
    dv = DataVersion(row["dv_state_version"], row["dv_timestamp"], row["dv_counter"]) if row["has_data_version"] else None
    configs = tuple(
        TopicConfig(c["topic_name"], c["read_queue_nums"], c["write_queue_nums"], c["perm"], c["topic_sys_flag"], c["order"], c["topic_filter_type"])
        for c in row["topic_configs"]
    )
    keys = row.get("topic_keys")
    return RegisterBody(
        dv,
        configs,
        tuple(row["filter_server_list"]),
        row["legacy_wrapper"],
        bool(row.get("static_mappings")),
        None if keys is None else tuple(keys),
        row.get("mapping_error"),
    )


_RECORD_FIELDS = ("namesrv", "ts", "seq", "kind", "code", "version", "opaque", "conn", "event", "remote", "rocketmq_version")
#: The columns of a replay row that :meth:`UnitReplay.feed` reads when the bodies come apart (``bodies``).
ROW_COLUMNS = _RECORD_FIELDS + ("ext_fields", "config", "body_id", "body", "body_b64", "record_rank")


class RecordBuilder:
    """Turns replay rows (silver.events columns; a row may carry its decoded body's columns, or the
    bodies come apart by id, as :func:`pipelines.replay.transforms.units_input` gives them) back into
    capture-format records, each with its decoded register body (or None): each distinct
    body is rebuilt once per unit and handed to the NameServer as decoded (``NameServer.apply``'s
    ``decoded_body``), so it is neither encoded to JSON nor decoded again."""

    def __init__(self) -> None:
        self._bodies: dict[str, RegisterBody] = {}

    def add_bodies(self, bodies: Mapping[str, RegisterBody]) -> None:
        """Bodies by ``body_id``, for rows that carry only the id."""
        self._bodies.update(bodies)

    def record(self, row: Mapping[str, Any]) -> tuple[dict[str, Any], RegisterBody | None]:
        rec: dict[str, Any] = {k: row[k] for k in _RECORD_FIELDS if row.get(k) is not None}
        rec["extFields"] = row.get("ext_fields") or {}
        if row.get("config") is not None:
            rec["config"] = row["config"]
        body_id = row.get("body_id")
        if body_id is not None:
            if row.get("topic_configs") is not None:
                self._bodies[body_id] = register_body(row)
            return rec, self._bodies[body_id]
        if row.get("body") is not None:
            rec["body"] = orjson.loads(row["body"])
        elif row.get("body_b64") is not None:
            rec["body_b64"] = row["body_b64"]
        return rec, None


#: The layout of a pickled :class:`UnitReplay`: its own attributes and those of every object it
#: holds (``nsreplay.model``, ``nsreplay.protocol.register_body``). Bump it with any change to an
#: attribute of those classes, in name or in meaning; a state of another format is refused
#: (:func:`load_state`), never resumed. Whatever its stamp, a state is also resumed only when every
#: object in it has the attributes this code's classes read (:func:`layout_difference`): a change
#: of attributes made without a bump is refused as well. States written before the stamp existed
#: (before 2026-11-30) carry none.
STATE_FORMAT = 1

_STATE_MODULES = ("nsreplay.", "pipelines.")


@lru_cache(maxsize=1)
def _fresh_attributes() -> dict[type, frozenset[str]]:
    """The attributes of every plain (not dataclass) object a fresh :class:`UnitReplay` of this code
    holds, by class: what a resumed state must have at least."""
    out: dict[type, frozenset[str]] = {}
    for profile in ("rocketmq-4.9", "rocketmq-5"):
        for obj in _state_objects(UnitReplay(origin=0, default_profile=profile)):
            if not is_dataclass(obj) and hasattr(obj, "__dict__"):
                out[type(obj)] = out.get(type(obj), frozenset(vars(obj))) & frozenset(vars(obj))
    return out


def _state_objects(root: object) -> Iterator[object]:
    """Every object of the project's classes reachable from ``root`` through containers and the
    attributes of such objects (each once)."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, (str, bytes, int, float, bool, type(None))):
            continue
        seen.add(id(obj))
        if isinstance(obj, Mapping):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            stack.extend(obj)
        if type(obj).__module__.startswith(_STATE_MODULES):
            yield obj
            if hasattr(obj, "__dict__"):
                stack.extend(vars(obj).values())


def layout_difference(root: object) -> str | None:
    """``None`` when every object of the project's classes in ``root`` (a loaded, unstamped state)
    has the attributes this code's class gives it: a dataclass exactly its fields, a plain class at
    least those of a fresh :class:`UnitReplay`'s objects (a cache filled later may be absent from
    those); otherwise the first difference found, as text. A NamedTuple that gained or lost a field
    does not get this far: it fails to unpickle."""
    fresh = _fresh_attributes()
    for obj in _state_objects(root):
        if not hasattr(obj, "__dict__"):
            continue
        has = frozenset(vars(obj))
        name = type(obj).__qualname__
        if is_dataclass(obj):
            expected = frozenset(f.name for f in fields(obj))
            if has != expected:
                return f"{name} has {sorted(has - expected)} and lacks {sorted(expected - has)}"
        elif type(obj) not in fresh:
            return f"{name} is not part of this code's states"
        elif not fresh[type(obj)] <= has:
            return f"{name} lacks {sorted(fresh[type(obj)] - has)}"
    return None


class StateFormatError(RuntimeError):
    """A stored replay state was written by nsreplay code of another state layout
    (:data:`STATE_FORMAT`): it cannot be resumed, the windows must be replayed again."""


def load_state(blob: bytes) -> "UnitReplay":
    """The :class:`UnitReplay` pickled in ``blob`` (a ``gold.replay_state`` unit row). Raises
    :class:`StateFormatError` when it was written under another :data:`STATE_FORMAT` or none, and
    when it cannot be unpickled at all because a class it holds changed (an attribute added,
    removed or renamed, a class moved): never a replay resumed from a state it does not describe."""
    try:
        state = pickle.loads(blob)
    except StateFormatError:
        raise
    except Exception as exc:  # a class of the state's code differs: any error of its constructors
        raise StateFormatError(f"state format unreadable by this code ({type(exc).__name__}: {exc})") from exc
    if not isinstance(state, UnitReplay):
        raise StateFormatError(f"state holds a {type(state).__name__}, not a UnitReplay")
    return state


class UnitReplay:
    """The replay of one unit, resumable: its complete state (the NameServer's tables, stored
    connections and dataVersions, the KV store, the last emitted snapshot, the tick phase and the
    start of every open interval) pickles at the end of a window, and a replay resumed from it emits
    exactly the changes a single replay over both windows would have.

    ``feed`` takes rows in the NameServer's order (``ts``, then ``record_rank``); ``advance(until)``
    runs every tick up to ``until``; both yield change rows. :meth:`carried` gives, for a resumed
    replay, the change rows that opened the intervals still open at the window's start.

    The register bodies are not part of the state (neither this replay's nor the model's cache of
    decoded bodies): every window gives each unit the bodies its records name
    (:func:`pipelines.replay.transforms.units_input`).
    """

    def __init__(self, *, origin: int, default_profile: str, default_config: Mapping[str, object] | None = None) -> None:
        self.ns = NameServer(default_profile, default_config or {}, origin)
        self.builder = RecordBuilder()
        self.previous = self.ns.snapshot()
        self.next_tick = self.ns.first_tick
        self.until: int | None = None
        self.opened: dict[tuple[str, str], dict[str, Any]] = {}
        self.texts: ValueTexts = {}

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["builder"] = None
        state["texts"] = None  # a cache of JSON texts, not state
        state["state_format"] = STATE_FORMAT
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        found = state.pop("state_format", None)
        if found is not None and found != STATE_FORMAT:
            raise StateFormatError(f"state format {found}, this code resumes format {STATE_FORMAT} only")
        self.__dict__.update(state)
        self.builder = RecordBuilder()
        self.texts = {}
        if (difference := layout_difference(self)) is not None:
            written = "none (written before 2026-11-30)" if found is None else str(found)
            raise StateFormatError(f"state format {written} and not this code's layout: {difference}")

    def carried(self) -> Iterator[dict[str, Any]]:
        """The put rows that opened every interval still open (``carried`` marks them)."""
        for (table, key), row in sorted(self.opened.items()):
            yield {**row, "table": table, "key": key, "op": "put", "before": None, "carried": True}

    def _changes(self, ts: int, phase: int, rank: int | None, cause: str) -> Iterator[dict[str, Any]]:
        topics = self.ns.changed_topics_since(self.previous)
        current = self.ns.snapshot()
        for table, key, op, before, after in diff_snapshots(self.previous, current, topics, self.texts):
            if op == "put":
                self.opened[(table, key)] = {"ts": ts, "phase": phase, "record_rank": rank, "after": after, "cause": cause}
            else:
                self.opened.pop((table, key), None)
            yield {"ts": ts, "phase": phase, "record_rank": rank, "table": table, "key": key, "op": op, "before": before, "after": after, "cause": cause, "carried": False}
        self.previous = current

    def advance(self, until: int) -> Iterator[dict[str, Any]]:
        """Run every scan tick up to ``until`` (inclusive). Ticks not after the model's expiry horizon
        cannot change anything (:meth:`~nsreplay.model.NameServer.expiry_horizon`) and are skipped."""
        while self.next_tick <= until:
            horizon = self.ns.expiry_horizon()
            if horizon is None or horizon >= self.next_tick:
                # The first tick of the grid after the horizon (or after ``until``) is the next that matters.
                bound = until if horizon is None else min(horizon, until)
                self.next_tick += ((bound - self.next_tick) // self.ns.tick_interval + 1) * self.ns.tick_interval
                continue
            version = self.ns.version
            self.ns.scan(self.next_tick)
            if self.ns.version != version:
                yield from self._changes(self.next_tick, 1, None, "expired")
            self.next_tick += self.ns.tick_interval
        self.until = until if self.until is None else max(self.until, until)

    def feed(self, rows: Iterable[Mapping[str, Any]], until: int, bodies: Mapping[str, RegisterBody] | None = None) -> Iterator[dict[str, Any]]:
        """Apply the rows with ``ts <= until`` (ticks interleaved), then tick up to ``until``. Each
        register body comes either in the body columns of its first row or in ``bodies`` (by id)."""
        if bodies:
            self.builder.add_bodies(bodies)
        for row in rows:
            ts = row["ts"]
            if ts > until:
                break
            if self.until is not None and ts <= self.until:
                raise ValueError(f"record at {ts} is not after the replayed window (up to {self.until})")
            yield from self.advance(ts - 1)
            version = self.ns.version
            record, body = self.builder.record(row)
            outcome = self.ns.apply(record, body_id=row.get("body_id"), decoded_body=body)
            if self.ns.version != version:
                yield from self._changes(ts, 0, row["record_rank"], outcome.cause)
            if row["kind"] == "namesrv_start":
                self.next_tick = self.ns.first_tick
        yield from self.advance(until)


def replay_unit(
    rows: Iterable[Mapping[str, Any]],
    *,
    origin: int,
    until: int,
    default_profile: str,
    default_config: Mapping[str, object] | None = None,
) -> Iterator[dict[str, Any]]:
    """Change rows of one unit. ``rows`` must be in the NameServer's order (``ts``, ``record_rank``);
    ``origin`` is the tick origin when no start record comes first; ticks run up to ``until``."""
    return UnitReplay(origin=origin, default_profile=default_profile, default_config=default_config).feed(rows, until)
