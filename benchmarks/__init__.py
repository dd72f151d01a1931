"""Named benchmarks with their own runner: `python -m benchmarks [NAME...]` (never timing asserts in tests)."""
