"""REGISTER_BROKER bodies, encoded once per (group, table version, incremental) and cached.

Contract:

* The body of a full registration is the group's table version; an incremental one (after a topic
  create/update) carries only the changed topics with the new DataVersion (registerIncrementBrokerData).
* Forms (per group): ``json`` -> the record's ``body`` is the JSON object; ``raw`` -> ``body_b64`` holds
  the UTF-8 JSON bytes; ``compressed`` -> ``body_b64`` holds the zlib form and the header says
  compressed="true". bodyCrc32 is CRC32 & 0x7FFFFFFF of exactly the bytes in ``body_b64`` (for the
  ``json`` form, of the JSON bytes, or "0" when ``crc_in_json_body`` is off).
* 4.9 brokers' DataVersion JSON has no ``stateVersion`` (4.9's DataVersion has only counter and
  timestamp); 5.x brokers always send it. The compressed form is the codec's (5.x with version >= 413
  appends the empty static-topic mapping section).
* Encoding goes through :mod:`nsreplay.protocol.register_body`; the cache makes the cost per distinct body.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

import orjson

from nsreplay.protocol.register_body import (
    DataVersion,
    RegisterBody,
    body_crc32,
    encode_compressed_register_body,
    encode_json_register_body,
)

from .brokers import Lineage
from .world import BrokerGroup

__all__ = ["EncodedBody", "BodyCache", "data_version_json"]


@dataclass(frozen=True)
class EncodedBody:
    """A body ready to splice into a record: ``field`` is ``"body":{...}`` or ``"body_b64":"..."``."""

    field: bytes
    crc: int
    compressed: bool
    #: The raw wire bytes (JSON or zlib form).
    raw: bytes


def data_version_json(dv: DataVersion, *, v5: bool) -> dict[str, int]:
    """DataVersion as the broker serializes it (fastjson: keys sorted; 4.9 has no stateVersion)."""
    if v5:
        return {"counter": dv.counter, "stateVersion": dv.state_version, "timestamp": dv.timestamp}
    return {"counter": dv.counter, "timestamp": dv.timestamp}


class BodyCache:
    """Encodes each distinct register body once."""

    def __init__(self, groups: tuple[BrokerGroup, ...], lineages: list[Lineage], *, crc_in_json_body: bool) -> None:
        self.groups = groups
        self.lineages = lineages
        self.crc_in_json_body = crc_in_json_body
        self._cache: dict[tuple[int, int, bool, str], EncodedBody] = {}
        self._dv: dict[tuple[int, int], bytes] = {}

    def register_body(self, group: int, version: int, incremental: bool) -> RegisterBody:
        """The decoded body a registration of ``group`` at table ``version`` carries."""
        tv = self.lineages[group].versions[version]
        topics = tv.changed if incremental else tv.topics
        return RegisterBody(data_version=tv.dv, topic_configs=topics, filter_server_list=())

    def json_bytes(self, group: int, version: int, incremental: bool) -> bytes:
        """Compact JSON bytes of the body as the group's broker line sends it."""
        body = self.register_body(group, version, incremental)
        obj = encode_json_register_body(body)
        if not self.groups[group].is_v5:
            wrapper = obj["topicConfigSerializeWrapper"]
            wrapper["dataVersion"] = data_version_json(body.data_version or DataVersion(0, 0, 0), v5=False)
        return orjson.dumps(obj)

    def encoded(self, group: int, version: int, incremental: bool, form: str | None = None) -> EncodedBody:
        """The body in ``form`` (default: the group's own form)."""
        grp = self.groups[group]
        form = form or grp.body_form
        key = (group, version, incremental, form)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        if form == "compressed":
            raw = encode_compressed_register_body(
                self.register_body(group, version, incremental),
                with_mappings=grp.is_v5 and grp.version_code >= 413,
            )
            enc = EncodedBody(b'"body_b64":"' + base64.b64encode(raw) + b'"', body_crc32(raw), True, raw)
        else:
            raw = self.json_bytes(group, version, incremental)
            if form == "raw":
                enc = EncodedBody(b'"body_b64":"' + base64.b64encode(raw) + b'"', body_crc32(raw), False, raw)
            else:
                crc = body_crc32(raw) if self.crc_in_json_body else 0
                enc = EncodedBody(b'"body":' + raw, crc, False, raw)
        self._cache[key] = enc
        return enc

    def data_version_bytes(self, group: int, version: int) -> bytes:
        """The QUERY_DATA_VERSION body (DataVersion JSON) of ``group`` at ``version``."""
        key = (group, version)
        hit = self._dv.get(key)
        if hit is None:
            dv = self.lineages[group].versions[version].dv
            hit = orjson.dumps(data_version_json(dv, v5=self.groups[group].is_v5))
            self._dv[key] = hit
        return hit
