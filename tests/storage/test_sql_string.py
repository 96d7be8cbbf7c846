"""``sql_string``: any text, quotes and backslashes included, reads back from Spark SQL unchanged."""

from __future__ import annotations

import pytest

from nsreplay.storage import sql_string

TEXTS = ["run-1", "", "it's", "back\\slash", "\\'", "a\\\\'b''", "ingest-20261126T035554Z-83780dfa", "line\nbreak", "名前"]


@pytest.mark.parametrize("text", TEXTS)
def test_a_literal_reads_back_as_its_text(spark, text) -> None:
    assert spark.sql(f"SELECT {sql_string(text)} AS v").first().v == text
