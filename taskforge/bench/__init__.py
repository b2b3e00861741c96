"""Benchmarks behind `taskforge bench ...`: each module exposes `register(bench_app)` (see taskforge/cli/bench_cmd.py)."""
