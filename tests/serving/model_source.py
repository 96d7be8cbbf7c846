"""A RouteSource over the reference model: what the remoting tests serve instead of a warehouse."""

from __future__ import annotations

from functools import lru_cache

from nsreplay.history import Coverage, OutsideCoverageError
from nsreplay.model import PROFILE_49, Snapshot, state_at
from nsreplay.serving.source import SnapshotSource


class ModelSource(SnapshotSource):
    """One NameServer ``namesrv`` covering ``[start, end]`` under ``profile`` (what ``coverage`` says),
    its state at an instant that of the reference model replaying ``records`` (4.9 before any start
    record); snapshots cached per instant."""

    def __init__(self, run_id: str, namesrv: str, records: list[dict], start: int, end: int, profile: str) -> None:
        self.run_id = run_id
        self._namesrv, self._records, self._start, self._end, self._profile = namesrv, records, start, end, profile
        self._state = lru_cache(maxsize=64)(self._state_at)

    def coverage(self) -> list[Coverage]:
        return [Coverage(self._namesrv, self._start, self._end, self._profile)]

    def snapshot(self, namesrv: str, t: int | None) -> Snapshot:
        t = self._end if t is None else t
        if namesrv != self._namesrv or not self._start <= t <= self._end:
            raise OutsideCoverageError(f"{t} is outside the covered range of {namesrv}: [{self._start}, {self._end}]")
        return self._state(t)

    def _state_at(self, t: int) -> Snapshot:
        return state_at(self._records, self._namesrv, t, default_profile=PROFILE_49)
