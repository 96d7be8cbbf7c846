"""Where a relative path points. One a user typed (``--captures``, ``--warehouse``, ``--out``) is read
from the directory the command was run from, also through ``spark-submit.sh``, which runs its job from
the project root; one from ``conf/`` or a default is the project's."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from nsreplay.cli import _bench_out
from nsreplay.config import PROJECT_ROOT
from nsreplay.runtime import CALLER_DIR_VARIABLE, UsageError, resolve_path, resolve_setting_path


@pytest.fixture
def elsewhere(tmp_path, monkeypatch) -> Path:
    """A working directory outside the project, with no caller directory passed down."""
    monkeypatch.delenv(CALLER_DIR_VARIABLE, raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_typed_relative_path_is_read_from_the_working_directory(elsewhere) -> None:
    assert resolve_path("caps") == str(elsewhere / "caps")
    assert resolve_path(".") == str(elsewhere)  # --captures . is where the user stands, not the project
    assert resolve_path("../x") == str(elsewhere / ".." / "x")


def test_the_directory_spark_submit_was_run_from_wins_over_the_jobs_own(elsewhere, monkeypatch) -> None:
    monkeypatch.setenv(CALLER_DIR_VARIABLE, "/data/captures")
    assert resolve_path("day-1") == "/data/captures/day-1"


def test_absolute_paths_and_uris_are_kept_and_blank_ones_refused(elsewhere) -> None:
    assert resolve_path("/abs/wh") == "/abs/wh"
    assert resolve_path("s3a://bucket/wh") == "s3a://bucket/wh"
    for blank in ("", "  "):
        with pytest.raises(UsageError, match="an empty path"):
            resolve_path(blank)
        with pytest.raises(UsageError, match="an empty path"):
            resolve_setting_path(blank)


def test_paths_from_conf_and_defaults_are_the_projects_wherever_the_command_runs(elsewhere) -> None:
    assert resolve_setting_path("warehouse") == str(PROJECT_ROOT / "warehouse")
    assert resolve_setting_path("/abs/wh") == "/abs/wh"
    assert _bench_out(None) == str(PROJECT_ROOT / "captures" / "bench")
    assert _bench_out("mine") == str(elsewhere / "mine")


def test_spark_submit_reads_a_relative_capture_path_from_where_it_was_run(tmp_path) -> None:
    """Before, the job read ``--captures caps`` as the project's ``caps`` (and ``--captures .`` as the
    whole checkout: its demo captures and every ``.json`` file of its node_modules)."""
    (tmp_path / "elsewhere").mkdir()
    result = subprocess.run(
        [str(PROJECT_ROOT / "spark-submit.sh"), "jobs/rebuild_routes.py", "--captures", "caps", "--warehouse", "wh"],
        cwd=tmp_path / "elsewhere", capture_output=True, text=True, timeout=600,
    )
    last = [line for line in result.stderr.splitlines() if line.strip()][-1]
    assert (result.returncode, last) == (1, f"rebuild_routes.py: CaptureNotFoundError: no capture file at {tmp_path / 'elsewhere' / 'caps'}"), result.stderr[-2000:]
    assert not (tmp_path / "elsewhere" / "wh").exists() and not (PROJECT_ROOT / "wh").exists()


def test_a_local_file_uri_names_the_path_it_means_in_each_spelling(elsewhere) -> None:
    """``file:/abs`` (how Hadoop and Spark print a local path) was taken for a relative name: the job
    wrote its warehouse into ``./file:/abs`` and the Spark-free commands reported "no such directory";
    ``file:///my%20wh`` is ``/my wh``, as Hadoop and the warehouse read it."""
    assert resolve_path("file:/abs/wh") == "/abs/wh"
    assert resolve_path("file:///abs/my%20wh/") == "/abs/my wh/"
    assert resolve_path("file://localhost/abs/wh") == "/abs/wh"
    assert resolve_path("file:///data/caps/*.jsonl.gz") == "/data/caps/*.jsonl.gz"
    assert resolve_setting_path("file:/abs/wh") == "/abs/wh"
    assert resolve_path("file://nas/share/wh") == "file://nas/share/wh"  # another host's: left to the filesystem
    # a relative name with a colon is a name, not a URI
    assert resolve_path("ns1-2026-11-30T04:00:00.jsonl.gz") == str(elsewhere / "ns1-2026-11-30T04:00:00.jsonl.gz")
