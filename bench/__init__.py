"""Benchmarks of the service: run as modules, e.g. `python -m bench.sandbox_startup`."""
