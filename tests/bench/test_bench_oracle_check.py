"""The rebuild benchmark's model check on a published warehouse: every tick (its five tables and
its row of the published scan-tick grid) agrees with the model fed the capture the warehouse was
built from, and the check finds the ticks that disagree when the model is fed less (the last
capture file left out)."""

from __future__ import annotations

from nsreplay.bench_oracle import ModelCheck, _grid_differences, check_sampled_ticks
from nsreplay.history import PublishedHistory


def test_the_check_passes_on_the_whole_capture_and_finds_a_missing_file(demo_published) -> None:
    capture, root = demo_published
    paths = sorted(str(p) for p in capture.glob("*.jsonl*"))
    assert len(paths) > 1
    every_tick = 10**6  # more than the capture has: every tick of every NameServer is compared
    whole = check_sampled_ticks(paths, root, every_tick, seed=7)
    assert (whole.mismatched, whole.grid_mismatched) == (0, 0)
    assert whole.sampled == whole.ticks > 3000  # the demo's NameServers at their tick interval
    assert check_sampled_ticks(paths, root, 30, seed=7, workers=1) == ModelCheck(30, 0, whole.ticks, 0)  # the grid is compared whole

    assert PublishedHistory(root).scan_ticks("10.9.9.9:9876") == []  # a NameServer the warehouse does not cover

    short = check_sampled_ticks(paths[:-1], root, every_tick, seed=7)
    assert 0 < short.mismatched < short.sampled  # the model still runs every tick up to the published end
    # the last file's heartbeats missing, the model expires brokers at ticks where the published grid removed none
    assert 0 < short.grid_mismatched < short.ticks


def test_grid_differences_count_each_tick_once() -> None:
    model = [(10, "rocketmq-5", 0), (20, "rocketmq-5", 1), (30, "rocketmq-5", 0)]
    assert _grid_differences(model, list(model)) == 0
    assert _grid_differences(model, [(10, "rocketmq-5", 0), (20, "rocketmq-5", 2), (30, "rocketmq-4.9", 0)]) == 2
    assert _grid_differences(model, model[:2] + [(40, "rocketmq-5", 0)]) == 2  # 30 and 40 are on one side only
