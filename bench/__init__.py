"""Benchmarks run by hand (`python -m bench.run`); never imported by tests or by the gateway."""
