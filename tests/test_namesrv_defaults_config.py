"""[replay.namesrvs."ADDR"]: a NameServer's own profile and settings before its first start record,
read from conf/<env>/nsreplay.toml over conf/base, and refused at load when the NameServer could
not run them."""

from __future__ import annotations

import pytest
from site_conf import settings_with

from nsreplay.config import PROJECT_ROOT, ConfigError

NS_49 = "10.0.0.11:9876"
NS_FAST = "10.0.0.12:9876"


def test_the_base_configuration_names_no_namesrv(tmp_path) -> None:
    replay = settings_with(tmp_path, "").replay
    assert replay.namesrvs == {}
    assert replay.defaults_for(NS_49) == ("rocketmq-5", {})


def test_a_namesrv_has_its_own_profile_and_config_over_the_defaults(tmp_path) -> None:
    replay = settings_with(tmp_path, f"""
[replay]
default_config = {{ orderMessageEnable = true, scanNotActiveBrokerInterval = 4000 }}
[replay.namesrvs."{NS_49}"]
profile = "rocketmq-4.9"
[replay.namesrvs."{NS_FAST}"]
config = {{ scanNotActiveBrokerInterval = 1000, supportActingMaster = "true" }}
""").replay
    assert replay.defaults_for(NS_49) == ("rocketmq-4.9", {"orderMessageEnable": True, "scanNotActiveBrokerInterval": 4000})
    # its config is laid over default_config key by key; the profile stays the default
    assert replay.defaults_for(NS_FAST) == ("rocketmq-5", {"orderMessageEnable": True, "scanNotActiveBrokerInterval": 1000, "supportActingMaster": "true"})
    assert replay.defaults_for("10.0.0.13:9876") == ("rocketmq-5", {"orderMessageEnable": True, "scanNotActiveBrokerInterval": 4000})


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        (f'[replay.namesrvs."{NS_49}"]\nprofile = "rocketmq-4.8"\n',
         rf'\[replay.namesrvs."{NS_49}"\] profile must be one of rocketmq-4.9, rocketmq-5, not \'rocketmq-4.8\''),
        (f'[replay.namesrvs."{NS_49}"]\nprofle = "rocketmq-4.9"\n',
         rf'\[replay.namesrvs."{NS_49}"\]: unknown key \'profle\' \(it takes profile and config\)'),
        (f'[replay.namesrvs]\n"{NS_49}" = "rocketmq-4.9"\n',
         rf'\[replay.namesrvs."{NS_49}"\] must be a table with a profile, a config or both'),
        (f'[replay.namesrvs."{NS_49}"]\nconfig = 5000\n',
         rf'\[replay.namesrvs."{NS_49}"\] config must be a table of NameServer settings'),
        (f'[replay.namesrvs."{NS_49}"]\nconfig = {{ scanNotActiveBrokerInterval = 0 }}\n',
         rf'\[replay.namesrvs."{NS_49}"\] config: config scanNotActiveBrokerInterval must be positive'),
        ('[replay]\nnamesrvs = ["10.0.0.11:9876"]\n', r"\[replay\] namesrvs must be a table of NameServer addresses"),
        ('[replay]\ndefault_config = { scanNotActiveBrokerInterval = "soon" }\n', r"\[replay\] default_config: .*scanNotActiveBrokerInterval"),
    ],
    ids=["unknown-profile", "misspelt-key", "not-a-table", "config-not-a-table", "config-refused", "namesrvs-not-a-table", "default-config-refused"],
)
def test_a_setting_the_namesrv_could_not_run_is_refused_at_load(tmp_path, toml: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        settings_with(tmp_path, toml)


def test_the_readme_example_loads_as_it_says(tmp_path) -> None:
    readme = (PROJECT_ROOT / "README.md").read_text()
    section = readme[readme.index("### Profiles: 4.9 or 5.x, per NameServer"):]
    example = section[section.index("```toml\n") + len("```toml\n"):section.index("```\n", section.index("```toml\n") + 1)]
    replay = settings_with(tmp_path, example).replay
    assert replay.defaults_for(NS_49) == ("rocketmq-4.9", {})
    assert replay.defaults_for(NS_FAST) == ("rocketmq-5", {"scanNotActiveBrokerInterval": 3000})
