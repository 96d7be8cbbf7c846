"""Windows of replay: which records a run replays, what it resumes from, which gold rows it owns.

A run replays the window ``(after, until]``: the records with ``after < ts <= until`` and the scan
ticks in that range, resuming every replay unit from the state persisted at ``after`` by the run of
the previous window (``after`` None: from each NameServer's first record, nothing carried).

Ownership, so that windows run one by one give the same tables as one run over all of them:

* rows stamped with one instant (changes, scan ticks, keyframes, fidelity checks) belong to the
  window holding that instant;
* an interval belongs to the window in which it ends (``valid_to``); intervals still open at the end
  of the covered range belong to the latest window.

A run of the latest window (its end at or after everything published) therefore replaces every row
after ``after``, including anything a killed run left behind; a re-run of an earlier window
replaces exactly its own slice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from nsreplay.runtime import UsageError, format_ms
from nsreplay.storage import ColumnRange

DAY_MS = 86_400_000


class MissingPredecessorError(RuntimeError):
    """The window's start is not the end of a published window (no carried state to resume from)."""


class WindowTooLongError(UsageError):
    """The window spans more days than ``[replay] max_window_days`` (most likely a mistyped ``--to``)."""


def check_window_length(start: int, until: int, max_days: int) -> None:
    """Refuse a window from ``start`` to ``until`` (epoch ms) longer than ``max_days`` days: every scan
    tick in it would be replayed and stored (17,280 a day per NameServer at the 5 s default), so a
    ``--to`` typed a year or a century too far would fill the cluster before anything said so."""
    if until - start > max_days * DAY_MS:
        raise WindowTooLongError(
            f"the window {format_ms(start)} .. {format_ms(until)} spans {(until - start) / DAY_MS:,.1f} days, more than "
            f"[replay] max_window_days = {max_days}: check --to (or --from), or raise the setting for a longer backfill"
        )


@dataclass(frozen=True)
class Window:
    """``(after, until]``; ``latest``: nothing published ends after ``until``."""

    after: int | None
    until: int
    latest: bool

    def owned_instants(self, column: str) -> ColumnRange | None:
        """The rows stamped ``column`` that this window owns (``None``: every row)."""
        if self.after is None and self.latest:
            return None
        return ColumnRange(column, above=self.after, at_most=None if self.latest else self.until)

    def owned_intervals(self) -> ColumnRange | None:
        """The interval rows this window owns, by ``valid_to`` (NULL: still open) (``None``: every row)."""
        if self.after is None and self.latest:
            return None
        return ColumnRange("valid_to", above=self.after, at_most=None if self.latest else self.until, or_null=self.latest)

    def instant(self, column: str) -> str:
        """Spark SQL predicate: rows stamped ``column`` that this window owns."""
        owned = self.owned_instants(column)
        return "true" if owned is None else owned.sql()

    def record_range(self) -> ColumnRange:
        """The records this window replays: ``after < ts <= until``."""
        return ColumnRange("ts", above=self.after, at_most=self.until)


def window_text(after: int | None, until: int) -> str:
    """``(after, until]`` for messages, ``after`` None as "the first record"."""
    return f"({'the first record' if after is None else format_ms(after)}, {format_ms(until)}]"


@dataclass(frozen=True)
class RecordedWindow:
    """The window a run id's replay wrote, as its ``gold.replay_runs`` row records it, and whether
    the window a retry of that run id asks is that one.

    ``start``: the row's ``window_from`` (``(start, until]`` holds every record replayed: one ms
    before the first record when the replay started there); ``resumed_from``: the state it resumed
    from (None: the first record); ``asked_from``: the ``--from`` its try was given (None: none),
    known only when ``asked_recorded`` (rows written before it was recorded do not say)."""

    start: int
    until: int
    resumed_from: int | None
    asked_from: int | None
    asked_recorded: bool

    @classmethod
    def of(cls, run: Mapping[str, Any], summary: Mapping[str, Any]) -> "RecordedWindow":
        """From a ``gold.replay_runs`` row and its parsed summary (the ``quality`` column)."""
        return cls(run["window_from"], run["window_to"], summary.get("resumed_from"), summary.get("asked_from"), "asked_from" in summary)

    def answers(self, window_from: int | None, until: int) -> bool:
        """Whether a replay asked ``--from window_from`` (None: none, "from the first record") up to
        ``until`` (its ``--to``, or the last record without one) asks this window: it ends at
        ``until``, and ``window_from`` is the ``--from`` this window's try was given, or where it
        started (``resumed_from`` or ``start``, as the run's messages name it). The start a
        ``--from`` resolves to depends on what was published when it ran (on an empty warehouse a
        replay starts at the first record; ``--from-last-good`` starts earlier), so the ``--from``
        given is compared, not the start it would resolve to now. A row that does not say what its
        try was given, and replayed from the first record, answers any ``--from``: which one that
        try was given is unknown."""
        if until != self.until:
            return False
        if window_from in (self.resumed_from, self.start):
            return True
        if self.asked_recorded:
            return window_from == self.asked_from
        return self.resumed_from is None and window_from is not None

    def text(self) -> str:
        """The window replayed, for messages."""
        return window_text(self.resumed_from, self.until)

    def flags(self) -> str:
        """The ``--from``/``--to`` that ask this window again (those its try was given, when known)."""
        start = self.asked_from if self.asked_recorded else self.resumed_from
        to = f"--to {format_ms(self.until)}"
        return f"--from {format_ms(start)} {to}" if start is not None else f"{to} and no --from"


__all__ = ["MissingPredecessorError", "RecordedWindow", "Window", "WindowTooLongError", "check_window_length", "window_text"]
