"""``silver.events`` is partitioned by the UTC day of each record's ``ts``, whatever time zone the
Spark session (``spark.sql.session.timeZone``) or the machine is in: a record at 23:59:59.999 UTC
and one at 00:00:00.000 UTC fall on either side of a day, in every zone."""

from __future__ import annotations

import json
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import Iterator

import pytest
from pyspark.sql import functions as F

from nsreplay.config import load_settings
from nsreplay.storage import Warehouse
from pipelines.ingest.run import run_ingest
from pipelines.ingest.transforms import utc_day
from schemas.silver import EVENTS

NS = "10.0.0.10:9876"
MIDNIGHT = 1732147200000  # 2024-11-21T00:00:00.000Z
#: ts -> its UTC day, written by hand: the last millisecond of a day and the first of the next, and
#: the same around a leap day.
DAYS = {
    MIDNIGHT - 1: "2024-11-20",
    MIDNIGHT: "2024-11-21",
    MIDNIGHT + 86_400_000 - 1: "2024-11-21",
    1709251199999: "2024-02-29",  # 2024-02-29T23:59:59.999Z
    1709251200000: "2024-03-01",
}
#: Zones whose offsets put some of those instants on another local day: +13:45 (Chatham's summer),
#: -03:30, +05:45 and -03:00.
ZONES = ["Pacific/Chatham", "America/St_Johns", "Asia/Kathmandu", "America/Sao_Paulo"]


@contextmanager
def session_zone(spark, zone: str) -> Iterator[None]:
    """The session's ``spark.sql.session.timeZone`` set to ``zone`` for the block (an analyst's or
    a cluster's own setting), put back after it."""
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", zone)
    try:
        yield
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)


def test_the_hand_written_days_are_utc_days() -> None:
    for ts, day in DAYS.items():
        assert datetime.fromtimestamp(ts / 1000, timezone.utc).strftime("%Y-%m-%d") == day


@pytest.mark.parametrize("zone", ZONES)
def test_events_fall_on_their_utc_day_in_any_session_time_zone(spark, tmp_path, zone) -> None:
    capture = tmp_path / "capture"
    capture.mkdir()
    records = [{"namesrv": NS, "ts": ts, "seq": i, "kind": "channel", "event": "CONNECT", "conn": f"c{i}", "remote": "10.0.1.5:1"}
               for i, ts in enumerate(sorted(DAYS))]
    (capture / "c.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    warehouse = Warehouse(str(tmp_path / "wh"), spark, "delta-rs")
    settings = load_settings()
    with session_zone(spark, zone):
        run_ingest(spark, warehouse, settings, str(capture), f"days-{zone.replace('/', '-')}")
    got = {r.ts: r.event_date for r in warehouse.read(EVENTS).select("ts", "event_date").collect()}
    assert got == DAYS
    # the partition each row is stored in says the same
    files = {f.partition_values["event_date"] for f in warehouse.files(EVENTS)}
    assert files == set(DAYS.values())


@pytest.mark.parametrize("zone", ZONES)
def test_utc_day_is_the_day_python_gives_in_any_session_time_zone(spark, zone) -> None:
    """The column function itself, down to the epoch's edges and the ends of the years 1-9999."""
    instants = [*DAYS, -1, 0, 86_400_000 - 1, -86_400_000, -62135596800000, 253402300799999]
    frame = spark.createDataFrame([(t,) for t in instants], "ts long")
    with session_zone(spark, zone):
        got = {r.ts: r.day for r in frame.select("ts", utc_day("ts").alias("day")).collect()}
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    assert got == {t: (epoch + timedelta(milliseconds=t)).date().isoformat() for t in instants}
