"""``./spark-submit.sh`` passes Spark options through (interfaces.md, "on a cluster"), in either of the
spellings spark-submit itself takes: ``--master URL`` and ``--master=URL``. What the script adds for
a master that is not local (the project code as ``--py-files``) must not depend on the spelling."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def parsed_arguments(*args: str) -> dict[str, str]:
    """spark-submit's own account of the arguments it was given (``--verbose``; the job only prints
    its ``--help``), without the temporary properties file's name."""
    run = subprocess.run([str(ROOT / "spark-submit.sh"), "--verbose", *args], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    lines = (run.stdout + run.stderr).split("Parsed arguments:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    parsed = dict(line.strip().split(None, 1) if len(line.split()) > 1 else (line.strip(), "") for line in lines)
    parsed.pop("propertiesFile")
    return parsed


def test_a_master_given_with_an_equals_sign_is_the_same_master() -> None:
    master = "local-cluster[1,1,1024]"  # separate executor JVMs: the code is shipped as a zip
    spaced = parsed_arguments("--master", master, "jobs/rebuild_routes.py", "--run-id=r1", "--help")
    joined = parsed_arguments(f"--master={master}", "jobs/rebuild_routes.py", "--run-id=r1", "--help")
    assert joined == spaced
    assert spaced["master"] == master and spaced["pyFiles"] == f"file:{ROOT}/dist/nsreplay-code.zip"
    assert spaced["childArgs"] == "[--run-id=r1 --help]"  # the job's own arguments are passed as given


def test_another_conf_folder_gives_the_spark_defaults_and_the_settings(tmp_path: Path) -> None:
    """``NSREPLAY_CONF_DIR`` (a deployment's own conf folder, possibly relative to where the script
    is called from) replaces ``conf/`` for spark-defaults.conf as it does for nsreplay.toml."""
    conf = tmp_path / "deploy" / "conf"
    for env in ("base", "prod"):
        (conf / env).mkdir(parents=True)
    (conf / "base" / "nsreplay.toml").write_text((ROOT / "conf" / "base" / "nsreplay.toml").read_text())
    (conf / "prod" / "nsreplay.toml").write_text('[warehouse]\nroot = "from-the-prod-conf"\n')
    (conf / "base" / "spark-defaults.conf").write_text("spark.nsreplay.marker base\nspark.nsreplay.other base\n")
    (conf / "prod" / "spark-defaults.conf").write_text("spark.nsreplay.other prod\n")
    job = tmp_path / "show_settings.py"
    job.write_text(
        "import os\nfrom nsreplay.config import load_settings\n"
        "s = load_settings()\nprint('settings', os.environ['NSREPLAY_CONF_DIR'], s.conf_dir, s.env, s.warehouse.root)\n"
    )
    env = {**os.environ, "NSREPLAY_CONF_DIR": "deploy/conf", "NSREPLAY_ENV": "prod"}
    run = subprocess.run([str(ROOT / "spark-submit.sh"), "--verbose", str(job)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    out = run.stdout + run.stderr
    used = out.split("Spark properties used", 1)[1].split("\n\n", 1)[0]
    assert "(spark.nsreplay.marker,base)" in used and "(spark.nsreplay.other,prod)" in used, used
    # the project's own conf/base/spark-defaults.conf is not applied on top
    assert "spark.sql.shuffle.partitions" not in used, used
    assert f"settings {conf} {conf} prod from-the-prod-conf" in run.stdout, run.stdout[-2000:]


def test_a_conf_folder_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    env = {**os.environ, "NSREPLAY_CONF_DIR": str(tmp_path / "nope")}
    run = subprocess.run([str(ROOT / "spark-submit.sh"), "jobs/rebuild_routes.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert (run.returncode, run.stderr.strip().splitlines()[-1]) == (2, f"spark-submit.sh: NSREPLAY_CONF_DIR={tmp_path / 'nope'} is not a directory")
