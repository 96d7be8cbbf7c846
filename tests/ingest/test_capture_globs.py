"""Globs in capture URIs (``s3a://``, ``hdfs://``) mean what ``glob.glob(pattern, recursive=True)``
means for a local path. The matcher is checked against a table, the table against ``glob.glob``
itself, and the pyarrow listing (the code that lists S3 and HDFS) against ``list_capture_files`` on
the same tree through ``pyarrow.fs.LocalFileSystem``. No Spark."""

from __future__ import annotations

import glob
import os
from urllib.parse import unquote

import pyarrow.fs as pafs
import pytest

from nsreplay.storage.filesystem import arrow_filesystem
from pipelines.ingest.capture_files import CaptureNotFoundError, _list_remote, _split_glob, glob_files, list_capture_files, match_glob

PATHS = [
    "bucket/top.jsonl",
    "bucket/cap/a.jsonl",
    "bucket/cap/b.jsonl.gz",
    "bucket/cap/a1.log",
    "bucket/cap/a22.log",
    "bucket/cap/ab.log",
    "bucket/cap/.hidden.jsonl",
    "bucket/cap/_u.jsonl",
    "bucket/cap/x+y.jsonl",
    "bucket/cap/xxy.jsonl",
    "bucket/cap/notes.txt",
    "bucket/cap/2024/e.gz",
    "bucket/cap/2024/01/c.jsonl.gz",
    "bucket/cap/2024/02/d.jsonl",
    "bucket/cap/.tmp/f.jsonl",
    "bucket/cap/_tmp/g.jsonl",
    "bucket/cap/sub/deep/h.jsonl",
    "bucket/cap/sub/.deep/i.jsonl",
    "bucket/other/j.jsonl",
]
GZ = ["bucket/cap/b.jsonl.gz", "bucket/cap/2024/e.gz", "bucket/cap/2024/01/c.jsonl.gz"]

# pattern -> the files of PATHS it matches (test_the_table_is_what_glob_glob_gives checks them)
CASES = {
    "bucket/cap/*.jsonl": ["bucket/cap/a.jsonl", "bucket/cap/_u.jsonl", "bucket/cap/x+y.jsonl", "bucket/cap/xxy.jsonl"],
    "bucket/cap/*": [  # any name but a dot-name, no suffix filter, no directory
        "bucket/cap/a.jsonl", "bucket/cap/b.jsonl.gz", "bucket/cap/a1.log", "bucket/cap/a22.log", "bucket/cap/ab.log",
        "bucket/cap/_u.jsonl", "bucket/cap/x+y.jsonl", "bucket/cap/xxy.jsonl", "bucket/cap/notes.txt",
    ],
    "bucket/cap/.*": ["bucket/cap/.hidden.jsonl"],
    "bucket/cap/a?.log": ["bucket/cap/a1.log", "bucket/cap/ab.log"],
    "bucket/cap/a[0-9].log": ["bucket/cap/a1.log"],
    "bucket/cap/a[0-9][0-9].log": ["bucket/cap/a22.log"],
    "bucket/cap/a[!0-9].log": ["bucket/cap/ab.log"],
    "bucket/cap/x+y.jsonl": ["bucket/cap/x+y.jsonl"],  # + is a character, not a regex repeat
    "bucket/cap/x+*.jsonl": ["bucket/cap/x+y.jsonl"],
    "bucket/*.jsonl": ["bucket/top.jsonl"],  # * does not cross /
    "bucket/*/a.jsonl": ["bucket/cap/a.jsonl"],
    "bucket/cap/*/*.gz": ["bucket/cap/2024/e.gz"],
    "bucket/cap/*/*/*": ["bucket/cap/2024/01/c.jsonl.gz", "bucket/cap/2024/02/d.jsonl", "bucket/cap/sub/deep/h.jsonl"],
    "**/*.gz": GZ,  # ** first
    "bucket/**/**/*.gz": GZ,  # glob.glob yields some of these twice; each is read once
    "bucket/**/h.jsonl": ["bucket/cap/sub/deep/h.jsonl"],  # ** in the middle
    "bucket/cap/**/*.jsonl": [  # ** as zero directories too; never through a dot-name
        "bucket/cap/a.jsonl", "bucket/cap/_u.jsonl", "bucket/cap/x+y.jsonl", "bucket/cap/xxy.jsonl",
        "bucket/cap/2024/02/d.jsonl", "bucket/cap/_tmp/g.jsonl", "bucket/cap/sub/deep/h.jsonl",
    ],
    "bucket/**/i.jsonl": [],
    "bucket/cap/2024/**": ["bucket/cap/2024/e.gz", "bucket/cap/2024/01/c.jsonl.gz", "bucket/cap/2024/02/d.jsonl"],  # ** last
    "bucket/cap/sub/**": ["bucket/cap/sub/deep/h.jsonl"],
    "bucket/cap/**/.hidden.jsonl": ["bucket/cap/.hidden.jsonl"],
    "bucket/cap/.tmp/*": ["bucket/cap/.tmp/f.jsonl"],
    "bucket/cap/sub/.*/*": ["bucket/cap/sub/.deep/i.jsonl"],
    "bucket/cap/a**.jsonl": ["bucket/cap/a.jsonl"],  # ** inside a name is *
    "bucket/cap//a?.log": ["bucket/cap/a1.log", "bucket/cap/ab.log"],
    "bucket/cap/*/": [],  # directories only
    "bucket/cap/20*": [],  # a matched directory is not read
    "bucket/top.jsonl/*": [],
    "bucket/top.jsonl/**": [],  # ** last takes a name at least: a file is not below itself
    "bucket/nope/**": [],
}


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("globs")
    for n, rel in enumerate(PATHS):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x" * n)  # sizes differ, so a listing that mixes files up shows
    return str(root)


@pytest.mark.parametrize(("pattern", "expected"), CASES.items(), ids=list(CASES))
def test_the_matcher_gives_what_the_table_says(pattern, expected) -> None:
    assert match_glob(pattern, PATHS) == [p for p in PATHS if p in expected]
    # absolute paths (HDFS, local) like bucket-first ones (S3)
    assert match_glob(f"/data/{pattern}", [f"/data/{p}" for p in PATHS]) == [f"/data/{p}" for p in PATHS if p in expected]


@pytest.mark.parametrize(("pattern", "expected"), CASES.items(), ids=list(CASES))
def test_the_table_is_what_glob_glob_gives(tree, pattern, expected) -> None:
    found = {os.path.normpath(p) for p in glob.glob(pattern, root_dir=tree, recursive=True) if os.path.isfile(os.path.join(tree, p))}
    assert sorted(found) == sorted(expected)


@pytest.mark.parametrize(("pattern", "expected"), CASES.items(), ids=list(CASES))
def test_the_pyarrow_listing_reads_what_the_local_glob_reads(tree, pattern, expected) -> None:
    spec = f"{tree}/{pattern}"
    listed = [i.path for i in glob_files(pafs.LocalFileSystem(), spec)]
    if not expected:
        assert listed == []
        for how, listing, shown in ((list_capture_files, spec, spec), (_list_remote, f"file://{spec}", f"file://{spec}")):
            with pytest.raises(CaptureNotFoundError) as e:
                how(listing)
            assert str(e.value) == f"no capture file at {shown}"
        return
    local = list_capture_files(spec)
    assert [os.path.relpath(f.path, tree) for f in local] == sorted(expected)
    assert sorted(listed) == [f.path for f in local]
    # the whole URI path: split, pyarrow listing, CaptureFile rows
    remote = _list_remote(f"file://{spec}").files
    assert [(f.path.removeprefix("file://"), f.size_bytes) for f in remote] == [(f.path, f.size_bytes) for f in local]


def test_a_uri_that_names_an_existing_directory_with_glob_characters_reads_that_directory(tmp_path) -> None:
    """As for a local path: ``lit[1]`` is the directory of that name (its hidden and suffix rules
    apply), not a glob matching ``lit1``."""
    for rel in ("lit[1]/k.jsonl", "lit[1]/_skip.jsonl", "lit[1]/n.txt", "lit1"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("{}\n")
    local = [f.path for f in list_capture_files(f"{tmp_path}/lit[1]")]
    remote = [f.path for f in _list_remote(f"file://{tmp_path}/lit[1]").files]
    assert remote == [f"file://{tmp_path}/lit%5B1%5D/k.jsonl"]  # a URI: what it must not hold as it is, encoded
    assert local == [unquote(p.removeprefix("file://")) for p in remote] == [f"{tmp_path}/lit[1]/k.jsonl"]


@pytest.mark.parametrize(
    ("uri", "split"),
    [
        ("s3a://b/cap/*.jsonl.gz", ("s3a://b/cap/", "*.jsonl.gz")),
        ("hdfs://nn/data/**/*.gz", ("hdfs://nn/data/", "**/*.gz")),
        ("hdfs://nn/*/x.gz", ("hdfs://nn/", "*/x.gz")),
        ("s3a://b/cap/d=2024-0[1-3]/x?.gz", ("s3a://b/cap/", "d=2024-0[1-3]/x?.gz")),
        ("s3a://b/cap/a?.gz", ("s3a://b/cap/", "a?.gz")),  # a ? not followed by name= is a wildcard
        ("s3a://b/cap/*.gz?region=us-east-1", ("s3a://b/cap/?region=us-east-1", "*.gz")),
        ("s3a://b/my%20cap/x%20*.gz", ("s3a://b/my%20cap/", "x *.gz")),  # decoded as pyarrow decodes the rest
        ("s3a://b/cap?region=us-east-1", None),  # not a glob: read as before
        ("s3a://b/cap/x.jsonl.gz", None),
        ("s3a://b/a%2Ab", None),
    ],
)
def test_a_glob_uri_splits_before_the_name_with_its_first_glob_character(uri, split) -> None:
    assert _split_glob(uri) == split


def test_the_directory_above_a_glob_keeps_the_uri_options() -> None:
    base, rest = _split_glob("s3a://b/cap/*.gz?region=us-east-1")  # ?region= keeps pyarrow off the network
    fs, root = arrow_filesystem(base)
    assert (type(fs).__name__, fs.region, root, rest) == ("S3FileSystem", "us-east-1", "b/cap", "*.gz")


@pytest.mark.parametrize("uri", ["s3a://logs-*/cap/x.gz", "hdfs://nn?/x.gz"])
def test_a_glob_cannot_name_the_bucket_or_host(uri) -> None:
    with pytest.raises(ValueError, match="bucket or host"):
        _split_glob(uri)
