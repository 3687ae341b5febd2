"""Benchmarks of opscreen's sample suite (FlagGems' ``benchmark/`` layout, on CPU)."""
