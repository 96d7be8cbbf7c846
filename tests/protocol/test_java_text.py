"""Text the NameServer parses with the JDK, read here as the JDK reads it: numbers
(``Integer.parseInt``, ``Long.parseLong``), bytes as a Java ``String`` (UTF-8, malformed sequences
replaced) and a compressed body's topic entries (semantics spec §8). The reference is the JDK itself:
``JavaText.java`` runs on this machine's ``java`` over every case at once, and each answer of
nsreplay must equal the JDK's."""

from __future__ import annotations

import json
import random
import struct
import zlib
from pathlib import Path

from jdk import run_java

from nsreplay.protocol.java_numbers import INT_MAX, INT_MIN, LONG_MAX, LONG_MIN, parse_java_integer
from nsreplay.protocol.java_strings import java_string
from nsreplay.protocol.register_body import BodyDecodeError, decode_register_body

JAVA_TEXT = Path(__file__).with_name("JavaText.java")

# Characters that matter to a Java number: signs, ASCII and other scripts' digits (Arabic-Indic,
# fullwidth, NKo, Thai, Bengali; a mathematical digit outside the BMP), what Python's int() also
# takes and Java does not (spaces, "_", a final newline), and digits that are not decimal ("²").
NUMBER_ALPHABET = ["0", "1", "7", "9", "+", "-", " ", "\t", "\n", "_", "١", "٣", "２", "߀", "๑", "০", "\U0001d7d8", "²", "a"]
EDGES = ["", "+", "-", "+-1", "--1", "0", "-0", "+7", "007", "12_3", " 1", "1 ", "1\n", "\t1", "١٢٣", "１２", "1\U0001d7cf",
         "²", "0x10", "1e3", str(INT_MAX), str(INT_MAX + 1), str(INT_MIN), str(INT_MIN - 1), str(LONG_MAX),
         str(LONG_MAX + 1), str(LONG_MIN), str(LONG_MIN - 1), "+" + str(LONG_MAX), "0" * 40 + "5",
         # longer than the 4,300 digits Python's int() reads: leading zeros (of any script) are read by Java
         "0" * 5000 + "5", "-" + "0" * 5000 + str(-LONG_MIN), "+" + "0" * 5000, "٠" * 5000 + "١٢", "0" * 5000 + str(LONG_MAX + 1),
         "1" * 5000, "-" + "9" * 4400]
# Malformed UTF-8: a lone continuation byte, an overlong form, a UTF-16 surrogate, a code point
# beyond U+10FFFF, sequences cut short, bytes that never start one.
BAD_UTF8 = [b"\x80", b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82", b"\xf0\x9f\x98", b"\xff", b"a\xfeb", b"\xc3"]


def _java_answers(cases: list[tuple[str, bytes]]) -> list[str]:
    return run_java(JAVA_TEXT, [f"{op} {data.hex()}" for op, data in cases])


def _numbers(rng: random.Random) -> list[str]:
    texts = list(EDGES)
    texts += ["".join(rng.choice(NUMBER_ALPHABET) for _ in range(rng.randint(1, 7))) for _ in range(3000)]
    texts += [str(rng.randint(-(2**65), 2**65)) for _ in range(300)] + [str(rng.randint(-(2**33), 2**33)) for _ in range(300)]
    return texts


def test_numbers_parse_as_integer_parse_int_and_long_parse_long_do() -> None:
    texts = _numbers(random.Random(54))
    cases = [(op, t.encode()) for t in texts for op in ("int", "long")]
    ours = []
    for t in texts:
        for bits in (32, 64):
            value = parse_java_integer(t, bits)
            ours.append("ERR" if value is None else str(value))
    differ = [(op, data.decode(), mine, java) for (op, data), mine, java in zip(cases, ours, _java_answers(cases)) if mine != java]
    assert differ == []
    assert {"ERR"} < set(ours) and len(set(ours)) > 100  # both outcomes were exercised


# Bytes by the part they play in UTF-8, so that random strings of them meet every kind of
# malformed sequence: ASCII, continuations, two-, three- and four-byte leads (with E0, ED, F0 and F4,
# whose second byte is restricted), and bytes that never start one.
UTF8_PARTS = [[0x41], [0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF], [0xC0, 0xC1, 0xC2, 0xDF], [0xE0, 0xE1, 0xEC, 0xED, 0xEE, 0xEF],
              [0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xF7], [0xF8, 0xFE, 0xFF]]


def _byte_strings(rng: random.Random) -> list[bytes]:
    datas = BAD_UTF8 + ["naïve ٣ \U0001f600".encode()]
    datas += [bytes(rng.randrange(256) for _ in range(rng.randint(0, 9))) for _ in range(1500)]
    datas += [bytes(rng.choice(rng.choice(UTF8_PARTS)) for _ in range(rng.randint(1, 6))) for _ in range(4000)]
    # well-formed sequences with one byte changed or cut
    for _ in range(1500):
        text = "".join(chr(rng.choice([rng.randint(0x80, 0x7FF), rng.randint(0x800, 0xD7FF), rng.randint(0xE000, 0xFFFF), rng.randint(0x10000, 0x10FFFF)]))
                       for _ in range(rng.randint(1, 3))).encode()
        at = rng.randrange(len(text))
        datas.append(text[:at] + bytes([rng.randrange(256)]) + text[at + 1:] if rng.random() < 0.5 else text[:at])
    return datas


def test_bytes_become_the_string_java_makes_of_them() -> None:
    datas = _byte_strings(random.Random(7))
    cases = [("string", d) for d in datas]
    ours = [java_string(d).encode().hex() for d in datas]
    assert [d for d, mine, java in zip(datas, ours, _java_answers(cases)) if mine != java] == []
    assert sum("efbfbd" in h for h in ours) > 3000  # most cases hold a malformed sequence


def _compressed_with_entry(entry: bytes) -> bytes:
    dv = json.dumps({"counter": 1, "stateVersion": 0, "timestamp": 5}).encode()
    chunks = [struct.pack(">i", len(dv)), dv, struct.pack(">i", 1), struct.pack(">i", len(entry)), entry, struct.pack(">i", 2), b"[]"]
    return zlib.compress(b"".join(chunks))


def _entries(rng: random.Random) -> list[bytes]:
    fixed = [b"orders 8 8 6 SINGLE_TAG", b"orders 8 8 6 MULTI_TAG", b"orders 8 8 6 SINGLE_TAG {\"a\":\"b c\"}", b"orders 8 8 6 SINGLE_TAG ",
             b"orders 8 8 6 ", b"orders 8 8 6", b"orders 8  8 6 SINGLE_TAG", b" 8 8 6 SINGLE_TAG", b"orders 8 8 6 single_tag",
             b"orders 8 8 6 TAG", b"orders 8_0 8 6 SINGLE_TAG", b"orders \xd9\xa8 8 6 SINGLE_TAG", b"orders +8 -8 6 SINGLE_TAG",
             b"orders 8 8 2147483648 SINGLE_TAG", b"or\xffders 8 8 6 SINGLE_TAG", b"or\xed\xa0\x80 8 8 6 SINGLE_TAG",
             b"orders\t8 8 6 SINGLE_TAG", b"", b" ", b"     "]
    # each field well formed three times in four, so that whole entries are often accepted
    names = [b"orders", b"", b"a\xffb", b"\xed\xa0\x80", "主题".encode()]
    numbers = [b"8", b"0", b"-1", b"+6", b"2147483647", b"8_0", b"\t8", "١٢".encode(), b"2147483648", b""]
    types = [b"SINGLE_TAG", b"MULTI_TAG", b"TAG", b"", b"SINGLE_TAG\n"]
    extras = [b"", b" {}", b" {\"k\": \"v w\"}", b" ", b"  "]

    def pick(good: list[bytes], fair: int) -> bytes:
        return rng.choice(good[:fair]) if rng.random() < 0.75 else rng.choice(good)

    built = [b" ".join([pick(names, 1), pick(numbers, 5), pick(numbers, 5), pick(numbers, 5), pick(types, 2)]) + pick(extras, 2)
             for _ in range(1500)]
    return fixed + built


def test_compressed_topic_entries_read_as_topic_config_decode_reads_them() -> None:
    entries = _entries(random.Random(3))
    ours = []
    for entry in entries:
        try:
            (config,) = decode_register_body(_compressed_with_entry(entry), compressed=True, version=400).topic_configs
        except BodyDecodeError:
            ours.append("ERR")
        else:
            ours.append(f"{config.topic_name.encode().hex()} {config.read_queue_nums} {config.write_queue_nums} {config.perm} "
                        f"{config.topic_filter_type}")
    cases = [("entry", e) for e in entries]
    assert [(e, mine, java) for e, mine, java in zip(entries, ours, _java_answers(cases)) if mine != java] == []
    assert 100 < ours.count("ERR") < len(ours) - 100  # both outcomes were exercised
