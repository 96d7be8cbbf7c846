"""What a Delta table holds on disk, as the tests look at it."""

from __future__ import annotations

import os

from nsreplay.storage.deltars_backend import COMMIT_LOCK


def table_files(root: str) -> dict[str, int]:
    """Every file below a table's root with its size, by path relative to the root; the Delta log and
    the commit lock aside (staging directories included)."""
    found = {}
    for directory, _, names in os.walk(root):
        for name in names:
            relative = os.path.relpath(os.path.join(directory, name), root)
            if not relative.startswith("_delta_log") and relative != COMMIT_LOCK:
                found[relative] = os.path.getsize(os.path.join(root, relative))
    return found
