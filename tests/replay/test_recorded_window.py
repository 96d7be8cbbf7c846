"""Whether a retry of a run id asks the window its replay wrote (:class:`RecordedWindow`), from the
``gold.replay_runs`` row alone: pure Python, no Spark. The ends compare as resolved (``--to``, or
the last record); the start by the ``--from`` the try was given, since the start a ``--from``
resolves to depends on what was published when it ran."""

from __future__ import annotations

import pytest

from pipelines.replay.windows import RecordedWindow

T0, T1, T2, T3 = 1_000_000, 2_000_000, 3_000_000, 4_000_000
FIRST = 999_999  # the row's window_from of a replay from the first record (1_000_000): one ms before it


def recorded(start: int, until: int, summary: dict) -> RecordedWindow:
    return RecordedWindow.of({"window_from": start, "window_to": until}, summary)


RESUMED = recorded(T1, T2, {"resumed_from": T1, "asked_from": T1})  # --from T1 --to T2, resumed at T1
# the DAG's first window on an empty warehouse: --from T1 --to T2 replayed from the first record
FIRST_WINDOW = recorded(FIRST, T2, {"resumed_from": None, "asked_from": T1})
WHOLE = recorded(FIRST, T2, {"resumed_from": None, "asked_from": None})  # no --from
LAST_GOOD = recorded(T0, T2, {"resumed_from": T0, "asked_from": T1})  # --from T1 --from-last-good, resumed at T0
# rows written before the --from given was recorded
OLD_RESUMED = recorded(T1, T2, {"resumed_from": T1})
OLD_FIRST = recorded(FIRST, T2, {"resumed_from": None})


@pytest.mark.parametrize(
    ("window", "window_from", "until", "answered"),
    [
        (RESUMED, T1, T2, True),
        (RESUMED, T1, T3, False),  # another end (or none, when the last record is elsewhere)
        (RESUMED, T0, T2, False),  # another start
        (RESUMED, None, T2, False),  # from the first record
        (FIRST_WINDOW, T1, T2, True),  # as its try was asked: not as --from T1 resolves once it is published
        (FIRST_WINDOW, None, T2, True),  # from the first record, where it started
        (FIRST_WINDOW, FIRST, T2, True),  # the start its publish line names
        (FIRST_WINDOW, T0, T2, False),
        (FIRST_WINDOW, T1, T3, False),
        (WHOLE, None, T2, True),
        (WHOLE, T1, T2, False),
        (WHOLE, None, T3, False),
        (LAST_GOOD, T1, T2, True),
        (LAST_GOOD, T0, T2, True),  # the state it resumed from
        (LAST_GOOD, T3 - 1, T2, False),
        (LAST_GOOD, None, T2, False),
        (OLD_RESUMED, T1, T2, True),
        (OLD_RESUMED, T0, T2, False),
        (OLD_RESUMED, None, T2, False),
        (OLD_FIRST, T1, T2, True),  # what its try was given is unknown: any --from
        (OLD_FIRST, None, T2, True),
        (OLD_FIRST, T1, T3, False),
    ],
)
def test_a_retry_asks_the_recorded_window(window: RecordedWindow, window_from: int | None, until: int, answered: bool) -> None:
    assert window.answers(window_from, until) is answered


def test_the_refusal_names_the_flags_that_ask_the_recorded_window_again() -> None:
    assert RESUMED.flags() == "--from 1970-01-01T00:33:20.000Z --to 1970-01-01T00:50:00.000Z"
    assert FIRST_WINDOW.flags() == "--from 1970-01-01T00:33:20.000Z --to 1970-01-01T00:50:00.000Z"
    assert LAST_GOOD.flags() == "--from 1970-01-01T00:33:20.000Z --to 1970-01-01T00:50:00.000Z"
    assert WHOLE.flags() == OLD_FIRST.flags() == "--to 1970-01-01T00:50:00.000Z and no --from"
    assert (RESUMED.text(), WHOLE.text(), LAST_GOOD.text()) == (
        "(1970-01-01T00:33:20.000Z, 1970-01-01T00:50:00.000Z]",
        "(the first record, 1970-01-01T00:50:00.000Z]",
        "(1970-01-01T00:16:40.000Z, 1970-01-01T00:50:00.000Z]",
    )
