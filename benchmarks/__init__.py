"""Benchmarks run by ``make bench``: each reports a ratio against a raw
baseline measured in the same run (never an absolute timing assertion)."""
