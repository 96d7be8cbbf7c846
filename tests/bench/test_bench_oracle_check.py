"""The rebuild benchmark's model check on a published warehouse: every tick agrees with the model
fed the capture the warehouse was built from, and the check finds the ticks that disagree when the
model is fed less (the last capture file left out)."""

from __future__ import annotations

from nsreplay.bench_oracle import check_sampled_ticks


def test_the_check_passes_on_the_whole_capture_and_finds_a_missing_file(demo_published) -> None:
    capture, root = demo_published
    paths = sorted(str(p) for p in capture.glob("*.jsonl*"))
    assert len(paths) > 1
    every_tick = 10**6  # more than the capture has: every tick of every NameServer is compared
    sampled, mismatched = check_sampled_ticks(paths, root, every_tick, seed=7)
    assert mismatched == 0
    assert sampled > 3000  # the demo's NameServers at their tick interval
    assert check_sampled_ticks(paths, root, 30, seed=7, workers=1) == (30, 0)

    short, wrong = check_sampled_ticks(paths[:-1], root, every_tick, seed=7)
    assert 0 < wrong < short  # the model still runs every tick up to the published end
