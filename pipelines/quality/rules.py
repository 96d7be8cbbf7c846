"""Row-level data-quality rules for silver, declared once and enforced twice.

Each :class:`RowRule` names a column of ``silver.events`` and a condition. The ingest parser applies
:meth:`RowRule.passes` to every record and quarantines failures with reason ``quality:<name>``; the
Great Expectations suite (:mod:`pipelines.quality.suites`) turns the same rules into expectations and
validates the accepted rows, so a rule the parser failed to enforce fails the run. A null value
passes every rule (columns that do not apply to a record kind are null).

Register bodies have their own rule (:func:`register_body_problem`), checked once per distinct body.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from nsreplay.protocol.register_body import RegisterBody


def ipv6_regex() -> str:
    """A regex (Python's and Java's dialect alike) of exactly the IPv6 addresses RFC 4291 writes as text:
    eight groups of 1-4 hex digits, or fewer around one "::", the last two groups possibly a dotted
    IPv4 address (``::ffff:10.0.0.1``); any case; no zone (:data:`ADDRESS_REGEX` adds it). Built
    as one alternative per count of groups before the "::", each with the groups after it that fit."""
    h = "[0-9A-Fa-f]{1,4}"
    octet = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
    ls32 = f"(?:{h}:{h}|{octet}(?:\\.{octet}){{3}})"  # the last 32 bits: two groups or an IPv4 address

    def after(room: int) -> str:  # 0..room groups after "::", the last two possibly IPv4
        if room == 0:
            return ""
        if room == 1:
            return f"(?:{h})?"
        return f"(?:(?:{h}:){{0,{room - 2}}}{ls32}|{h})?"

    forms = [f"(?:{h}:){{6}}{ls32}"]
    forms += [f"(?:{h}:){{{before - 1}}}{h}::{after(7 - before)}" if before else f"::{after(7)}" for before in range(8)]
    return "(?:" + "|".join(forms) + ")"


# host:port as RocketMQ writes and reads it (it splits at the LAST colon): host a name, an IPv4
# address, an IPv6 address in brackets (a broker's own address when brokerIP1 is not set, a JDK 14+
# peer) or without them (a brokerIP1 set so, a JDK 8 peer), in either case possibly with the zone
# Java's getHostAddress appends to a scoped address ("%eth0", "%2"); port 1..65535 (the range is
# checked in code: see _matcher). The pattern ends with "(?![\s\S])", the end of the text, where "$"
# would also match before a final newline, in Python and in Java (Spark's rlike) alike.
_ZONE = "(?:%[A-Za-z0-9_.-]+)?"
ADDRESS_REGEX = (r"^(\[" + ipv6_regex() + _ZONE + r"\]|[A-Za-z0-9_.-]+|" + ipv6_regex() + _ZONE
                 + r"):([1-9][0-9]{0,4})(?![\s\S])")
_ADDRESS = re.compile(ADDRESS_REGEX)


@dataclass(frozen=True)
class RowRule:
    """A condition every non-null value of ``column`` must meet."""

    name: str
    column: str
    regex: str | None = None
    min_value: int | None = None
    max_value: int | None = None

    def passes(self, value: Any) -> bool:
        if value is None:
            return True
        if self.regex is not None:
            return isinstance(value, str) and _matcher(self.regex)(value)
        if self.min_value is not None and value < self.min_value:
            return False
        return self.max_value is None or value <= self.max_value


_MATCHERS: dict[str, Callable[[str], bool]] = {}
_MEMO_VALUES = 65536  # per regex: the same few addresses come back on every line


def _matcher(regex: str) -> Callable[[str], bool]:
    """A memoizing match function for ``regex`` (one per regex per process)."""
    found = _MATCHERS.get(regex)
    if found is not None:
        return found
    compiled = _ADDRESS if regex == ADDRESS_REGEX else re.compile(regex)
    seen: dict[str, bool] = {}

    def match(value: str) -> bool:
        known = seen.get(value)
        if known is not None:
            return known
        m = compiled.match(value)
        verdict = m is not None and (regex != ADDRESS_REGEX or int(m.group(2)) <= 65535)
        if len(seen) >= _MEMO_VALUES:
            seen.clear()
        seen[value] = verdict
        return verdict

    found = _MATCHERS[regex] = match
    return found


def event_rules(*, min_ts: int, max_ts: int) -> tuple[RowRule, ...]:
    """The rules for ``silver.events`` rows."""
    return (
        RowRule("namesrv_address", "namesrv", regex=ADDRESS_REGEX),
        RowRule("broker_address", "broker_addr", regex=ADDRESS_REGEX),
        RowRule("remote_address", "remote", regex=ADDRESS_REGEX),
        RowRule("ts_plausible", "ts", min_value=min_ts, max_value=max_ts),
        # no rule on broker_id: the NameServer takes any long (a negative id is a slave, in 5.x the
        # smallest of its group), and the spec rejects none (tests/replay/test_negative_broker_ids.py)
        RowRule("seq_non_negative", "seq", min_value=0),
        RowRule("version_non_negative", "version", min_value=0),
    )


def first_broken_rule(rules: tuple[RowRule, ...], event: Mapping[str, Any]) -> str | None:
    """The name of the first rule ``event`` breaks, or None."""
    for rule in rules:
        if not rule.passes(event.get(rule.column)):
            return rule.name
    return None


def register_body_problem(body: RegisterBody, *, max_queue_nums: int, max_perm: int) -> str | None:
    """The rule a decoded register body breaks (queue numbers, perm bits), or None."""
    for config in body.topic_configs:
        if not (0 <= config.read_queue_nums <= max_queue_nums and 0 <= config.write_queue_nums <= max_queue_nums):
            return "queue_nums_range"
        if not 0 <= config.perm <= max_perm:
            return "perm_range"
    return None
