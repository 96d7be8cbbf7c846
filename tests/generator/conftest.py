"""Fixtures for the generator tests: one tiny capture per session (helpers live in capture_checks.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from capture_checks import Line, read_lines

from nsreplay.generator import generate, preset
from nsreplay.generator.api import CaptureSummary


@pytest.fixture(scope="session")
def tiny_capture(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, CaptureSummary]:
    """The tiny preset generated once (2 workers)."""
    out = tmp_path_factory.mktemp("tiny")
    return out, generate(preset("tiny"), out, workers=2)


@pytest.fixture(scope="session")
def tiny_lines(tiny_capture: tuple[Path, CaptureSummary]) -> list[Line]:
    """Every classified line of the tiny capture."""
    return read_lines(tiny_capture[0])


@pytest.fixture(scope="session")
def tiny_manifest(tiny_capture: tuple[Path, CaptureSummary]) -> dict[str, Any]:
    """The tiny capture's manifest."""
    return json.loads((tiny_capture[0] / "_manifest.json").read_text())


@pytest.fixture(scope="session")
def tiny_records(tiny_lines: list[Line]) -> list[dict[str, Any]]:
    """Valid records of the tiny capture, each once (duplicates removed), in (namesrv, seq) order."""
    seen: set[bytes] = set()
    out = []
    for line in tiny_lines:
        if line.record is not None and line.raw not in seen:
            seen.add(line.raw)
            out.append(line.record)
    out.sort(key=lambda r: (r["namesrv"], r["seq"]))
    return out
