"""What the parser tests share: the request codes and channel events they allow, a one-topic register
body, and a fresh LineParser with the body rules of the default settings' limits."""

from nsreplay.protocol.register_body import DataVersion, RegisterBody, TopicConfig
from pipelines.ingest.records import LineParser, ParserLimits
from pipelines.quality.rules import register_body_problem

LIMITS = ParserLimits(frozenset({100, 102, 103, 104, 105, 205, 216, 217, 322, 327, 904}), frozenset({"CONNECT", "CLOSE", "IDLE", "EXCEPTION"}))
BODY = RegisterBody(DataVersion(0, 1732147100000, 3), (TopicConfig("orders", 8, 8, 6, 0),), ())


def parser() -> LineParser:
    """A parser with its own memory (nothing shared with other tests)."""
    return LineParser(LIMITS, lambda b: register_body_problem(b, max_queue_nums=1024, max_perm=15))
