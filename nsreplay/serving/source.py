"""What the shim's front ends ask of the published history.

Both front ends (HTTP, remoting) talk to a :class:`RouteSource`: one immutable view of one published
run. ``t=None`` means "the latest published state" (the end of that NameServer's covered range).
Every method raises :class:`~nsreplay.history.OutsideCoverageError` for an unknown NameServer or an
instant outside the covered range; answers are :class:`~nsreplay.model.Answer` values rendered by the
reference model's renderer, so they are what the NameServer would have returned.

:class:`HistorySource` is the straightforward implementation (a full snapshot per question, read
from the published Delta tables with pyarrow). It is correct and slow; faster sources must answer
exactly like it.
"""

from __future__ import annotations

from typing import Protocol

from nsreplay.history import Coverage, OutsideCoverageError, PublishedHistory
from nsreplay.model import Answer, Snapshot, cluster_info, route_info, topic_list


class RouteSource(Protocol):
    """One published run, answering as of any covered instant (see module docstring)."""

    run_id: str

    def coverage(self) -> list[Coverage]: ...

    def profile(self, namesrv: str, t: int | None) -> str:
        """The semantics profile (``rocketmq-4.9`` / ``rocketmq-5``) ``namesrv`` ran at ``t``: its
        epoch's (a restart may change it)."""
        ...

    def route(self, namesrv: str, topic: str | None, t: int | None, *, request_version: int) -> Answer:
        """GET_ROUTEINFO_BY_TOPIC; a ``None`` topic (a request without extFields) is not found."""
        ...

    def cluster(self, namesrv: str, t: int | None, *, request_version: int) -> Answer: ...

    def topics(self, namesrv: str, t: int | None, *, request_version: int) -> Answer: ...


class SnapshotSource:
    """Answers rendered from a full snapshot per question: subclasses provide :meth:`snapshot`."""

    def snapshot(self, namesrv: str, t: int | None) -> Snapshot:
        raise NotImplementedError

    def profile(self, namesrv: str, t: int | None) -> str:
        return self.snapshot(namesrv, t).profile

    def route(self, namesrv: str, topic: str | None, t: int | None, *, request_version: int) -> Answer:
        return route_info(self.snapshot(namesrv, t), topic, request_version=request_version)

    def cluster(self, namesrv: str, t: int | None, *, request_version: int) -> Answer:
        return cluster_info(self.snapshot(namesrv, t), request_version=request_version)

    def topics(self, namesrv: str, t: int | None, *, request_version: int) -> Answer:
        return topic_list(self.snapshot(namesrv, t), request_version=request_version)


class HistorySource(SnapshotSource):
    """:class:`RouteSource` over :class:`PublishedHistory`: one snapshot per question."""

    def __init__(self, root: str) -> None:
        self._history = PublishedHistory(root)
        self.run_id = self._history.run_id

    def coverage(self) -> list[Coverage]:
        return self._history.coverage()

    def instant(self, namesrv: str, t: int | None) -> int:
        """``t``, or the end of ``namesrv``'s covered range when ``t`` is None."""
        if t is not None:
            return t
        for cov in self._history.coverage():
            if cov.namesrv == namesrv:
                return cov.to_ts
        known = ", ".join(c.namesrv for c in self._history.coverage()) or "none"
        raise OutsideCoverageError(f"unknown NameServer {namesrv!r}; known: {known}")

    def snapshot(self, namesrv: str, t: int | None) -> Snapshot:
        return self._history.snapshot_at(namesrv, self.instant(namesrv, t))

    def profile(self, namesrv: str, t: int | None) -> str:
        return self._history.profile_at(namesrv, self.instant(namesrv, t))  # the epochs only, not a snapshot


__all__ = ["HistorySource", "RouteSource", "SnapshotSource"]
