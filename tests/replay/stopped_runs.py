"""A replay stopped among its gold writes or before its run row, for the tests of what its retry does."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import pytest

from nsreplay.config import Settings, load_settings
from nsreplay.storage import Warehouse
from schemas.gold import REPLAY_RUNS


class Killed(RuntimeError):
    """Stands for a SIGKILL of a job between two of its commits."""


def one_writer() -> Settings:
    """The settings with one gold write at a time (a kill after n writes leaves exactly n)."""
    from dataclasses import replace

    settings = load_settings()
    return replace(settings, replay=replace(settings.replay, write_threads=1))


@contextmanager
def killed_before_run_row(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Within it, a replay stops (:class:`Killed`, which the block must raise) where it would append
    its ``gold.replay_runs`` row, the last of its writes: every gold table written, the run row not."""
    append = Warehouse.append

    def killed_at_run_row(self, spec, *args, **kwargs):
        if spec is REPLAY_RUNS:
            raise Killed("killed before gold.replay_runs")
        return append(self, spec, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(Warehouse, "append", killed_at_run_row)
        with pytest.raises(Killed):
            yield


@contextmanager
def killed_after_writes(monkeypatch: pytest.MonkeyPatch, writes: int) -> Iterator[None]:
    """Within it, a replay stops (:class:`Killed`, which the block must raise) before its gold table
    write number ``writes + 1``: ``writes`` gold tables written (with one write at a time: the
    settings' ``write_threads`` 1), the others and the run row not."""
    overwrite = Warehouse.overwrite_counted
    done: list[str] = []

    def counted(self, spec, *args, **kwargs):
        if len(done) >= writes:
            raise Killed(f"killed before writing {spec.name}")
        result = overwrite(self, spec, *args, **kwargs)
        done.append(spec.name)
        return result

    with monkeypatch.context() as patch:
        patch.setattr(Warehouse, "overwrite_counted", counted)
        with pytest.raises(Killed):
            yield
