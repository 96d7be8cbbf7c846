"""Ingest: capture files → bronze.captures_raw → silver.events / topic_configs / quarantine."""
