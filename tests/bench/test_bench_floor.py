"""The read-as-text floor of ``nsreplay bench`` reads exactly the capture files listed, whatever
their names: Hadoop's reader takes ``[``, ``{``, ``*``, ``?`` in a path for a glob."""

from __future__ import annotations

from pathlib import Path

from nsreplay.bench import _floor


def test_the_floor_reads_each_listed_file_once_whatever_its_name(spark, tmp_path: Path) -> None:
    captures = tmp_path / "captures"
    captures.mkdir()
    # b[1] and c{1,2} would match b1 and c1, c2 as globs: the floor then read those twice and the
    # bracketed files not at all
    lines = {"b[1].jsonl": 3, "b1.jsonl": 5, "c{1,2}.jsonl": 7, "c1.jsonl": 11, "c2.jsonl": 13}
    for name, count in lines.items():
        (captures / name).write_text("".join(f'{{"n": {i}}}\n' for i in range(count)))
    _, _, files, _, read, _ = _floor(str(captures), None, "floor-names")
    assert sorted(Path(f.path).name for f in files) == sorted(lines)
    assert read == sum(lines.values())
