"""Frame fuzzer for the remoting endpoint: random and mutated frames, partial writes and many connections
at once. The server must never die, a bad frame must close only its own connection, and a well-formed
request on a fresh connection afterwards must be answered exactly. Bounded (seeded, a few seconds).

The source is the reference model over a small hand-built capture (no Spark needed): a real
RouteSource, answering as the NameServer would.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import struct
from dataclasses import replace
from datetime import datetime, timedelta, timezone

from nsreplay.history import OutsideCoverageError
from nsreplay.model import PROFILE_49, Answer
from nsreplay.model.records import namesrv_start, register_broker, unregister_broker
from nsreplay.serving.remoting import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    JSON,
    MAX_FRAME_BYTES,
    ROCKETMQ,
    FrameError,
    RemotingCommand,
    decode_frame,
    decode_payload,
    encode_frame,
    frame_length,
)
from nsreplay.serving.remoting_client import AsyncRemotingClient, answer_of, question
from nsreplay.serving.remoting_server import start_remoting_server

from model_source import ModelSource

NS = "10.0.0.10:9876"
S = 1732147200000
END = S + 200_000
SEED = 20241121


def records() -> list[dict]:
    out = [namesrv_start(S, "4.9.4", {}, namesrv=NS)]
    for k in range(7):
        out.append(register_broker(S + 1000 + k * 30_000, cluster="c", name="b-a", addr="10.1.0.1:10911",
                                   topics=["orders", "audit", "順序"], five=False, namesrv=NS))
        out.append(register_broker(S + 2000 + k * 30_000, cluster="c", name="b-b", addr="10.1.0.2:10911",
                                   topics=["orders"], five=False, namesrv=NS))
    out.append(unregister_broker(END, cluster="c", name="b-b", addr="10.1.0.2:10911", namesrv=NS))
    return out


SOURCE = ModelSource("model", NS, records(), S, END, PROFILE_49)
GOOD = [
    question(105, topic="orders", version=121),
    question(105, topic="順序", version=401, serialize_type=ROCKETMQ, as_of=S + 45_000),
    question(105, topic="missing", version=63),
    question(106, version=121, serialize_type=ROCKETMQ),
    question(206, as_of=S + 1000),
]


def expected(cmd: RemotingCommand) -> Answer:
    t = int(cmd.ext("asOf")) if cmd.ext("asOf") else None
    if cmd.code == 105:
        return SOURCE.route(NS, cmd.ext("topic"), t, request_version=cmd.version)
    if cmd.code == 106:
        return SOURCE.cluster(NS, t, request_version=cmd.version)
    return SOURCE.topics(NS, t, request_version=cmd.version)


async def read_frame(reader: asyncio.StreamReader) -> RemotingCommand:
    return decode_payload(await reader.readexactly(frame_length(await reader.readexactly(4))))


async def check_fresh_connection(port: int) -> None:
    """Every GOOD request, pipelined on a new connection, gets exactly its answer."""
    async with await AsyncRemotingClient.connect("127.0.0.1", port) as client:
        replies = await asyncio.wait_for(asyncio.gather(*(client.request(c) for c in GOOD)), 10)
    for cmd, reply in zip(GOOD, replies):
        assert reply.is_response and reply.serialize_type == cmd.serialize_type
        assert answer_of(reply) == expected(cmd), cmd


async def send_and_drain(port: int, chunks: list[bytes], *, half_close: bool = True) -> list[RemotingCommand]:
    """Send ``chunks`` (with a yield between them), half-close, then read until the server closes.
    Whatever comes back must be well-formed response frames."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    replies: list[RemotingCommand] = []
    try:
        for chunk in chunks:
            writer.write(chunk)
            await writer.drain()
            await asyncio.sleep(0)
        if half_close:
            writer.write_eof()
        while True:
            try:
                reply = await asyncio.wait_for(read_frame(reader), 10)
            except asyncio.IncompleteReadError as exc:
                assert exc.partial == b"", "the server sent a partial frame"
                break
            assert reply.is_response
            replies.append(reply)
    except OSError:
        pass  # the server closed (maybe with a reset) while we were still writing: fine
    finally:
        writer.close()
    return replies


def mutate(rng: random.Random, frame: bytes) -> bytes:
    data = bytearray(frame)
    kind = rng.randrange(9)
    if kind == 0:  # truncated
        return bytes(data[: rng.randrange(len(data))])
    if kind == 1:  # bit flips
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
        return bytes(data)
    if kind == 2:  # huge length
        return struct.pack(">i", rng.choice([MAX_FRAME_BYTES - 3, 2**31 - 1, 0x7FFFFF00])) + bytes(data[4:])
    if kind == 3:  # negative or too small length
        return struct.pack(">i", rng.choice([-1, -(2**31), 0, 1, 3])) + bytes(data[4:])
    if kind == 4:  # garbage JSON header
        junk = rng.choice([b"{", b"not json", b'{"code":"x"}', b"[1,2]", b'{"code":105,"extFields":7}', b"\xff\xfe"])
        return struct.pack(">ii", 4 + len(junk), len(junk)) + junk
    if kind == 5:  # wrong serialize type
        word = struct.unpack(">I", bytes(data[4:8]))[0]
        return bytes(data[:4]) + struct.pack(">I", (rng.choice([2, 3, 0x7F, 0xFF]) << 24) | (word & 0xFFFFFF)) + bytes(data[8:])
    if kind == 6:  # header length beyond the frame
        return bytes(data[:4]) + struct.pack(">I", len(data)) + bytes(data[8:])
    if kind == 7:  # random bytes after a good frame
        return frame + rng.randbytes(rng.randint(1, 64))
    return rng.randbytes(rng.randint(1, 200))  # pure noise


def split(rng: random.Random, data: bytes) -> list[bytes]:
    cuts = sorted(rng.sample(range(1, len(data)), min(len(data) - 1, rng.randint(0, 6)))) if len(data) > 1 else []
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)])]


def run(coro) -> None:
    asyncio.run(asyncio.wait_for(coro, 60))


async def _with_server(body) -> None:
    server = await start_remoting_server(lambda: SOURCE, port=0, namesrv=NS, as_of=None)
    port = server.sockets[0].getsockname()[1]
    try:
        await body(port)
        assert server.is_serving()
        await check_fresh_connection(port)
    finally:
        server.close()


def test_mutated_frames_never_kill_the_server():
    rng = random.Random(SEED)
    good_frames = [encode_frame(c) for c in GOOD]

    async def body(port: int) -> None:
        for round_ in range(12):
            batch = []
            for _ in range(25):
                frame = mutate(rng, rng.choice(good_frames))
                batch.append(send_and_drain(port, split(rng, frame)))
            await asyncio.gather(*batch)
            if round_ % 4 == 3:
                await check_fresh_connection(port)

    run(_with_server(body))


def test_bad_frame_closes_only_its_connection():
    async def body(port: int) -> None:
        async with await AsyncRemotingClient.connect("127.0.0.1", port) as steady:
            assert answer_of(await steady.request(GOOD[0])) == expected(GOOD[0])
            for bad in (struct.pack(">i", -5), struct.pack(">i", MAX_FRAME_BYTES), struct.pack(">ii", 9, 0) + b"{bad}",
                        struct.pack(">iI", 8, 0x02000000) + b"\x00" * 4, struct.pack(">ii", 6, 10) + b"{}"):
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(encode_frame(GOOD[3]) + bad)  # no half-close: the server must close by itself
                first = await asyncio.wait_for(read_frame(reader), 10)
                assert answer_of(first) == expected(GOOD[3])  # the frame before the bad one is answered
                assert await asyncio.wait_for(reader.read(), 10) == b""  # then the server closes
                writer.close()
                for cmd in GOOD:
                    assert answer_of(await steady.request(cmd)) == expected(cmd)

    run(_with_server(body))


def test_partial_writes_and_many_connections_at_once():
    rng = random.Random(SEED + 1)

    async def one_client(i: int, port: int) -> None:
        cmds = [rng.choice(GOOD) for _ in range(5)]
        frames = b"".join(encode_frame(c) for c in cmds)
        replies = await send_and_drain(port, split(rng, frames))
        assert [answer_of(r) for r in replies] == [expected(c) for c in cmds]

    async def noisy(port: int) -> None:
        await send_and_drain(port, [rng.randbytes(rng.randint(1, 100))])

    async def body(port: int) -> None:
        tasks = [one_client(i, port) for i in range(150)] + [noisy(port) for _ in range(50)]
        rng.shuffle(tasks)
        await asyncio.gather(*tasks)

    run(_with_server(body))


def test_abandoned_large_frames_and_early_closes():
    """Connections that declare a big frame and vanish, or close mid-prefix, leave nothing behind."""

    async def body(port: int) -> None:
        for prefix in (struct.pack(">i", MAX_FRAME_BYTES - 4), b"\x00\x00", b""):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(prefix + b"\x00" * 1000)
            await writer.drain()
            writer.close()
        # a frame of exactly the maximum size is read whole and answered (unknown code → 3)
        header = json.dumps({"code": 999, "opaque": 7}).encode()
        body_len = MAX_FRAME_BYTES - 8 - len(header)
        big = struct.pack(">ii", 4 + len(header) + body_len, len(header)) + header + b"\x00" * body_len
        replies = await send_and_drain(port, [big])
        assert [(r.code, r.opaque) for r in replies] == [(3, 7)]

    run(_with_server(body))


# A reply's remark, as a regular expression (re.fullmatch; None: no remark), per the server's contract
# (nsreplay.serving.remoting_server): an error's remark is checked for what it must name, the model's
# answers for their exact text.
REMARK_CODE_NOT_SUPPORTED = r"request code {code} not supported\b.*"
REMARK_BAD_AS_OF = r"bad asOf: .*"
REMARK_NO_HISTORY = r"no history there: .*"
REMARK_NO_TOPIC = r".*'topic'.*"
RESPONSE_VERSION = 401  # what a response carries: its NameServer's version (V4_9_4: SOURCE is a 4.9.4 NameServer throughout) and JAVA
RESPONSE_LANGUAGE = "JAVA"
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def spec_instant(cmd: RemotingCommand) -> int | None:
    """The instant a request asks about (interfaces spec §3): extField ``asOf``, epoch ms or ISO-8601
    (naive = UTC), when present and not blank; else the server's ``--as-of`` (None here: the latest
    state). ValueError when it is neither."""
    text = (cmd.ext("asOf") or "").strip()
    if not text:
        return None
    if re.fullmatch(r"-?[0-9]+", text):
        return int(text)
    moment = datetime.fromisoformat(text[:-1] + "+00:00" if text[-1] in "Zz" else text)
    aware = moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)
    return (aware - EPOCH) // timedelta(milliseconds=1)


def spec_reply(cmd: RemotingCommand) -> tuple[RemotingCommand, str | None] | None:
    """The reply the contract asks for to the decoded frame ``cmd`` (None: no reply), as (the response
    without its remark, the remark's pattern). Answers come from the reference model (SOURCE)."""
    if cmd.is_oneway or cmd.is_response:
        return None

    def reply(code: int, body: bytes | None, remark: str | None) -> tuple[RemotingCommand, str | None]:
        return RemotingCommand(code=code, language=RESPONSE_LANGUAGE, version=RESPONSE_VERSION, opaque=cmd.opaque, flag=FLAG_RESPONSE,
                               body=body, serialize_type=cmd.serialize_type), remark

    if cmd.code not in (105, 106, 206):
        return reply(3, None, REMARK_CODE_NOT_SUPPORTED.format(code=cmd.code))
    try:
        t = spec_instant(cmd)
    except ValueError:
        return reply(1, None, REMARK_BAD_AS_OF)
    try:
        if cmd.code == 105:
            if cmd.ext("topic") is None and cmd.ext_fields is not None:  # no extFields: Java's null topic, not found
                return reply(1, None, REMARK_NO_TOPIC)
            standard_only = (cmd.ext("acceptStandardJsonOnly") or "").lower() == "true"
            answer = SOURCE.route(NS, cmd.ext("topic"), t, request_version=max(cmd.version, 401) if standard_only else cmd.version)
        elif cmd.code == 106:
            answer = SOURCE.cluster(NS, t, request_version=cmd.version)
        else:
            answer = SOURCE.topics(NS, t, request_version=cmd.version)
    except OutsideCoverageError:
        return reply(1, None, REMARK_NO_HISTORY)
    return reply(answer.code, answer.body, None if answer.remark is None else re.escape(answer.remark))


def spec_stream(data: bytes) -> tuple[list[RemotingCommand], bool]:
    """(the frames the codec decodes from the start of ``data``, whether that is all of it): reading
    stops at the first bytes that are not a whole decodable frame (a bad length prefix, a malformed
    header, a frame or prefix cut short), where the server must close the connection."""
    commands, pos = [], 0
    while len(data) - pos >= 4:
        try:
            total = frame_length(data[pos : pos + 4])
            if len(data) - pos - 4 < total:
                break
            commands.append(decode_payload(data[pos + 4 : pos + 4 + total]))
        except FrameError:
            break
        pos += 4 + total
    return commands, pos == len(data)


def spec_replies(data: bytes) -> list[tuple[RemotingCommand, str | None]]:
    """The replies ``data``, written on a fresh connection then half-closed, must get, in order."""
    return [want for want in map(spec_reply, spec_stream(data)[0]) if want is not None]


async def exchange(port: int, data: bytes) -> bytes:
    """Write ``data`` on a fresh connection and half-close it at once (before the server acts on any of
    it), then return every byte the server sends until it closes. A reset ends the stream too: the
    server closing with bytes of ours unread resets the connection, after the answers it sent."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    received = b""
    try:
        writer.write(data)
        writer.write_eof()
        while chunk := await asyncio.wait_for(reader.read(1 << 16), 10):
            received += chunk
    except ConnectionResetError:
        pass
    finally:
        writer.close()
    return received


def whole_frames(data: bytes) -> list[RemotingCommand]:
    """``data`` as whole frames; a partial or malformed one fails the codec."""
    out, pos = [], 0
    while pos < len(data):
        total = frame_length(data[pos : pos + 4])
        out.append(decode_frame(data[pos : pos + 4 + total]))
        pos += 4 + total
    return out


def test_decoder_agrees_with_the_server_on_what_is_malformed():
    """Each mutated frame, and each hand-made stream below, written on a fresh connection, gets exactly
    the replies the contract asks for: one per decodable request before the first malformed or
    cut-short bytes, with the model's answer, and nothing for oneway requests, for responses and for
    anything malformed (interfaces spec §3, nsreplay.serving.remoting_server)."""
    rng = random.Random(SEED + 2)
    frames = [mutate(rng, encode_frame(rng.choice(GOOD))) for _ in range(60)]
    good = [encode_frame(c) for c in GOOD]
    oneway = [encode_frame(replace(c, flag=FLAG_ONEWAY, opaque=70 + i)) for i, c in enumerate(GOOD)]
    responses = [encode_frame(replace(c, flag=flag, opaque=80 + i)) for i, c in enumerate(GOOD) for flag in (FLAG_RESPONSE, FLAG_RESPONSE | FLAG_ONEWAY)]
    others = [
        question(103, opaque=91, ext={"brokerName": "b-a"}),
        question(904, opaque=92, serialize_type=ROCKETMQ),
        question(105, topic="orders", as_of="yesterday", opaque=93),
        question(206, as_of=END + 1, opaque=94, serialize_type=ROCKETMQ),
        question(106, as_of="2024-11-21T00:01:00Z", opaque=95, version=63),
        question(105, opaque=96),
        question(105, topic="orders", version=121, opaque=97, ext={"acceptStandardJsonOnly": "TRUE"}),
        question(105, topic="orders", as_of=" ", opaque=98, serialize_type=ROCKETMQ),
        question(105, opaque=99, ext={"topicName": "orders"}),  # extFields without a topic (not only by a mutation's luck)
    ]
    frames += [
        *oneway, *responses, *map(encode_frame, others),
        good[0] + oneway[1] + good[3] + responses[0] + b"\x00\x00\x00",  # answered, not, answered, not; then a cut prefix
        good[1] + good[2] + good[4][:-1],  # two answered, the third cut short
        good[4] + struct.pack(">i", -7) + good[0],  # a bad length: the good frame after it is not answered
        good[3] + struct.pack(">ii", 8, 4) + b"nope" + good[0],  # a header that does not parse, then a good frame
    ]

    async def body(port: int) -> None:
        for i, frame in enumerate(frames):
            want = spec_replies(frame)
            got = whole_frames(await exchange(port, frame))
            assert [replace(r, remark=None) for r in got] == [w for w, _ in want], (i, frame[:100])
            for reply, (_, remark) in zip(got, want):
                assert reply.remark is None if remark is None else re.fullmatch(remark, reply.remark or "", re.S), (i, reply.remark, remark)

    run(_with_server(body))
    # every case the contract tells apart is among the frames
    streams = [spec_stream(f) for f in frames]
    decoded = [c for commands, _ in streams for c in commands]
    assert any(not commands and not whole for commands, whole in streams)  # malformed from the first byte
    assert any(spec_replies(f) and not spec_stream(f)[1] for f in frames)  # answered frames, then garbage
    assert any(c.is_oneway and not c.is_response for c in decoded) and any(c.is_response for c in decoded)
    remarks = {remark for f in frames for _, remark in spec_replies(f)}
    assert {REMARK_BAD_AS_OF, REMARK_NO_HISTORY, REMARK_NO_TOPIC, REMARK_CODE_NOT_SUPPORTED.format(code=103)} <= remarks
    codes = {w.code for f in frames for w, _ in spec_replies(f)}
    assert {0, 1, 3, 17} <= codes


def test_serialize_types_in_one_connection():
    async def body(port: int) -> None:
        cmds = [question(206, serialize_type=st) for st in (JSON, ROCKETMQ, JSON, ROCKETMQ)]
        async with await AsyncRemotingClient.connect("127.0.0.1", port) as client:
            replies = await asyncio.gather(*(client.request(c) for c in cmds))
        assert [r.serialize_type for r in replies] == [JSON, ROCKETMQ, JSON, ROCKETMQ]

    run(_with_server(body))
