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
import struct
from functools import lru_cache

from nsreplay.history import Coverage, OutsideCoverageError
from nsreplay.model import PROFILE_49, Answer, Snapshot, state_at
from nsreplay.model.records import namesrv_start, register_broker, unregister_broker
from nsreplay.serving.remoting import (
    JSON,
    MAX_FRAME_BYTES,
    ROCKETMQ,
    FrameError,
    RemotingCommand,
    decode_payload,
    encode_frame,
    frame_length,
)
from nsreplay.serving.remoting_client import AsyncRemotingClient, answer_of, question
from nsreplay.serving.remoting_server import start_remoting_server
from nsreplay.serving.source import SnapshotSource

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


class ModelSource(SnapshotSource):
    """RouteSource over the reference model replaying :func:`records` (snapshots cached per instant)."""

    run_id = "model"

    def __init__(self) -> None:
        self._records = records()

    def coverage(self) -> list[Coverage]:
        return [Coverage(NS, S, END, PROFILE_49)]

    @lru_cache(maxsize=64)
    def snapshot(self, namesrv: str, t: int | None) -> Snapshot:
        t = END if t is None else t
        if namesrv != NS or not S <= t <= END:
            raise OutsideCoverageError(f"{t} is outside the covered range of {namesrv}: [{S}, {END}]")
        return state_at(self._records, NS, t, default_profile=PROFILE_49)


SOURCE = ModelSource()
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


def test_decoder_agrees_with_the_server_on_what_is_malformed():
    """Every mutated frame the codec rejects makes the server close without answering it."""
    rng = random.Random(SEED + 2)
    frames = [mutate(rng, encode_frame(rng.choice(GOOD))) for _ in range(60)]

    async def body(port: int) -> None:
        for frame in frames:
            try:
                decodable = decode_payload(frame[4:]) if len(frame) >= 4 and frame_length(frame[:4]) == len(frame) - 4 else None
            except FrameError:
                decodable = None
            replies = await send_and_drain(port, [frame])
            if decodable is None:
                assert len(replies) <= 1  # only a good frame followed by noise (kind 7) gets one answer
            elif not decodable.is_oneway and not decodable.is_response:
                assert len(replies) == 1 and replies[0].opaque == decodable.opaque

    run(_with_server(body))


def test_serialize_types_in_one_connection():
    async def body(port: int) -> None:
        cmds = [question(206, serialize_type=st) for st in (JSON, ROCKETMQ, JSON, ROCKETMQ)]
        async with await AsyncRemotingClient.connect("127.0.0.1", port) as client:
            replies = await asyncio.gather(*(client.request(c) for c in cmds))
        assert [r.serialize_type for r in replies] == [JSON, ROCKETMQ, JSON, ROCKETMQ]

    run(_with_server(body))
