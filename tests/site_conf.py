"""A configuration folder for a test: conf/base as shipped, plus an environment's nsreplay.toml."""

from __future__ import annotations

import shutil
from pathlib import Path

from nsreplay.config import PROJECT_ROOT, Settings, load_settings


def settings_with(directory: Path, toml: str, env: str = "site") -> Settings:
    """The base configuration with ``toml`` as ``env``'s nsreplay.toml, in ``directory``."""
    shutil.copytree(PROJECT_ROOT / "conf" / "base", directory / "base", dirs_exist_ok=True)
    (directory / env).mkdir(exist_ok=True)
    (directory / env / "nsreplay.toml").write_text(toml)
    return load_settings(env, directory)
