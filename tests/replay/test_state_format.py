"""Upgrading over a warehouse: replay states pickled by older code are refused, never resumed.

``gold.replay_state`` holds pickled :class:`~pipelines.replay.unit_replay.UnitReplay` objects. A state
written by code whose model classes had other attributes either fails to unpickle (a NamedTuple that
gained a field: ``DecodedBody.__new__() missing 1 required positional argument``, the traceback the
0cedce0 states gave) or, worse, unpickles into objects the current code reads wrongly. The states
carry their layout (``STATE_FORMAT``): another one is refused with the way forward, and so is a state
written before the stamp whose objects lack attributes this code's classes have."""

from __future__ import annotations

import pickle
from types import SimpleNamespace
from typing import Any

import pytest

import nsreplay.model.namesrv
from pipelines.replay import unit_replay
from pipelines.replay.run import FACTS_UNIT, StateFormatError, _check_state_format
from pipelines.replay.unit_replay import STATE_FORMAT, UnitReplay, load_state
from tests.replay.test_unit_replay import S, rows, with_window_bodies


def _fed(cut: int = S + 130000) -> UnitReplay:
    unit = UnitReplay(origin=S, default_profile="rocketmq-5")
    list(unit.feed([r for r in rows() if r["ts"] <= cut], cut))
    return unit


def _unstamped(unit: UnitReplay, monkeypatch: pytest.MonkeyPatch) -> bytes:
    """The pickle the code before the stamp wrote: the same attributes, no ``state_format``."""
    def old_getstate(self: UnitReplay) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["builder"] = None
        state["texts"] = None
        return state

    with monkeypatch.context() as m:
        m.setattr(UnitReplay, "__getstate__", old_getstate)
        return pickle.dumps(unit, protocol=pickle.HIGHEST_PROTOCOL)


def test_a_stamped_state_resumes_like_one_replay() -> None:
    data = rows()
    cut, end = S + 130000, S + 400000
    whole = list(UnitReplay(origin=S, default_profile="rocketmq-5").feed(data, end))
    first = UnitReplay(origin=S, default_profile="rocketmq-5")
    before = list(first.feed([r for r in data if r["ts"] <= cut], cut))
    resumed = load_state(pickle.dumps(first, protocol=pickle.HIGHEST_PROTOCOL))
    assert before + list(resumed.feed(with_window_bodies([r for r in data if r["ts"] > cut], data), end)) == whole
    assert not hasattr(resumed, "state_format")  # the stamp is not an attribute of the replay


def test_a_state_written_before_the_stamp_with_this_layout_resumes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The code of 2026-11-29 wrote the same layout without the stamp: its states resume exactly."""
    data = rows()
    cut, end = S + 130000, S + 400000
    whole = list(UnitReplay(origin=S, default_profile="rocketmq-5").feed(data, end))
    first = UnitReplay(origin=S, default_profile="rocketmq-5")
    before = list(first.feed([r for r in data if r["ts"] <= cut], cut))
    resumed = load_state(_unstamped(first, monkeypatch))
    assert before + list(resumed.feed(with_window_bodies([r for r in data if r["ts"] > cut], data), end)) == whole


def test_a_state_written_before_the_stamp_lacking_an_attribute_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """An older NameServer without an attribute this code reads: refused, not an AttributeError later."""
    unit = _fed()
    del unit.ns._order_topic_conf
    with pytest.raises(StateFormatError, match=r"state format none \(written before 2026-11-30\) and not this code's layout: "
                                               r"NameServer lacks \['_order_topic_conf'\]"):
        load_state(_unstamped(unit, monkeypatch))


def test_a_stamped_state_lacking_an_attribute_is_refused_too() -> None:
    """A change of the classes' attributes made without bumping STATE_FORMAT: the layout check
    refuses the state all the same."""
    unit = _fed()
    del unit.ns._order_topic_conf
    with pytest.raises(StateFormatError, match=rf"state format {STATE_FORMAT} and not this code's layout: NameServer lacks \['_order_topic_conf'\]"):
        load_state(pickle.dumps(unit, protocol=pickle.HIGHEST_PROTOCOL))


def test_a_state_written_before_the_stamp_with_other_dataclass_fields_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A frozen dataclass unpickles whatever attributes it was given: an older field set is refused."""
    unit = _fed()
    object.__setattr__(unit.ns.config, "scanInterval", 5000)  # a field this code's NamesrvConfig does not have
    with pytest.raises(StateFormatError, match=r"NamesrvConfig has \['scanInterval'\] and lacks \[\]"):
        load_state(_unstamped(unit, monkeypatch))


def test_a_state_of_another_format_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(unit_replay, "STATE_FORMAT", STATE_FORMAT + 1)
    blob = pickle.dumps(_fed(), protocol=pickle.HIGHEST_PROTOCOL)
    monkeypatch.setattr(unit_replay, "STATE_FORMAT", STATE_FORMAT)
    with pytest.raises(StateFormatError, match=rf"state format {STATE_FORMAT + 1}, this code resumes format {STATE_FORMAT} only"):
        load_state(blob)


def test_a_state_whose_classes_changed_is_refused_not_a_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    """A class of the state renamed or gone: the unpickling error becomes the refusal."""
    blob = pickle.dumps(_fed(), protocol=pickle.HIGHEST_PROTOCOL)
    monkeypatch.delattr(nsreplay.model.namesrv, "NameServer")
    with pytest.raises(StateFormatError, match=r"state format unreadable by this code \(AttributeError: .*NameServer"):
        load_state(blob)


def test_the_driver_refuses_old_states_in_one_line_with_the_backfill(spark, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before any task runs: the message names the window end and the command that rebuilds."""
    unit = _fed()
    del unit.ns._order_topic_conf
    old = _unstamped(unit, monkeypatch)
    carried = spark.createDataFrame([("ns", FACTS_UNIT, pickle.dumps({})), ("ns", "u0", old)], "namesrv string, unit string, state binary")
    with pytest.raises(StateFormatError) as refused:
        _check_state_format(SimpleNamespace(root="/data/wh"), carried, S + 300000)
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith("the replay states published at 2024-11-21T00:05:00.000Z were written by another nsreplay version (state format none")
    assert message.endswith("replay the history again from its first record: nsreplay backfill --warehouse /data/wh --from start")
    stamped = spark.createDataFrame([("ns", "u0", pickle.dumps(_fed()))], "namesrv string, unit string, state binary")
    _check_state_format(SimpleNamespace(root="/data/wh"), stamped, S + 300000)  # the current code's states pass
