"""Edge cases of the remoting endpoint where a real NameServer still answers: a bad ``asOf`` of any
kind, a topic Java would encode with '?', ``acceptStandardJsonOnly``, number fields written as strings,
binary-header text that is not UTF-8; where it closes the connection: a JSON header that is not UTF-8;
and a peer that sends but never reads, which the NameServer's all-idle timeout closes. The source is
the reference model over the fuzzer's small capture (no Spark)."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import struct
import time

import pytest

import nsreplay.serving.remoting_server as remoting_server
from nsreplay.serving.remoting import decode_payload, encode_frame, frame_length
from nsreplay.serving.remoting_client import RemotingClient, question
from nsreplay.serving.remoting_server import RemotingServerThread
from test_remoting_fuzz import NS, SOURCE


def raw_json_frame(header: str) -> bytes:
    """A JSON-header frame from the header's text as given (escapes and all)."""
    data = header.encode("ascii")
    return struct.pack(">iI", 4 + len(data), len(data)) + data


def read_reply(sock: socket.socket) -> object:
    def exactly(n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            assert chunk, "the server closed the connection"
            buf += chunk
        return buf

    return decode_payload(exactly(frame_length(exactly(4))))


@pytest.mark.parametrize("as_of, says", [
    ("--5", "bad asOf: not a time: "), ("²", "bad asOf: not a time: "), ("١٢٣٤", "bad asOf: not a time: "),
    ("2024-11-21T03:12:05+25:00", "bad asOf: not a time: "),
    ("9" * 5000, "no history there: "), ("-9223372036854775809", "no history there: "),
])
def test_a_bad_as_of_is_answered_and_keeps_the_connection(as_of, says):
    with RemotingServerThread(lambda: SOURCE, namesrv=NS, as_of=None) as server, \
            RemotingClient.connect("127.0.0.1", server.port, timeout=10) as client:
        bad = client.route("orders", as_of=as_of)
        assert (bad.code, bad.body) == (1, None)
        assert bad.remark.startswith(says), bad.remark
        after = client.request(question(206))  # the same connection still answers
        assert (after.code, after.body) == (0, SOURCE.topics(NS, None, request_version=401).body)


def test_a_topic_java_cannot_encode_gets_17_with_question_marks():
    """fastjson reads the escape \\ud800 into a lone surrogate; Java's UTF-8 encoder writes it as '?'."""
    frame = raw_json_frame('{"code":105,"opaque":3,"version":401,"language":"JAVA","flag":0,"extFields":{"topic":"a\\ud800b"}}')
    with RemotingServerThread(lambda: SOURCE, namesrv=NS, as_of=None) as server, \
            socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(frame + encode_frame(question(206, opaque=4)))
        reply, after = read_reply(sock), read_reply(sock)
    assert (reply.opaque, reply.code, reply.body) == (3, 17, None)
    assert reply.remark.startswith("No topic route info in name server for the topic: a?b\n")
    assert (after.opaque, after.code) == (4, 0)


@pytest.mark.parametrize("flag, standard", [("true", True), ("TRUE", True), ("false", False), ("yes", False), ("", False)])
def test_accept_standard_json_only(flag, standard):
    """4.9.4 and 5.x answer standard JSON to a version below 401 that sets acceptStandardJsonOnly
    (Boolean.parseBoolean: "true" in any case; anything else is false)."""
    with RemotingServerThread(lambda: SOURCE, namesrv=NS, as_of=None) as server, \
            RemotingClient.connect("127.0.0.1", server.port, timeout=10) as client:
        reply = client.request(question(105, topic="orders", version=121, ext={"acceptStandardJsonOnly": flag}))
    want = SOURCE.route(NS, "orders", None, request_version=401 if standard else 121)
    assert (reply.code, reply.body) == (0, want.body)
    assert bool(re.search(rb'"brokerAddrs":\{"\d+":"', reply.body)) is standard
    if standard:
        json.loads(reply.body)


def test_a_peer_that_never_reads_is_closed_after_the_idle_timeout(monkeypatch):
    """Answers pile up unread (a small receive window); the connection must not be held past the idle
    timeout by a write that cannot finish."""
    monkeypatch.setattr(remoting_server, "IDLE_TIMEOUT_S", 1.0)
    with RemotingServerThread(lambda: SOURCE, namesrv=NS, as_of=None) as server:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", server.port))
        sock.setblocking(False)
        data = encode_frame(question(106)) * 20_000  # far more answer bytes than the socket buffers hold
        sent, deadline = 0, time.monotonic() + 5
        while sent < len(data) and time.monotonic() < deadline:
            try:
                sent += sock.send(data[sent:sent + 65536])
            except BlockingIOError:
                time.sleep(0.02)

        async def connections() -> int:
            return sum(1 for t in asyncio.all_tasks() if not t.done() and "start_remoting_server.<locals>.connection" in repr(t.get_coro()))

        held = [server.run(connections())]
        deadline = time.monotonic() + 10
        while held[-1] and time.monotonic() < deadline:
            time.sleep(0.2)
            held.append(server.run(connections()))
        sock.close()
    assert held[-1] == 0, "a peer that does not read holds its connection past the idle timeout"


def raw_frame(header: bytes, serialize_type: int = 0) -> bytes:
    """A frame from the header's bytes as given (no body)."""
    return struct.pack(">iI", 4 + len(header), (serialize_type << 24) | len(header)) + header


def binary_header(code: int, opaque: int, ext: list[tuple[bytes, bytes]], version: int = 63) -> bytes:
    """A ROCKETMQ header (language CPP, no remark) with the extFields' bytes as given."""
    fields = b"".join(struct.pack(">h", len(k)) + k + struct.pack(">i", len(v)) + v for k, v in ext)
    return struct.pack(">hbhiii", code, 1, version, opaque, 0, 0) + struct.pack(">i", len(fields)) + fields


@pytest.mark.parametrize("version, standard", [("121", False), ("401", True), ("00401", True)])
def test_number_fields_written_as_strings_are_answered(version, standard):
    """fastjson reads "code":"105" (and the other int fields) as the number: the NameServer answers."""
    header = '{"code":"105","opaque":"3","version":"%s","language":"JAVA","flag":"0","extFields":{"topic":"orders"}}' % version
    with RemotingServerThread(lambda: SOURCE, namesrv=NS, as_of=None) as server, \
            socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(raw_json_frame(header) + raw_json_frame('{"code":"206","opaque":"-4"}'))
        reply, after = read_reply(sock), read_reply(sock)
    want = SOURCE.route(NS, "orders", None, request_version=401 if standard else 121)
    assert (reply.opaque, reply.code, reply.remark, reply.body) == (3, 0, None, want.body)
    assert bool(re.search(rb'"brokerAddrs":\{"\d+":"', reply.body)) is standard
    assert (after.opaque, after.code, after.body) == (-4, 0, SOURCE.topics(NS, None, request_version=401).body)


def test_binary_header_text_that_is_not_utf8_is_answered_as_java_reads_it():
    """A ROCKETMQ header's extFields are read with new String(bytes, UTF_8) / Netty's readCharSequence:
    malformed UTF-8 becomes U+FFFD and the request is answered."""
    unknown = raw_frame(binary_header(105, 5, [(b"topic", b"ord\xffers")]), serialize_type=1)
    known = raw_frame(binary_header(105, 6, [(b"topic", b"orders"), (b"x\xed\xa0\x80", b"\xc3")]), serialize_type=1)
    with RemotingServerThread(lambda: SOURCE, namesrv=NS, as_of=None) as server, \
            socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(unknown + known)
        missing, found = read_reply(sock), read_reply(sock)
    assert (missing.opaque, missing.code, missing.body, missing.serialize_type) == (5, 17, None, 1)
    assert missing.remark.startswith("No topic route info in name server for the topic: ord\ufffders\n"), missing.remark
    assert (found.opaque, found.code, found.remark, found.body) == (6, 0, None, SOURCE.route(NS, "orders", None, request_version=63).body)


@pytest.mark.parametrize("header", [
    b'{"code":105,"opaque":3,"extFields":{"topic":"ord\xffers"}}',  # fastjson's UTF-8 decoder gives up: null header
    b'{"code":105,"opaque":3,"extFields":{"topic":"a\xed\xa0\x80"}}',
    b'{"code":"+105","opaque":3,"extFields":{"topic":"orders"}}',  # not a string every fastjson path reads
])
def test_a_json_header_java_cannot_decode_closes_that_connection_only(header):
    with RemotingServerThread(lambda: SOURCE, namesrv=NS, as_of=None) as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            sock.sendall(raw_frame(header) + encode_frame(question(206, opaque=4)))
            assert sock.recv(1) == b"", "the connection must be closed without an answer"
        with RemotingClient.connect("127.0.0.1", server.port, timeout=10) as client:
            after = client.request(question(206))
    assert (after.code, after.body) == (0, SOURCE.topics(NS, None, request_version=401).body)
