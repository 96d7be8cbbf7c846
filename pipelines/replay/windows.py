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


__all__ = ["MissingPredecessorError", "Window", "WindowTooLongError", "check_window_length"]
