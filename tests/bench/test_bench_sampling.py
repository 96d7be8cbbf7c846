"""How the rebuild benchmark spreads its reference-model check over the NameServers."""

from __future__ import annotations

from nsreplay.bench_oracle import samples_per_namesrv


def test_sampled_ticks_are_split_over_namesrvs_without_losing_the_remainder() -> None:
    assert samples_per_namesrv(1000, 3) == [334, 333, 333]
    assert samples_per_namesrv(1000, 1) == [1000]
    assert samples_per_namesrv(2, 3) == [1, 1, 0]
    assert samples_per_namesrv(1000, 0) == []
