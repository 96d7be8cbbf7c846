"""Explicit schemas of every nsreplay table, one module per layer. Never inferred."""

from schemas.bronze import CAPTURE_BODIES, CAPTURES_RAW, INGEST_FILES
from schemas.silver import EVENTS, INGEST_RUNS, QUALITY_RESULTS, QUARANTINE, TOPIC_CONFIGS

ALL_TABLES = (CAPTURES_RAW, CAPTURE_BODIES, INGEST_FILES, EVENTS, TOPIC_CONFIGS, QUARANTINE, INGEST_RUNS, QUALITY_RESULTS)

__all__ = [
    "ALL_TABLES",
    "CAPTURES_RAW",
    "CAPTURE_BODIES",
    "INGEST_FILES",
    "EVENTS",
    "TOPIC_CONFIGS",
    "QUARANTINE",
    "INGEST_RUNS",
    "QUALITY_RESULTS",
]
