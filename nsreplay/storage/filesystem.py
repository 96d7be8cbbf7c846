"""pyarrow filesystems for the URIs users write (Hadoop's as well as pyarrow's own).

Spark names S3 ``s3a://`` (Hadoop's S3A connector; ``s3n://`` is its retired predecessor), and that
is how ``docs/operations.md`` and most clusters spell a bucket; pyarrow.fs knows only ``s3://``.
:func:`arrow_filesystem` takes either, so one path works for Spark, delta-rs (which reads ``s3a`` as
``s3`` itself) and the Spark-free readers. Credentials then come from pyarrow's S3 defaults (the AWS
credential chain, region from the URI's ``?region=`` or the bucket), not from Hadoop's ``fs.s3a.*``.
A capture file is named under one scheme per store whatever the path said (:func:`object_uri`:
``s3a://`` for S3, ``gs://`` for GCS), and found under the others an earlier version recorded
(:func:`object_uri_aliases`).
"""

from __future__ import annotations

import re
from urllib.parse import quote

import pyarrow.fs as pafs

HADOOP_S3_SCHEMES = ("s3a", "s3n")
GCS_SCHEMES = ("gs", "gcs")
#: How long pyarrow's GCS client retries a failing request when the URI does not say
#: (``gs://bucket/day?retry_limit_seconds=900``). Its own default is 15 minutes, and a machine without
#: GCS credentials retries the token request for all of it: an ingest of ``gs://`` captures sat in its
#: listing for as long before its error ("Could not create a OAuth2 access token ...").
GCS_RETRY_LIMIT_SECONDS = 60
#: What a URI's path may hold as it is (RFC 3986 ``pchar`` and ``/``); :func:`quote_uri_path` encodes the rest.
URI_PATH_SAFE = "/!$&'()*+,;=:@"


#: A URI's scheme and its "://" (RFC 3986, 3.1).
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*(?=://)")


def canonical_uri(path: str) -> str:
    """``path`` with its URI scheme in lower case (``S3://b/k`` is ``s3://b/k``, ``S3A://`` ``s3a://``,
    ``FILE:///x`` ``file:///x``), the rest as it is; a path without a scheme is returned unchanged.
    A scheme is case-insensitive (RFC 3986, 3.1), but pyarrow knows only ``s3://`` ("Unrecognized
    filesystem type in URI: S3://...") and Hadoop looks a scheme's filesystem up as spelled ("No
    FileSystem for scheme "S3A""); and a file must have one name, so that an ingest that lists
    ``S3A://b/k`` and one that lists ``s3a://b/k`` do not both read it."""
    return _SCHEME.sub(lambda m: m.group(0).lower(), path, count=1)


#: The schemes that name the same objects as another, and that other: the scheme an object's URI is
#: recorded under (:func:`object_uri`). ``s3a`` for S3 (Hadoop's S3A connector, as Spark,
#: ``docs/operations.md`` and the DAG's variables spell a bucket; ``s3`` is pyarrow's and AWS's name,
#: ``s3n`` S3A's retired predecessor), ``gs`` for Google Cloud Storage (``gcs`` is pyarrow's other name).
SAME_OBJECTS = {"s3": "s3a", "s3n": "s3a", "gcs": "gs"}


def object_uri(uri: str) -> str:
    """``uri`` under the one name of the object it names: its scheme in lower case
    (:func:`canonical_uri`), and a scheme of :data:`SAME_OBJECTS` as the one it stands for
    (``s3://b/k`` and ``s3n://b/k`` are ``s3a://b/k``, ``gcs://b/k`` is ``gs://b/k``), the rest as it
    is; any other URI, and a path without a scheme, as :func:`canonical_uri` gives it. A capture file
    listed as ``s3://b/k`` and as ``s3a://b/k`` is one file, read once (``bronze.ingest_files``)."""
    named = canonical_uri(uri)
    scheme, sep, rest = named.partition("://")
    if sep and _SCHEME.match(named) and scheme in SAME_OBJECTS:
        return f"{SAME_OBJECTS[scheme]}://{rest}"
    return named


def object_uri_aliases(uri: str) -> tuple[str, ...]:
    """The names the object ``uri`` names may have been recorded under: :func:`object_uri` first, then
    the same URI under each other scheme of :data:`SAME_OBJECTS` that stands for it (``s3a://b/k``:
    also ``s3://b/k`` and ``s3n://b/k``, the names an earlier nsreplay recorded for a capture path
    given so). ``(uri,)`` for any other URI or path."""
    named = object_uri(uri)
    scheme, sep, rest = named.partition("://")
    if not (sep and _SCHEME.match(named)):
        return (named,)
    return (named, *(f"{alias}://{rest}" for alias, stands_for in SAME_OBJECTS.items() if stands_for == scheme))


def arrow_uri(uri: str) -> str:
    """``uri`` as pyarrow.fs names it: its scheme in lower case (:func:`canonical_uri`), ``s3a://b/k``
    and ``s3n://b/k`` become ``s3://b/k``, and a GCS URI without ``retry_limit_seconds`` gets
    :data:`GCS_RETRY_LIMIT_SECONDS`; any other URI is returned unchanged."""
    scheme, sep, rest = canonical_uri(uri).partition("://")
    if sep and scheme in HADOOP_S3_SCHEMES:
        return f"s3://{rest}"
    if sep and scheme in GCS_SCHEMES and "retry_limit_seconds=" not in rest.partition("?")[2]:
        return f"{scheme}://{rest}{'&' if '?' in rest else '?'}retry_limit_seconds={GCS_RETRY_LIMIT_SECONDS}"
    return canonical_uri(uri)


def arrow_filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    """The pyarrow filesystem of ``uri`` and the path within it (``pafs.FileSystem.from_uri``, after
    :func:`arrow_uri`)."""
    return pafs.FileSystem.from_uri(arrow_uri(uri))


def quote_uri_path(path: str) -> str:
    """``path`` (a name on storage) as the path of a URI that pyarrow decodes back to it: a space, a
    non-ASCII letter, ``%``, ``#``, ``?``, ``[`` ... percent-encoded (``namesrv=10.0.0.1%3A9876/a b``
    is ``namesrv=10.0.0.1%253A9876/a%20b``); names without them, ``date=2024-01-01/a+b`` included,
    are unchanged."""
    return quote(path, safe=URI_PATH_SAFE)
