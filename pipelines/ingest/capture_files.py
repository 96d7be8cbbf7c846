"""Finding and opening capture files: a file, a directory (searched recursively) or a glob.

Local paths use the OS; URIs with a scheme (``hdfs://``, ``s3a://`` or ``s3://``, …) go through
``pyarrow.fs`` (:func:`nsreplay.storage.filesystem.arrow_filesystem`), so a capture on any filesystem
pyarrow reaches can be read by the executors. In a directory, files and folders whose name starts
with ``.`` or ``_`` (manifests, markers, files and folders still being written) are skipped; a glob
reads every file it matches.
"""

from __future__ import annotations

import errno
import glob
import os
import stat
from dataclasses import dataclass
from typing import BinaryIO

CAPTURE_SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".json.gz", ".gz", ".log")


class CaptureNotFoundError(FileNotFoundError):
    """The capture path matches no file."""


@dataclass(frozen=True)
class CaptureFile:
    path: str
    size_bytes: int
    mtime_ms: int


def _has_scheme(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def _local(path: str) -> str:
    return path[len("file://") :] if path.startswith("file://") else path


def _hidden(name: str) -> bool:
    return name.startswith((".", "_"))


def _wanted(name: str) -> bool:
    return not _hidden(name) and name.endswith(CAPTURE_SUFFIXES)


def list_capture_files(spec: str) -> list[CaptureFile]:
    """Every capture file ``spec`` names, sorted by path. Raises CaptureNotFoundError when none."""
    if _has_scheme(spec):
        return _list_remote(spec)
    spec = _local(spec)
    if os.path.isdir(spec):
        # A directory os.walk cannot list is kept as a path of its own: reading it fails, so its
        # unreadable_file line says what was not read instead of the files inside vanishing.
        unlisted: list[str] = []
        paths = []
        for d, dirs, names in os.walk(spec, onerror=lambda e: unlisted.append(e.filename)):
            dirs[:] = [n for n in dirs if not _hidden(n)]  # not entered, like such files are not read
            paths += [os.path.join(d, n) for n in names if _wanted(n)]
        paths += unlisted
    elif os.path.isfile(spec):
        paths = [spec]
    else:
        paths = [p for p in glob.glob(spec, recursive=True) if os.path.isfile(p)]
    if not paths:
        raise CaptureNotFoundError(f"no capture file at {spec}")
    files = []
    for p in sorted(os.path.abspath(p) for p in paths):
        try:
            st = os.stat(p)
        except OSError:  # a dangling symlink or a symlink loop: read as an unreadable_file line
            files.append(CaptureFile(p, 0, 0))
            continue
        files.append(CaptureFile(p, st.st_size, int(st.st_mtime * 1000)))
    return files


def _list_remote(spec: str) -> list[CaptureFile]:
    import pyarrow.fs as pafs

    from nsreplay.storage.filesystem import arrow_filesystem

    fs, root = arrow_filesystem(spec)
    scheme = spec.split("://", 1)[0]
    info = fs.get_file_info(root)
    if info.type == pafs.FileType.File:
        infos = [info]
    elif info.type == pafs.FileType.Directory:
        infos = [
            i
            for i in fs.get_file_info(pafs.FileSelector(root, recursive=True))
            if i.is_file and _wanted(i.base_name) and not any(_hidden(part) for part in _relative_parts(root, i.path)[:-1])
        ]
    else:
        raise CaptureNotFoundError(f"no capture file at {spec}")
    if not infos:
        raise CaptureNotFoundError(f"no capture file at {spec}")
    return sorted(
        (CaptureFile(f"{scheme}://{i.path}", i.size or 0, int((i.mtime_ns or 0) // 1_000_000)) for i in infos),
        key=lambda f: f.path,
    )


def _relative_parts(root: str, path: str) -> list[str]:
    """The names on the way from ``root`` down to ``path`` (``path`` is below ``root``)."""
    return path[len(root.rstrip("/")) :].strip("/").split("/")


def open_capture(path: str) -> BinaryIO:
    """Open a capture file for reading raw bytes (no decompression: the reader detects gzip)."""
    if _has_scheme(path):
        from nsreplay.storage.filesystem import arrow_filesystem

        fs, inner = arrow_filesystem(path)
        return fs.open_input_stream(inner, compression=None)  # type: ignore[return-value]
    local = _local(path)
    mode = os.stat(local).st_mode
    if stat.S_ISDIR(mode):  # a directory the listing could not enter: raises why (e.g. PermissionError)
        os.listdir(local)
    if not stat.S_ISREG(mode):  # a FIFO would block, a device never end
        raise OSError(errno.EINVAL, "not a regular file", local)
    return open(local, "rb")
