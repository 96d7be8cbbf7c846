"""Renders sequenced records as capture-format v1 lines (bytes, newline-terminated).

Contract: rendering is a pure function of the record and the plan (world, lineages, config), so any
worker renders any record to the same bytes. Lines are built by string formatting; the REGISTER_BROKER
``extFields`` + body tail is cached per (member, broker id, table version, incremental), so the large
body text is serialized once and spliced into every line that carries it.

Field order of every line: ``namesrv, ts, seq, kind`` then the kind's fields (request: ``code, version,
opaque, conn, extFields, body | body_b64``; response: ``code, opaque, conn, remark, body | body_b64``;
channel: ``event, conn, remote``; namesrv_start: ``rocketmq_version, config``).
"""

from __future__ import annotations

from typing import Any, Callable

import orjson

from .bodies import BodyCache
from .brokers import Lineage
from .config import GeneratorConfig
from .records import CHANNEL, HEARTBEAT, JUNK, QUERY_DV, REGISTER, REQUEST, RESPONSE, START, UNREGISTER, Record
from .world import World

__all__ = ["Renderer"]


class Renderer:
    """Turns records into bytes; one instance per process (it holds the body caches)."""

    def __init__(self, config: GeneratorConfig, world: World, lineages: list[Lineage]) -> None:
        self.config = config
        self.world = world
        self.bodies = BodyCache(world.groups, lineages, crc_in_json_body=config.topology.crc_in_json_body)
        self.ns_addr = [ns.addr for ns in world.namesrvs]
        self._register_tails: dict[tuple[int, int, int, int, bool], bytes] = {}
        self._small_tails: dict[tuple[Any, ...], str] = {}
        self._start_tails = [
            ',"kind":"namesrv_start","rocketmq_version":' + orjson.dumps(ns.rocketmq_version).decode()
            + ',"config":' + orjson.dumps(ns.config).decode() + "}\n"
            for ns in world.namesrvs
        ]
        self.junk_renderer: Callable[["Renderer", Record], bytes] | None = None

    # ------------------------------------------------------------------ headers

    def register_header(self, group: int, member: int, broker_id: int, crc: int, compressed: bool) -> dict[str, str]:
        """REGISTER_BROKER extFields as the member's broker line sends them."""
        grp = self.world.groups[group]
        mem = grp.members[member]
        ext = {
            "brokerName": grp.name,
            "brokerAddr": mem.addr,
            "clusterName": grp.cluster,
            "haServerAddr": mem.ha_addr,
            "brokerId": str(broker_id),
            "compressed": "true" if compressed else "false",
            "bodyCrc32": str(crc),
        }
        if grp.is_v5:
            ext["enableActingMaster"] = "true" if grp.acting_master else "false"
            if grp.acting_master or self.config.topology.v5_always_send_heartbeat_timeout:
                ext["heartbeatTimeoutMillis"] = str(self.config.topology.broker_not_active_timeout_ms)
        return ext

    def _identity_header(self, group: int, member: int, broker_id: int) -> dict[str, str]:
        grp = self.world.groups[group]
        return {
            "brokerName": grp.name,
            "brokerAddr": grp.members[member].addr,
            "clusterName": grp.cluster,
            "brokerId": str(broker_id),
        }

    def _register_tail(self, group: int, member: int, broker_id: int, version: int, incremental: bool) -> bytes:
        key = (group, member, broker_id, version, incremental)
        tail = self._register_tails.get(key)
        if tail is None:
            tail = self._build_register_tail(group, member, broker_id, version, incremental)
            self._register_tails[key] = tail
        return tail

    def _build_register_tail(self, group: int, member: int, broker_id: int, version: int, incremental: bool) -> bytes:
        body = self.bodies.encoded(group, version, incremental)
        ext = self.register_header(group, member, broker_id, body.crc, body.compressed)
        return b'"extFields":' + orjson.dumps(ext) + b"," + body.field + b"}\n"

    def _small_tail(self, rtype: int, group: int, member: int, broker_id: int, version: int = -1) -> str:
        key = (rtype, group, member, broker_id, version)
        tail = self._small_tails.get(key)
        if tail is None:
            if rtype == HEARTBEAT:
                grp = self.world.groups[group]
                ext = {"brokerAddr": grp.members[member].addr, "brokerName": grp.name, "clusterName": grp.cluster}
            else:
                ext = self._identity_header(group, member, broker_id)
            tail = '"extFields":' + orjson.dumps(ext).decode()
            if rtype == QUERY_DV:
                tail += ',"body":' + self.bodies.data_version_bytes(group, version).decode()
            tail += "}\n"
            self._small_tails[key] = tail
        return tail

    # ------------------------------------------------------------------ lines

    def register_parts(self, rec: Record) -> tuple[bytes, tuple[int, int, int, int, bool]]:
        """A REGISTER_BROKER line split in its per-line head and the key of its shared tail."""
        ns, ts, seq, _rtype, args = rec
        op, conn, g, m, bid, v, inc = args
        head = (f'{{"namesrv":"{self.ns_addr[ns]}","ts":{ts},"seq":{seq},"kind":"request","code":103,'
                f'"version":{self.world.groups[g].version_code},"opaque":{op},"conn":"{conn}",').encode()
        return head, (g, m, bid, v, inc)

    def register_tail(self, key: tuple[int, int, int, int, bool]) -> bytes:
        """The shared tail (``"extFields":{...},"body...}`` and newline) for a register-tail key.

        Not cached here (the gzip writer caches the deflated form instead)."""
        cached = self._register_tails.get(key)
        return cached if cached is not None else self._build_register_tail(*key)

    def render_into(self, rec: Record, out: list[bytes]) -> int:
        """Append the line of ``rec`` to ``out`` (possibly as several parts); return its length."""
        if rec[3] == REGISTER:
            head, key = self.register_parts(rec)
            tail = self._register_tail(*key)
            out.append(head)
            out.append(tail)
            return len(head) + len(tail)
        line = self.line(rec)
        out.append(line)
        return len(line)

    def line(self, rec: Record) -> bytes:
        """The full line of ``rec`` as bytes."""
        ns, ts, seq, rtype, args = rec
        prefix = f'{{"namesrv":"{self.ns_addr[ns]}","ts":{ts},"seq":{seq}'
        if rtype == REGISTER:
            parts: list[bytes] = []
            self.render_into(rec, parts)
            return b"".join(parts)
        if rtype == CHANNEL:
            event, conn, remote = args
            return f'{prefix},"kind":"channel","event":"{event}","conn":"{conn}","remote":"{remote}"}}\n'.encode()
        if rtype == START:
            return (prefix + self._start_tails[ns]).encode()
        if rtype in (UNREGISTER, QUERY_DV, HEARTBEAT):
            op, conn, g, m, bid = args[:5]
            version = args[5] if rtype == QUERY_DV else -1
            code = 104 if rtype == UNREGISTER else 322 if rtype == QUERY_DV else 904
            return (f'{prefix},"kind":"request","code":{code},"version":{self.world.groups[g].version_code},'
                    f'"opaque":{op},"conn":"{conn}",' + self._small_tail(rtype, g, m, bid, version)).encode()
        if rtype == REQUEST:
            code, version, op, conn, ext_json, body_json = args
            body = f',"body":{body_json}' if body_json is not None else ""
            return (f'{prefix},"kind":"request","code":{code},"version":{version},"opaque":{op},'
                    f'"conn":"{conn}","extFields":{ext_json}{body}}}\n').encode()
        if rtype == RESPONSE:
            op, conn, code, tail = args
            return (f'{prefix},"kind":"response","code":{code},"opaque":{op},"conn":"{conn}",'.encode() + tail)
        if rtype == JUNK:
            if self.junk_renderer is None:
                raise RuntimeError("no junk renderer installed")
            return self.junk_renderer(self, rec)
        raise ValueError(f"unknown record type {rtype}")
