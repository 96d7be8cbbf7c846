"""In the C/POSIX locale a JVM names files in ASCII where Python uses UTF-8: the JVMs nsreplay starts
get a UTF-8 ``LC_CTYPE`` (``nsreplay.jvm_locale``), so a non-ASCII warehouse or capture path is the
same path for both."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from nsreplay.jvm_locale import codeset, ctype_locale, jvm_locale_overrides

ROOT = Path(__file__).resolve().parents[1]
LOCALE_VARIABLES = ("LC_ALL", "LC_CTYPE", "LANG", "LANGUAGE", "LC_MESSAGES", "LC_COLLATE")

utf8 = next((name for name in ("C.UTF-8", "C.utf8") if (codeset(name) or "").upper().replace("-", "") == "UTF8"), None)
needs_utf8 = pytest.mark.skipif(utf8 is None, reason="this machine has no C.UTF-8 locale to give the JVM")


def test_the_ctype_locale_follows_posix_precedence() -> None:
    assert ctype_locale({}) == "C"
    assert ctype_locale({"LANG": "C.UTF-8"}) == "C.UTF-8"
    assert ctype_locale({"LANG": "C.UTF-8", "LC_CTYPE": "POSIX"}) == "POSIX"
    assert ctype_locale({"LANG": "C.UTF-8", "LC_CTYPE": "POSIX", "LC_ALL": "C"}) == "C"
    assert ctype_locale({"LANG": "C", "LC_ALL": ""}) == "C"  # an empty variable counts as unset


@needs_utf8
@pytest.mark.parametrize(
    ("environ", "overrides"),
    [
        ({}, {"LC_CTYPE": utf8}),  # no locale at all (cron, a bare container)
        ({"LANG": "C"}, {"LC_CTYPE": utf8}),
        ({"LANG": "POSIX", "LC_CTYPE": "C"}, {"LC_CTYPE": utf8}),
        ({"LANG": "C.UTF-8", "LC_ALL": "C"}, {"LC_ALL": utf8}),  # LC_ALL overrides LC_CTYPE: it is the one replaced
        ({"LC_ALL": "xx_NOT.UTF-8"}, {"LC_ALL": utf8}),  # not installed: the process would get the C locale
        ({"LANG": "C.UTF-8"}, {}),
        ({"LC_ALL": "C.UTF-8", "LANG": "C"}, {}),
    ],
)
def test_only_an_ascii_locale_is_replaced(environ, overrides) -> None:
    assert jvm_locale_overrides(environ) == overrides


@needs_utf8
@pytest.mark.parametrize("locale_env", [{"LC_ALL": "C"}, {"LANG": "C"}, {}], ids=["LC_ALL=C", "LANG=C", "no locale"])
def test_spark_submit_writes_a_non_ascii_path_under_its_own_name(tmp_path: Path, locale_env: dict[str, str]) -> None:
    """Before, under ``LC_ALL=C`` ``./spark-submit.sh jobs/rebuild_routes.py --warehouse /tmp/wé``
    wrote ``/tmp/w??`` and failed ("committed write ... not found in the history of /tmp/w??/...")."""
    job = tmp_path / "write_one.py"
    job.write_text(
        "import os, sys\nfrom pyspark.sql import SparkSession\n"
        "spark = SparkSession.builder.getOrCreate()\n"
        "spark.range(3).write.parquet(sys.argv[1])\n"
        "print('jnu', spark.sparkContext._jvm.java.lang.System.getProperty('sun.jnu.encoding'))\n"
        "spark.stop()\n"
    )
    out = tmp_path / "w\u00e9"  # é
    env = {k: v for k, v in os.environ.items() if k not in LOCALE_VARIABLES} | locale_env | {"NSREPLAY_ENV": "test"}
    run = subprocess.run([str(ROOT / "spark-submit.sh"), str(job), str(out)], cwd=tmp_path, env=env,
                         capture_output=True, timeout=300)
    assert run.returncode == 0, run.stderr.decode("utf-8", "replace")[-2000:]
    assert b"jnu UTF-8" in run.stdout, run.stdout[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["w\u00e9"]
    assert list(out.glob("*.parquet"))
