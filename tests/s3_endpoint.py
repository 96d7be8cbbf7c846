"""A real S3 endpoint for tests: moto's server (the ``moto[server]`` package) on 127.0.0.1, in a
process of its own, so that the code under test talks S3 over HTTP as it does to a bucket.

The server is found as ``$NSREPLAY_MOTO_SERVER`` (a ``moto_server`` executable, e.g. of a venv of its
own: its dependencies need not fit the project's), else ``moto_server`` on the PATH, else the module
``moto.server`` of this interpreter. Without one the tests that need it skip, saying so; under CI
(where ``.ci/run`` installs it) they fail instead.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import quote

import pytest

INSTALL_HINT = ("python3 -m venv /opt/moto && /opt/moto/bin/pip install 'moto[server]', "
                "then NSREPLAY_MOTO_SERVER=/opt/moto/bin/moto_server")


def moto_server_command() -> list[str] | None:
    """How to start moto's server here, or None when it is not installed."""
    explicit = os.environ.get("NSREPLAY_MOTO_SERVER")
    if explicit:
        return [explicit]
    found = shutil.which("moto_server")
    if found:
        return [found]
    if importlib.util.find_spec("moto") is not None and importlib.util.find_spec("flask") is not None:
        return [sys.executable, "-m", "moto.server"]
    return None


def _missing(reason: str) -> None:
    """Skip the test for want of the endpoint; under CI, where .ci/run installs it, fail."""
    if os.environ.get("CI"):
        pytest.fail(f"CI: {reason}; .ci/run installs it")
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def s3_endpoint(*, checks_credentials: bool = False) -> Iterator[str]:
    """A running S3 endpoint (``http://127.0.0.1:PORT``) for the duration of the block, stopped after.
    Skips the test when moto's server is not installed. ``checks_credentials``: the endpoint refuses
    every request not signed by a user it knows (it knows none: ACCESS_DENIED), as AWS refuses
    credentials of no account; by default it takes any."""
    command = moto_server_command()
    if command is None:
        _missing(f"no local S3 endpoint: moto[server] is not installed ({INSTALL_HINT})")
    port = _free_port()
    env = {**os.environ, **({"INITIAL_NO_AUTH_ACTION_COUNT": "0"} if checks_credentials else {})}
    server = subprocess.Popen([*command, "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        deadline = time.monotonic() + 60
        while True:
            if server.poll() is not None:
                if server.returncode == 127:  # a pyenv shim whose active Python lacks moto: "command not found"
                    _missing(f"no local S3 endpoint: {command[0]} finds no moto_server ({INSTALL_HINT})")
                pytest.fail(f"moto's server ended at its start (status {server.returncode}): {command}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"moto's server did not listen on 127.0.0.1:{port} within 60 s")
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def put_object(endpoint: str, path: str, data: bytes) -> None:
    """Store ``data`` as the object ``path`` (``bucket/key``) of ``endpoint``, in one plain PUT (the
    server takes unsigned requests unless it checks credentials), readable and writable by anyone:
    moto keeps an object written anonymously from anonymous readers (Spark's Python workers, which
    started without this test's credentials) and writers otherwise. Not through pyarrow, whose
    multipart upload moto 5.2.1's server does not complete ("error embedded in a 200 OK response")."""
    headers = {"Content-Type": "application/octet-stream", "x-amz-acl": "public-read-write"}
    request = urllib.request.Request(f"{endpoint}/{quote(path)}", data=data, method="PUT", headers=headers)
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 200, (path, response.status)
