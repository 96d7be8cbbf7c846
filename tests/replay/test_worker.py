"""gc_paused: the collector is off inside the block and back to its previous state after it."""

from __future__ import annotations

import gc

import pytest

from pipelines.worker import gc_paused


def test_gc_paused_restores_the_previous_state_even_on_error() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError):
        with gc_paused():
            raise RuntimeError("boom")
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # it was off before: it stays off
    finally:
        gc.enable()
