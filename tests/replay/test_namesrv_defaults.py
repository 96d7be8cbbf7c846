"""NameServers without a start record, each run under its own configured profile and settings
(``[replay.namesrvs."ADDR"]``), against the model given the same settings, at every tick.

A capture that began after the NameServers started has no start record at all, and a fleet being
upgraded runs both profiles: one ``default_profile`` for every NameServer would replay a 4.9
NameServer with the 5.x rules and tick grid (its expiries fall on other ticks, its route answers
gain ``enableActingMaster``). Three NameServers, none with a start record at its first record:

* ``NS_49``: configured ``rocketmq-4.9``; a start record of 5.3.3 later (an upgrade) replaces the
  configured profile from its ``ts`` on;
* ``NS_FAST``: configured ``scanNotActiveBrokerInterval = 3000`` (the default profile, 5.x);
* ``NS_PLAIN``: not configured: the defaults.

Each has a broker that stays and one that registers for a while and then goes silent, so that it
expires at a tick of that NameServer's own grid (another tick than the default grid's).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from differential import compare_changes, compare_every_tick
from nsreplay.config import PROJECT_ROOT, Settings, load_settings
from nsreplay.history import PublishedHistory
from nsreplay.model.records import namesrv_start, register_broker
from nsreplay.storage import Warehouse
from pipelines.ingest.run import run_ingest
from pipelines.replay.run import run_replay
from schemas.gold import NAMESRV_EPOCHS

S = 1732147200000
NS_49, NS_FAST, NS_PLAIN = "10.3.0.1:9876", "10.3.0.2:9876", "10.3.0.3:9876"
UPGRADE = S + 400_000  # NS_49's start record (5.3.3)


def capture_records() -> list[dict]:
    records: list[dict] = []
    for i, ns in enumerate((NS_49, NS_FAST, NS_PLAIN)):
        five = ns != NS_49
        for k in range(20):  # every 30 s from S + 1 s; the leaving broker stops after 5 rounds
            t = S + 1000 + i * 7 + k * 30_000
            for name, rounds, late in (("b-stays", 20, 0), ("b-leaves", 5, 1500)):
                if k < rounds:
                    addr = f"10.3.{i}.{1 if name == 'b-stays' else 2}:10911"
                    after_upgrade = ns == NS_49 and t >= UPGRADE
                    records.append(register_broker(t + late, cluster="c", name=name, addr=addr, topics=[f"t-{name}", "TBW102"],
                                                   five=five or after_upgrade, namesrv=ns))
    records.append(namesrv_start(UPGRADE, "5.3.3", {"scanNotActiveBrokerInterval": 4000}, namesrv=NS_49))
    return sorted(records, key=lambda r: r["ts"])


@pytest.fixture(scope="module")
def replayed(spark, tmp_path_factory) -> tuple[Path, str, Settings]:
    root = tmp_path_factory.mktemp("namesrv-defaults")
    conf = root / "conf"
    shutil.copytree(PROJECT_ROOT / "conf" / "base", conf / "base")
    (conf / "site").mkdir()
    (conf / "site" / "nsreplay.toml").write_text(f"""
[replay.namesrvs."{NS_49}"]
profile = "rocketmq-4.9"
[replay.namesrvs."{NS_FAST}"]
config = {{ scanNotActiveBrokerInterval = 3000 }}
""")
    settings = load_settings("site", conf)
    capture = root / "capture"
    capture.mkdir()
    (capture / "c.jsonl").write_text("".join(json.dumps(r) + "\n" for r in capture_records()))
    warehouse = str(root / "wh")
    run_ingest(spark, Warehouse(warehouse, spark, "delta-rs"), settings, str(capture), "defaults-ingest")
    run_replay(spark, Warehouse(warehouse, spark, "delta-rs"), settings, "defaults-replay")
    return capture, warehouse, settings


def test_each_namesrv_runs_its_own_profile_and_grid_until_its_first_start(replayed) -> None:
    _, warehouse, _ = replayed
    history = PublishedHistory(warehouse)
    epochs = {ns: [(r["start_ts"], r["profile"], r["first_tick"], r["tick_interval"]) for r in sorted(history.rows(NAMESRV_EPOCHS, ns), key=lambda r: r["start_ts"])]
              for ns in (NS_49, NS_FAST, NS_PLAIN)}
    o49, ofast, oplain = S + 1000, S + 1007, S + 1014  # each one's first record: the tick origin
    assert epochs == {
        NS_49: [(o49, "rocketmq-4.9", o49 + 5000, 10_000), (UPGRADE, "rocketmq-5", UPGRADE + 5, 4000)],
        NS_FAST: [(ofast, "rocketmq-5", ofast + 5, 3000)],
        NS_PLAIN: [(oplain, "rocketmq-5", oplain + 5, 5000)],
    }
    # a 4.9 NameServer's answer has no enableActingMaster; after the upgrade it has
    before, after = (json.loads(history.route_at(NS_49, "t-b-stays", t).body) for t in (UPGRADE - 1, UPGRADE + 100_000))
    assert [sorted(b) for b in before["brokerDatas"]] == [["brokerAddrs", "brokerName", "cluster"]]
    assert [b["enableActingMaster"] for b in after["brokerDatas"]] == [False]


def test_the_replay_equals_the_model_given_the_same_settings_at_every_tick(spark, replayed) -> None:
    capture, warehouse, settings = replayed
    compared, mismatches, notes = compare_every_tick(capture, warehouse, settings)
    assert compared > 3 * 100
    assert mismatches == 0, "\n".join(notes)
    compare_changes(spark, capture, warehouse, settings)


@pytest.mark.parametrize(("namesrv", "expired_at"), [
    # last registration + 120 000 ms, then the first tick after it on that NameServer's own grid (on
    # the default grid, S+5+k*5000 from its first record, it would be another tick)
    (NS_49, S + 246_000),  # S+122500 -> S+242500; 4.9 grid S+6000+k*10000 (default grid: S+246005)
    (NS_FAST, S + 244_012),  # S+122507 -> S+242507; grid S+1012+k*3000 (default grid: S+246012)
    (NS_PLAIN, S + 246_019),  # S+122514 -> S+242514; grid S+1019+k*5000
])
def test_the_silent_broker_expires_at_a_tick_of_its_namesrvs_grid(replayed, namesrv: str, expired_at: int) -> None:
    _, warehouse, _ = replayed
    history = PublishedHistory(warehouse)

    def live_addrs(t: int) -> set[str]:
        return {key if isinstance(key, str) else key[1] for key in history.snapshot_at(namesrv, t).brokerLiveTable}

    leaving = next(a for a in live_addrs(S + 100_000) if a.endswith(".2:10911"))
    assert leaving in live_addrs(expired_at - 1)
    assert leaving not in live_addrs(expired_at)
