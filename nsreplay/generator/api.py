"""Python entry point: :func:`generate` plans a capture and writes it to a directory.

Contract:

* ``generate(config, out_dir, workers=2)`` writes the capture files and ``_manifest.json`` into
  ``out_dir`` (created if needed). Files of an earlier run with the same file prefix, and an earlier
  manifest, are removed first; nothing else in the directory is touched.
* The output depends only on ``config`` (byte-identical for the same config and seed), never on
  ``workers``.
* The returned :class:`CaptureSummary` carries the counts of the manifest plus wall-clock timings.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import GeneratorConfig, validate
from .plan import build_plan
from .writer import MANIFEST_NAME, write_files, write_manifest

__all__ = ["CaptureSummary", "generate"]


@dataclass(frozen=True)
class CaptureSummary:
    """What one generation produced."""

    out_dir: Path
    manifest_path: Path
    preset: str
    seed: int
    files: int
    lines: int
    records: int
    junk_lines: int
    duplicate_lines: int
    bytes: int
    uncompressed_bytes: int
    distinct_register_bodies: int
    register_lines: int
    #: Ground-truth ``response`` records written (answered client route queries).
    responses: int
    first_ts: int | None
    last_ts: int | None
    namesrvs: int
    broker_groups: int
    incidents: int
    plan_seconds: float
    write_seconds: float
    workers: int

    @property
    def seconds(self) -> float:
        """Total wall-clock time."""
        return self.plan_seconds + self.write_seconds

    def describe(self) -> str:
        """One paragraph for humans."""
        def size(n: int) -> str:
            for unit in ("B", "KB", "MB", "GB"):
                if n < 1024 or unit == "GB":
                    return f"{n:.1f} {unit}" if unit != "B" else f"{n} B"
                n /= 1024  # type: ignore[assignment]
            return f"{n} B"

        hours = ((self.last_ts or 0) - (self.first_ts or 0)) / 3_600_000
        return (
            f"Generated capture '{self.preset}' (seed {self.seed}) in {self.out_dir}: {self.files} files, "
            f"{self.lines:,} lines ({self.records:,} records, {self.register_lines:,} REGISTER_BROKER, "
            f"{self.junk_lines} junk, {self.duplicate_lines} duplicates, {self.responses:,} route answers) "
            f"from {self.namesrvs} NameServers and "
            f"{self.broker_groups} broker groups over {hours:.2f} h with {self.incidents} planned incidents; "
            f"{size(self.bytes)} on disk ({size(self.uncompressed_bytes)} uncompressed), "
            f"{self.distinct_register_bodies} distinct register bodies; planned in {self.plan_seconds:.1f} s, "
            f"written in {self.write_seconds:.1f} s with {self.workers} worker(s). Manifest: {self.manifest_path}."
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["out_dir"] = str(self.out_dir)
        d["manifest_path"] = str(self.manifest_path)
        d["seconds"] = self.seconds
        return d


def _clean(out_dir: Path, prefix: str) -> None:
    """Remove what an earlier run wrote in ``out_dir`` with this file prefix: its capture files (named
    as :func:`~nsreplay.generator.layout` names them, ``PREFIX-00000.jsonl.gz`` or
    ``PREFIX-ns0-00000.jsonl``), their unfinished ``.tmp`` files and the manifest. Any other file is
    the user's and is kept, even one whose name starts with the prefix."""
    ours = re.compile(re.escape(prefix) + r"-(?:ns[0-9]+-)?[0-9]{5,}\.jsonl(?:\.gz)?(?:\.tmp)?")
    for path in out_dir.iterdir():
        if (path.name == MANIFEST_NAME or ours.fullmatch(path.name)) and path.is_file() and not path.is_symlink():
            path.unlink()


def generate(config: GeneratorConfig, out_dir: Path, *, workers: int = 2) -> CaptureSummary:
    """Generate the capture described by ``config`` into ``out_dir``."""
    validate(config)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    _clean(out_dir, config.output.file_prefix)
    t0 = time.perf_counter()
    plan = build_plan(config)
    t1 = time.perf_counter()
    files = write_files(plan, out_dir, max(1, workers))
    manifest = write_manifest(plan, files, out_dir)
    t2 = time.perf_counter()
    st = plan.stats
    return CaptureSummary(
        out_dir=out_dir,
        manifest_path=manifest,
        preset=config.preset,
        seed=config.seed,
        files=len(files),
        lines=sum(f.lines for f in files),
        records=st.records,
        junk_lines=st.junk_lines,
        duplicate_lines=st.duplicate_lines,
        bytes=sum(f.bytes for f in files),
        uncompressed_bytes=sum(f.uncompressed_bytes for f in files),
        distinct_register_bodies=st.distinct_register_bodies,
        register_lines=st.by_code.get("103", 0),
        responses=st.by_kind.get("response", 0),
        first_ts=st.first_ts,
        last_ts=st.last_ts,
        namesrvs=len(plan.world.namesrvs),
        broker_groups=len(plan.world.groups),
        incidents=len(plan.scenario.describe(plan.world)),
        plan_seconds=t1 - t0,
        write_seconds=t2 - t1,
        workers=max(1, workers),
    )
