"""``./spark-submit.sh`` passes Spark options through (interfaces.md, "on a cluster"), in either of the
spellings spark-submit itself takes: ``--master URL`` and ``--master=URL``. What the script adds for
a master that is not local (the project code as ``--py-files``) must not depend on the spelling."""

from __future__ import annotations

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
