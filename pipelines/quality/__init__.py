"""Data quality: row rules (quarantine) and Great Expectations suites (run-level verdicts)."""
