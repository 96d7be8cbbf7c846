"""How many tasks replay the units, and the one shuffle of the wide records before them
(:func:`~pipelines.replay.transforms.replay_partitions`, :func:`~pipelines.replay.transforms.units_input`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

from nsreplay.config import ConfigError
from pipelines.replay.transforms import REPLAY_COLUMNS, replay_partitions, replay_units, units_input, with_states
from schemas.silver import EVENTS, TOPIC_CONFIGS
from site_conf import settings_with


@pytest.mark.parametrize(
    ("units", "cores", "per_core", "tasks"),
    [
        (204, 2, 4, 8),  # bench-day on this machine: as many tasks as before the setting
        (204, 64, 4, 204),  # a cluster larger than the work: a task per unit, no empty ones
        (1000, 64, 4, 256),
        (3, 2, 4, 3),
        (0, 2, 4, 1),  # a window without units still plans one task
        (50, 16, 1, 16),
    ],
)
def test_the_units_run_in_a_few_tasks_per_core_and_never_more_tasks_than_units(units: int, cores: int, per_core: int, tasks: int) -> None:
    assert replay_partitions(units, cores, per_core) == tasks


def test_the_setting_defaults_to_four_tasks_a_core_and_must_be_a_positive_integer(tmp_path: Path) -> None:
    assert settings_with(tmp_path, "").replay.unit_tasks_per_core == 4
    assert settings_with(tmp_path, "[replay]\nunit_tasks_per_core = 1\n").replay.unit_tasks_per_core == 1
    for bad in ("0", "-2", "2.5", "true", '"4"'):
        with pytest.raises(ConfigError, match=r"\[replay\] unit_tasks_per_core must be a positive integer"):
            settings_with(tmp_path, f"[replay]\nunit_tasks_per_core = {bad}\n")


def _frames(spark):
    fields = {f.name: f for f in EVENTS.schema.fields}
    routed_schema = StructType([fields[c] for c in REPLAY_COLUMNS] + [StructField("record_rank", LongType()), StructField("unit", StringType())])
    routed = spark.createDataFrame([], routed_schema)
    states = spark.createDataFrame([], StructType([StructField("namesrv", StringType()), StructField("unit", StringType()),
                                                   StructField("replay_state", BinaryType())]))
    return routed, states, spark.createDataFrame([], TOPIC_CONFIGS.schema)


def _wide_shuffles(plan: str) -> list[str]:
    """The keys of the plan's shuffles whose rows hold the records' ``ext_fields``: for each
    ``Exchange``, the first node below it that lists columns."""
    lines = plan.splitlines()
    found = []
    for i, line in enumerate(lines):
        shuffle = re.search(r"Exchange \w+\(([^)]*)\)", line)
        if shuffle is None:
            continue
        depth = line.index("+-")
        below = (ln for ln in lines[i + 1:] if "+-" in ln and ln.index("+-") > depth)
        columns = next((ln for ln in below if "[" in ln), "")
        if "ext_fields" in columns:
            found.append(shuffle.group(1))
    return found


@pytest.mark.parametrize("resumed", [False, True])
@pytest.mark.parametrize("partitions", [3, 5, 12])
def test_the_wide_records_are_shuffled_once_into_the_replays_tasks(spark, resumed: bool, partitions: int) -> None:
    """Whether or not units resume from states, and however large silver's decoded bodies (here with
    no size estimate: Spark cannot broadcast them), the records reach the units through one hash
    shuffle by (namesrv, unit) into the planned number of tasks, whatever
    ``spark.sql.shuffle.partitions`` says; only the narrow body ids and the bodies move again."""
    routed, states, bodies = _frames(spark)
    records, named = units_input(with_states(routed, states if resumed else None), bodies, partitions)
    out = replay_units(records, named, origins={}, until=0, defaults={})
    plan = out._jdf.queryExecution().executedPlan().toString()
    assert [re.sub(r"#\d+", "", keys) for keys in _wide_shuffles(plan)] == [f"namesrv, unit, {partitions}"], plan
    assert "FlatMapCoGroupsInArrow" in plan
    assert str(spark.conf.get("spark.sql.shuffle.partitions")) not in {"3", "5", "12"}
