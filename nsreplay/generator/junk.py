"""Bad-input injection: lines the ingest must quarantine, each with exactly one defect.

Contract:

* Every junk line is counted under exactly one ingest reason code (config.JUNK_REASONS); apart from that
  one defect the line is a well-formed record of the NameServer it names, so the reason is unambiguous.
* Junk lines take a slot in their NameServer's ``seq`` order like any other record the NameServer
  processed, so ``seq`` stays strictly increasing over every line that carries one.
* Junk never changes the simulated world: the NameServer would reject or never see it.
"""

from __future__ import annotations

import base64
import zlib
from typing import TYPE_CHECKING, Callable

import orjson

from .config import JUNK_REASONS, GeneratorConfig
from .records import JUNK, Record
from .simulate import Emitter, NamesrvTimeline
from .world import World, rng

if TYPE_CHECKING:
    from .render import Renderer

__all__ = ["plan_junk", "render_junk", "VARIANTS"]

#: Number of distinct shapes per reason (cycled over the injected lines).
VARIANTS: dict[str, int] = {
    "invalid_json": 3,
    "not_an_object": 5,
    "invalid_utf8": 2,
    "missing_field": 2,
    "wrong_type": 3,
    "unknown_kind": 2,
    "unknown_code": 2,
    "unknown_channel_event": 3,
    "undecodable_body": 3,
    "crc_mismatch": 2,
}


def plan_junk(config: GeneratorConfig, world: World) -> Callable[[Emitter, list[NamesrvTimeline]], None]:
    """A hook for :func:`simulate.simulate` that emits the configured junk records."""

    def emit(emitter: Emitter, timelines: list[NamesrvTimeline]) -> None:
        r = rng(config.seed, "junk")
        v5_groups = [g.index for g in world.groups if g.is_v5] or [0]
        start, end = config.timing.start_ms, config.end_ms
        for reason in JUNK_REASONS:
            for j in range(config.junk_count(reason)):
                ns = r.randrange(len(world.namesrvs))
                ts = r.randint(start + 1, end - 1)
                for _ in range(100):
                    if timelines[ns].epoch(ts) >= 0:
                        break
                    ts = r.randint(start + 1, end - 1)
                variant = j % VARIANTS[reason]
                group = r.choice(v5_groups) if (reason == "undecodable_body" and variant == 1) \
                    else r.randrange(len(world.groups))
                emitter.emit(ns, ts, JUNK, (reason, variant, group))

    return emit


def render_junk(renderer: "Renderer", rec: Record) -> bytes:
    """The bytes of a junk record (newline-terminated)."""
    ns, ts, seq, _rtype, (reason, variant, group) = rec
    world = renderer.world
    grp = world.groups[group]
    member = grp.members[0]
    addr = renderer.ns_addr[ns]
    port = 40000 + (seq % 20000)
    conn = f"{member.host}:{port}@{ts - 7000}"
    client_conn = f"10.0.30.{10 + seq % 200}:{port}@{ts - 3000}"
    head = f'{{"namesrv":"{addr}","ts":{ts},"seq":{seq}'

    def route_query(prefix: str = head, code: str = "105", opaque: str = str(seq % 9973)) -> str:
        return (f'{prefix},"kind":"request","code":{code},"version":401,"opaque":{opaque},'
                f'"conn":"{client_conn}","extFields":{{"topic":"TBW102"}}}}')

    def register(ext_changes: dict[str, str], body_field: bytes, crc: int, compressed: bool) -> bytes:
        ext = renderer.register_header(group, 0, 0, crc, compressed)
        ext.update(ext_changes)
        return (f'{head},"kind":"request","code":103,"version":{grp.version_code},"opaque":{seq % 9973},'
                f'"conn":"{conn}","extFields":').encode() + orjson.dumps(ext) + b"," + body_field + b"}"

    if reason == "invalid_json":
        if variant == 0:
            body = renderer.bodies.encoded(group, 0, False)
            full = register({}, body.field, body.crc, body.compressed)
            text = full[: max(40, len(full) * 3 // 5)]
        elif variant == 1:
            text = f'{head},"kind":"request","code":105,'.encode()
        else:
            text = f"namesrv={addr} ts={ts} kind=request code=105 topic=TBW102".encode()
    elif reason == "not_an_object":
        text = [b"[1,2]", b'"captured"', b"42", b"null",
                ("[" + route_query() + "]").encode()][variant]
    elif reason == "invalid_utf8":
        if variant == 0:
            text = (f'{head},"kind":"channel","event":"CONNECT","conn":"{client_conn}","remote":"10.0.30.'.encode()
                    + b"\xff\xfe" + b'1:4242"}')
        else:
            text = (f'{head},"kind":"request","code":105,"version":121,"opaque":1,"conn":"{client_conn}",'
                    '"extFields":{"topic":"order-'.encode() + b"\xff\xfe" + b'"}}')
    elif reason == "missing_field":
        if variant == 0:
            text = route_query(prefix=f'{{"namesrv":"{addr}","seq":{seq}').encode()
        else:
            text = (f'{{"ts":{ts},"seq":{seq},"kind":"channel","event":"CLOSE","conn":"{client_conn}",'
                    f'"remote":"{client_conn.partition("@")[0]}"}}').encode()
    elif reason == "wrong_type":
        if variant == 0:
            text = route_query(prefix=f'{{"namesrv":"{addr}","ts":"{ts}","seq":{seq}').encode()
        elif variant == 1:
            text = route_query(code='"105"').encode()
        else:
            text = route_query(opaque=f'"{seq % 9973}"').encode()
    elif reason == "unknown_kind":
        kind = ("heartbeat", "REQUEST")[variant]
        text = f'{head},"kind":"{kind}","conn":"{client_conn}"}}'.encode()
    elif reason == "unknown_code":
        code = (99999, 4242)[variant]
        text = (f'{head},"kind":"request","code":{code},"version":401,"opaque":{seq % 9973},'
                f'"conn":"{client_conn}","extFields":{{}}}}').encode()
    elif reason == "unknown_channel_event":
        event = ("ACTIVE", "REGISTERED", "DISCONNECT")[variant]
        text = (f'{head},"kind":"channel","event":"{event}","conn":"{client_conn}",'
                f'"remote":"{client_conn.partition("@")[0]}"}}').encode()
    elif reason == "undecodable_body":
        if variant == 0:
            text = register({}, b'"body_b64":"%%%not-base64%%%"', 0, False)
        elif variant == 1:
            # A 5.x broker with compressedRegister: compressed body, header says compressed=false.
            raw = renderer.bodies.encoded(group, 0, False, form="compressed").raw
            text = register({}, b'"body_b64":"' + base64.b64encode(raw) + b'"', zlib.crc32(raw) & 0x7FFFFFFF, False)
        else:
            raw = b"\x00\x01\x02 not a register body"
            text = register({}, b'"body_b64":"' + base64.b64encode(raw) + b'"', 0, False)
    elif reason == "crc_mismatch":
        form = "raw" if variant == 0 else "compressed"
        enc = renderer.bodies.encoded(group, 0, False, form=form)
        wrong = (enc.crc + 104_729) % 0x7FFFFFFF or 1
        text = register({}, b'"body_b64":"' + base64.b64encode(enc.raw) + b'"', wrong, enc.compressed)
    else:
        raise ValueError(f"unknown junk reason {reason}")
    return text + b"\n"
