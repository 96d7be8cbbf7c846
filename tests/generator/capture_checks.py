"""An independent capture-format v1 line checker (spec/capture-format.md) for the generator tests.

:func:`classify` returns the quarantine reason of a line, or None with the parsed record when the line is a
valid record.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from nsreplay.protocol.register_body import BodyDecodeError, body_crc32, decode_json_register_body, decode_register_body

KNOWN_CODES = {100, 102, 103, 104, 205, 216, 217, 322, 327, 904,
               101, 105, 106, 206, 219, 224, 301, 302, 303, 304, 311, 312, 313, 314, 315, 325, 326, 901, 902, 905}
CHANNEL_EVENTS = {"CONNECT", "CLOSE", "IDLE", "EXCEPTION"}
KINDS = {"request", "response", "channel", "namesrv_start"}


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def classify(raw: bytes) -> tuple[str | None, dict[str, Any] | None]:
    """(reason, None) for a bad line, (None, record) for a valid one."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return "invalid_utf8", None
    try:
        obj = json.loads(text)
    except ValueError:
        return "invalid_json", None
    if not isinstance(obj, dict):
        return "not_an_object", None
    for name in ("namesrv", "ts", "kind"):
        if name not in obj:
            return "missing_field", None
    if not isinstance(obj["namesrv"], str) or not _is_int(obj["ts"]) or not isinstance(obj["kind"], str):
        return "wrong_type", None
    if "seq" in obj and not _is_int(obj["seq"]):
        return "wrong_type", None
    kind = obj["kind"]
    if kind not in KINDS:
        return "unknown_kind", None
    if kind == "channel":
        for name in ("event", "conn", "remote"):
            if name not in obj:
                return "missing_field", None
            if not isinstance(obj[name], str):
                return "wrong_type", None
        if obj["event"] not in CHANNEL_EVENTS:
            return "unknown_channel_event", None
    elif kind == "namesrv_start":
        if "rocketmq_version" not in obj or "config" not in obj:
            return "missing_field", None
        if not isinstance(obj["rocketmq_version"], str) or not isinstance(obj["config"], dict):
            return "wrong_type", None
    elif kind == "response":
        for name in ("code", "opaque", "conn"):
            if name not in obj:
                return "missing_field", None
        if not (_is_int(obj["code"]) and _is_int(obj["opaque"]) and isinstance(obj["conn"], str)
                and (obj.get("remark") is None or isinstance(obj["remark"], str))
                and (obj.get("body") is None or isinstance(obj["body"], (dict, list)))
                and (obj.get("body_b64") is None or isinstance(obj["body_b64"], str))):
            return "wrong_type", None
        if "body_b64" in obj:
            try:
                base64.b64decode(obj["body_b64"], validate=True)
            except (binascii.Error, ValueError):
                return "undecodable_body", None
    elif kind == "request":
        for name in ("code", "version", "opaque", "conn", "extFields"):
            if name not in obj:
                return "missing_field", None
        if not (_is_int(obj["code"]) and _is_int(obj["version"]) and _is_int(obj["opaque"])
                and isinstance(obj["conn"], str) and isinstance(obj["extFields"], dict)
                and all(isinstance(v, str) for v in obj["extFields"].values())):
            return "wrong_type", None
        if obj["code"] not in KNOWN_CODES:
            return "unknown_code", None
        raw_body = None
        if "body_b64" in obj:
            try:
                raw_body = base64.b64decode(obj["body_b64"], validate=True)
            except (binascii.Error, ValueError):
                return "undecodable_body", None
        if obj["code"] == 103:
            ext = obj["extFields"]
            crc = int(ext.get("bodyCrc32", "0"))
            if raw_body is not None:
                if crc != 0 and crc != body_crc32(raw_body):
                    return "crc_mismatch", None
                try:
                    decode_register_body(raw_body, compressed=ext.get("compressed") == "true", version=obj["version"])
                except BodyDecodeError:
                    return "undecodable_body", None
            elif "body" in obj:
                try:
                    decode_json_register_body(obj["body"], version=obj["version"])
                except BodyDecodeError:
                    return "undecodable_body", None
    return None, obj


@dataclass
class Line:
    """One line of a capture file."""

    file: str
    number: int
    raw: bytes
    reason: str | None
    record: dict[str, Any] | None


def read_lines(out_dir: Path) -> list[Line]:
    """Every line of every capture file in ``out_dir`` (sorted file names), classified."""
    lines: list[Line] = []
    for path in sorted(out_dir.glob("*.jsonl*")):
        data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        assert data.endswith(b"\n"), f"{path.name} does not end with a newline"
        for number, raw in enumerate(data[:-1].split(b"\n"), start=1):
            reason, record = classify(raw)
            lines.append(Line(path.name, number, raw, reason, record))
    return lines


def iter_registers(records: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """REGISTER_BROKER records."""
    return (r for r in records if r["kind"] == "request" and r["code"] == 103)
