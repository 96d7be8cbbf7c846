"""Finding and opening capture files: a file, a directory (searched recursively) or a glob.

Local paths use the OS; URIs with a scheme (``hdfs://``, ``s3a://`` or ``s3://``, …) go through
``pyarrow.fs`` (:func:`nsreplay.storage.filesystem.arrow_filesystem`), so a capture on any filesystem
pyarrow reaches can be read by the executors. In a directory, files and folders whose name starts
with ``.`` or ``_`` (manifests, markers, files and folders still being written) are skipped; a glob
reads every file it matches (not the directories). A directory's other files are read when their
names end in a capture suffix (:data:`CAPTURE_SUFFIXES`, in any case: ``X.JSONL.GZ`` too; not
``.json`` or ``.json.gz``, :data:`DOCUMENT_SUFFIXES`), or are a rotated log's (``audit.jsonl.1``,
``audit.jsonl-20241121``: :data:`ROTATED_NAME`); the rest (``manifest.json``, ``README.md``),
and the links to folders (not followed, as a Hadoop listing does not follow them), are not read but
named (:attr:`CaptureListing.ignored`), so that a capture under an unexpected name does not vanish
without a word, and a file that is no capture neither fills the quarantine nor fails the run's
quarantine ratio. A local entry that is not a regular file (a
dangling link, a link loop, a FIFO) is listed, and read as an ``unreadable_file`` line, in either form.

A path that names nothing, and a glob that matches no file, are errors (:class:`CaptureNotFoundError`:
a typo must not pass for an hour without traffic); so is an object store's URI without a bucket
(``s3a://``, as ``s3a://$BUCKET`` is with BUCKET unset: ValueError), which would list every bucket. An existing directory that holds no capture file
(yet, or any more: a schedule's incoming directory between two deliveries) is an empty capture: the
ingest reads nothing and the window's replay goes on with the records it has.

A glob means what ``glob.glob(pattern, recursive=True)`` means for a local path (:func:`match_glob`),
on any filesystem: ``s3a://bucket/cap/*.jsonl.gz``, ``hdfs://nn/data/**/*.gz``. A URI's glob is
listed below its leading part without glob characters only (:func:`glob_files`); a ``?`` followed by
``name=`` starts pyarrow's URI options (``?region=eu-west-1``), any other ``?`` is a wildcard. As for a
local path, a URI that names an existing file or directory is read as such even if it looks like a glob.

A URI's listed files are URIs that :func:`open_capture` opens, under one scheme per store (S3's
``s3a://`` whether the path said ``s3://``, ``s3a://`` or ``s3n://``; GCS's ``gs://``): the key
``day 1/é.jsonl`` is listed as ``s3a://bucket/day%201/%C3%A9.jsonl`` (what a URI must not hold as it is is percent-encoded, as pyarrow
decodes it; ``date=2024-01-01/a+b.jsonl`` and the like are unchanged), with the capture path's
options: ``s3a://bucket/day?endpoint_override=minio:9000&scheme=http`` lists
``s3a://bucket/day/a.jsonl?endpoint_override=minio:9000&scheme=http``, read from where it was listed.
"""

from __future__ import annotations

import errno
import fnmatch
import functools
import glob
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, BinaryIO
from urllib.parse import unquote

if TYPE_CHECKING:
    import pyarrow.fs as pafs

#: The names a directory's capture files end in, compared without case (JSON Lines, as the capture
#: format names them, ``.ndjson`` as well, and audit logs, plain or gzipped).
CAPTURE_SUFFIXES = (".jsonl", ".jsonl.gz", ".ndjson", ".ndjson.gz", ".gz", ".log")
#: Names that are not a directory's capture files though :data:`CAPTURE_SUFFIXES` would take them:
#: a ``.json`` file holds one JSON document (a manifest, notes, a tool's settings), not JSON Lines,
#: and its lines read as records would be quarantined one by one, failing the run's quarantine ratio
#: for a file that is no capture. A glob that matches such a file reads it.
DOCUMENT_SUFFIXES = (".json", ".json.gz")
#: A rotated capture log's name, also a capture's: a capture suffix followed by logrotate's number
#: (``audit.jsonl.1``) or date (``audit.jsonl-20241121``, ``namesrv.log-2024-11-21``). Compressed, the
#: name ends in ``.gz``, a capture suffix already (``audit.jsonl.2.gz``).
ROTATED_NAME = re.compile(r"\.(jsonl|ndjson|log)[.-][0-9][0-9-]*$", re.IGNORECASE)
_MAGIC = re.compile(r"[*?[]")  # glob.has_magic's characters
_URI_OPTIONS = re.compile(r"\?(?=[\w.-]+=)")  # where pyarrow's URI options start: ?region=eu-west-1


class CaptureNotFoundError(FileNotFoundError):
    """The capture path matches no file."""


@dataclass(frozen=True)
class CaptureFile:
    path: str
    size_bytes: int
    mtime_ms: int


@dataclass(frozen=True)
class CaptureListing:
    """What a capture path names: the files to read, sorted by path, and what a directory holds that
    is not read though it is not hidden (files not named as captures, links to folders), sorted by
    path, with their sizes and modification times as the ingest records them."""

    files: list[CaptureFile]
    ignored: tuple[CaptureFile, ...] = ()


def _has_scheme(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def _local(path: str) -> str:
    """The local path of ``path``: a local ``file:`` URI's, percent-decoded
    (:func:`~nsreplay.runtime.local_path_of_uri`: ``file:///my%20caps`` is ``my caps``), else
    ``path`` without a leading ``file://``."""
    if not path.startswith("file:"):
        return path  # (the executors that open plain paths import nothing more)
    from nsreplay.runtime import local_path_of_uri

    local = local_path_of_uri(path)
    if local is not None:
        return local
    return path[len("file://") :] if path.startswith("file://") else path


def _hidden(name: str) -> bool:
    return name.startswith((".", "_"))


def _capture_name(name: str) -> bool:
    """Whether a directory's file named ``name`` is a capture file (:data:`CAPTURE_SUFFIXES`, not
    :data:`DOCUMENT_SUFFIXES`; or a rotated one, :data:`ROTATED_NAME`), whatever the case."""
    lower = name.lower()
    return (lower.endswith(CAPTURE_SUFFIXES) and not lower.endswith(DOCUMENT_SUFFIXES)) or ROTATED_NAME.search(name) is not None


def _wanted(name: str) -> bool:
    return not _hidden(name) and _capture_name(name)


def why_not_read(path: str) -> str:
    """Why a directory's entry ``path`` (one of :attr:`CaptureListing.ignored`) is not read, in a few
    words, as ``bronze.ingest_files.detail`` records it."""
    name = path.split("?", 1)[0] if _has_scheme(path) else path
    if not _has_scheme(path) and os.path.isdir(_local(path)):
        return "a link to a folder: not followed"
    if name.lower().endswith(DOCUMENT_SUFFIXES):
        return "not a capture file by name: a .json file holds one JSON document, not JSON Lines"
    return f"not a capture file by name (not {', '.join(CAPTURE_SUFFIXES)}, nor a rotated .jsonl, .ndjson or .log: audit.jsonl.1)"


def _walk(directory: str) -> tuple[list[str], list[str]]:
    """The capture files below ``directory`` (names starting with ``.`` or ``_`` skipped, and folders
    so named not entered), and the entries not read though not hidden: files with other names, and
    links to folders (not entered). A directory os.walk cannot list is kept as a path of its own:
    reading it fails, so its unreadable_file line says what was not read instead of the files inside
    vanishing."""
    unlisted: list[str] = []
    paths: list[str] = []
    ignored: list[str] = []
    for d, dirs, names in os.walk(directory, onerror=lambda e: unlisted.append(e.filename)):
        dirs[:] = [n for n in dirs if not _hidden(n)]  # not entered, like such files are not read
        ignored += [os.path.join(d, n) for n in dirs if os.path.islink(os.path.join(d, n))]  # os.walk does not enter them
        paths += [os.path.join(d, n) for n in names if _wanted(n)]
        ignored += [os.path.join(d, n) for n in names if not _hidden(n) and not _capture_name(n)]
    return paths + unlisted, ignored


def list_capture_files(spec: str) -> list[CaptureFile]:
    """Every capture file ``spec`` names, sorted by path; ``[]`` for a directory without one. Raises
    CaptureNotFoundError when ``spec`` names no file or directory, or is a glob that matches no file."""
    return list_captures(spec).files


def list_captures(spec: str) -> CaptureListing:
    """:func:`list_capture_files`, with what a directory holds that is not read (:class:`CaptureListing`).
    A URI's scheme is taken in lower case, and a scheme naming the same objects as another as that
    other (``S3://b/day`` and ``s3://b/day`` list ``s3a://b/day/...``, as ``s3a://b/day`` does;
    ``gcs://`` lists ``gs://``: ``nsreplay.storage.filesystem.object_uri``), so a file has one name
    however the path was spelled."""
    from nsreplay.storage.filesystem import canonical_uri

    spec = canonical_uri(spec)
    if _has_scheme(spec):
        return _list_remote(spec)
    spec = _local(spec)
    ignored: list[str] = []
    if os.path.isdir(spec):
        paths, ignored = _walk(spec)
        if not paths:
            return CaptureListing([], _stat_all(ignored))
    elif os.path.isfile(spec):
        paths = [spec]
    else:
        # A glob names files, not directories; what it matches that is not a regular file (a dangling
        # link, a link loop, a FIFO) is listed, to be read as an unreadable_file line, as the
        # directory form lists it, rather than left out without a trace.
        # (glob.glob also yields "x/" for "x/**" when x is a file or absent: lexists refuses both)
        paths = [p for p in glob.glob(spec, recursive=True) if os.path.lexists(p) and not os.path.isdir(p)]
    if not paths:
        raise CaptureNotFoundError(f"no capture file at {spec}")
    return CaptureListing(list(_stat_all(paths)), _stat_all(ignored))  # each once: glob.glob yields a/**/**/x twice


def _stat_all(paths: list[str]) -> tuple[CaptureFile, ...]:
    """``paths`` made absolute, sorted, each once, with its size and modification time (0 and 0 for
    a dangling symlink or a symlink loop, which is read as an unreadable_file line)."""
    files = []
    for p in sorted({os.path.abspath(p) for p in paths}):
        try:
            st = os.stat(p)
        except OSError:
            files.append(CaptureFile(p, 0, 0))
            continue
        files.append(CaptureFile(p, st.st_size, int(st.st_mtime * 1000)))
    return tuple(files)


def _list_remote(spec: str) -> CaptureListing:
    import pyarrow.fs as pafs

    from nsreplay.storage.filesystem import arrow_filesystem, object_uri

    split = _split_glob(spec)
    fs, root = arrow_filesystem(spec if split is None else split[0])
    if not root.strip("/") and fs.type_name in ("s3", "gcs"):  # "s3a://" lists every bucket it can reach
        raise ValueError(f"no bucket in {spec}: a capture URI names a bucket (s3a://bucket/prefix), not all of them")
    if split is not None:
        root = f"{root.rstrip('/')}/{split[1]}"  # the glob as a path of fs
    scheme = object_uri(spec).split("://", 1)[0]  # s3:// and s3a:// list one object under one name
    options = _URI_OPTIONS.search(spec)
    query = spec[options.start() :] if options else ""  # how the bucket is reached: each file is read so too
    info = fs.get_file_info(root)
    ignored: list[CaptureFile] = []
    if info.type == pafs.FileType.File:
        infos = [info]
    elif info.type == pafs.FileType.Directory:
        visible = [
            i
            for i in fs.get_file_info(pafs.FileSelector(root, recursive=True))
            if i.is_file and not any(_hidden(part) for part in _relative_parts(root, i.path))
        ]
        infos = [i for i in visible if _capture_name(i.base_name)]
        ignored = sorted((_listed_file(scheme, i, query) for i in visible if not _capture_name(i.base_name)), key=lambda f: f.path)
        if not infos:
            return CaptureListing([], tuple(ignored))
    elif split is not None:
        infos = glob_files(fs, root)
    else:
        raise CaptureNotFoundError(f"no capture file at {spec}")
    if not infos:
        raise CaptureNotFoundError(f"no capture file at {spec}")
    files = sorted((_listed_file(scheme, i, query) for i in infos), key=lambda f: f.path)
    return CaptureListing(files, tuple(ignored))


def _listed_file(scheme: str, info: pafs.FileInfo, query: str) -> CaptureFile:
    return CaptureFile(_listed_uri(scheme, info.path, query), info.size or 0, int((info.mtime_ns or 0) // 1_000_000))


def _listed_uri(scheme: str, path: str, query: str = "") -> str:
    """The URI of ``path``, a path of the filesystem of ``scheme``: a key holding a space, a non-ASCII
    letter, ``%``, ``#``, ``?``, ``[`` (what a URI must not hold as it is) percent-encoded, so that
    pyarrow parses it back to ``path`` (:func:`open_capture`); names without those are unchanged.
    ``query``: the capture path's options (``?region=...``), which say how ``path`` is reached."""
    from nsreplay.storage.filesystem import quote_uri_path

    return f"{scheme}://{quote_uri_path(path)}{query}"


def _split_glob(uri: str) -> tuple[str, str] | None:
    """``uri`` split before the name holding its first glob character: the URI of the directory
    above (with the URI's options) and the rest of the path, percent-decoded as pyarrow decodes the
    URI's path. None when the path has no glob character. ValueError when the bucket or host would
    be a glob."""
    options = _URI_OPTIONS.search(uri)
    path, query = (uri[: options.start()], uri[options.start() :]) if options else (uri, "")
    after_scheme = path.index("://") + 3
    magic = _MAGIC.search(path, after_scheme)
    if magic is None:
        return None
    cut = path.rfind("/", 0, magic.start())
    if cut < after_scheme:
        raise ValueError(f"a glob cannot name the bucket or host: {uri}")
    return path[: cut + 1] + query, unquote(path[cut + 1 :])


def glob_files(fs: pafs.FileSystem, pattern: str) -> list[pafs.FileInfo]:
    """The files of ``fs`` that ``pattern`` (a path of ``fs``) matches (:func:`match_glob`), in listing
    order. Lists only below the pattern's leading names without glob characters: one selector there,
    recursive unless a single name without ``**`` follows. Nothing matches below a non-directory."""
    import pyarrow.fs as pafs

    names = re.sub("/+", "/", pattern).split("/")
    lead = next((n for n, name in enumerate(names) if _MAGIC.search(name)), len(names) - 1)
    root = "/".join(names[:lead]) or ("/" if lead else "")
    if fs.get_file_info(root).type != pafs.FileType.Directory:
        return []
    recursive = lead < len(names) - 1 or names[lead] == "**"
    infos = [i for i in fs.get_file_info(pafs.FileSelector(root, recursive=recursive)) if i.is_file]
    matched = set(match_glob(pattern, [i.path for i in infos]))
    return [i for i in infos if i.path in matched]


def match_glob(pattern: str, paths: Iterable[str]) -> list[str]:
    """The ``paths`` (of files, ``/``-separated, in the form of ``pattern``) that ``pattern`` matches,
    in their order: those ``glob.glob(pattern, recursive=True)`` would return. ``*``, ``?`` and
    ``[...]`` match within a name (:func:`fnmatch.fnmatchcase`); ``**`` as a whole name matches zero or
    more directories, or last one or more names. A wildcard matches no name starting with ``.`` unless
    it starts with ``.`` itself, and ``**`` none at all. ``//`` is ``/``; a pattern ending in ``/``
    names directories, so no file."""
    pats = re.sub("/+", "/", pattern).split("/")
    return [p for p in paths if _matches(pats, p.split("/"))]


def _matches(pats: list[str], names: list[str]) -> bool:
    @functools.cache
    def rest(i: int, j: int) -> bool:  # pats[i:] matches names[j:]
        if i == len(pats):
            return j == len(names)
        if pats[i] != "**":
            return j < len(names) and _name_matches(pats[i], names[j]) and rest(i + 1, j + 1)
        for k in range(j, len(names) + 1):  # ** takes names[j:k]; last, at least one (a file, not the directory)
            if k > j and names[k - 1].startswith("."):
                return False
            if (k > j or i + 1 < len(pats)) and rest(i + 1, k):
                return True
        return False

    return rest(0, 0)


def _name_matches(pat: str, name: str) -> bool:
    return (pat.startswith(".") or not name.startswith(".")) and fnmatch.fnmatchcase(name, pat)


def _relative_parts(root: str, path: str) -> list[str]:
    """The names on the way from ``root`` down to ``path`` (``path`` is below ``root``)."""
    return path[len(root.rstrip("/")) :].strip("/").split("/")


def open_capture(path: str) -> BinaryIO:
    """Open a capture file for reading raw bytes (no decompression: the reader detects gzip). ``path``
    is a local path or a URI as listed (percent-encoded). OSError when it cannot be read (a file
    deleted since it was listed: FileNotFoundError)."""
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
