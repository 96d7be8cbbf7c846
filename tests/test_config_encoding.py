"""conf/ files are UTF-8 (TOML says so; Spark reads spark-defaults.conf as UTF-8), whatever the
locale's charset: a non-ASCII setting reads the same in a process whose locale is not UTF-8."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: A Python whose default text encoding is ASCII: the C locale without Python's UTF-8 mode and
#: without its locale coercion (as under a locale with another charset, which this machine may lack).
ASCII_PYTHON = {"LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}


@pytest.fixture
def conf_dir(tmp_path: Path) -> Path:
    conf = tmp_path / "conf"
    (conf / "base").mkdir(parents=True)
    (conf / "local").mkdir()
    (conf / "base" / "nsreplay.toml").write_text((ROOT / "conf" / "base" / "nsreplay.toml").read_text(encoding="utf-8"), encoding="utf-8")
    (conf / "local" / "nsreplay.toml").write_text('# entrepôt: the warehouse\n[warehouse]\nroot = "/data/entrepôt"\n', encoding="utf-8")
    (conf / "base" / "spark-defaults.conf").write_text("# données\nspark.app.name   nsreplay-données\n", encoding="utf-8")
    return conf


def run_ascii_python(code: str, conf: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, **ASCII_PYTHON, "NSREPLAY_CONF_DIR": str(conf), "PYTHONPATH": str(ROOT)}
    env.pop("NSREPLAY_ENV", None)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=120)


def test_the_ascii_python_is_ascii(conf_dir: Path) -> None:
    run = run_ascii_python("import locale; print(locale.getpreferredencoding())", conf_dir)
    assert run.stdout.strip() == b"ANSI_X3.4-1968", run.stderr


def test_settings_with_non_ascii_text_read_the_same_in_any_locale(conf_dir: Path) -> None:
    run = run_ascii_python("from nsreplay.config import load_settings; print(ascii(load_settings().warehouse.root))", conf_dir)
    assert (run.returncode, run.stdout.strip()) == (0, rb"'/data/entrep\xf4t'"), run.stderr[-2000:]


def test_spark_defaults_with_non_ascii_text_read_the_same_in_any_locale(conf_dir: Path) -> None:
    code = ("from pathlib import Path; from nsreplay.runtime import read_spark_defaults; "
            f"print(ascii(read_spark_defaults([Path({str(conf_dir / 'base' / 'spark-defaults.conf')!r})])))")
    run = run_ascii_python(code, conf_dir)
    assert (run.returncode, run.stdout.strip()) == (0, rb"{'spark.app.name': 'nsreplay-donn\xe9es'}"), run.stderr[-2000:]
