"""Benchmarks of the service: run as modules, e.g. `python -m envscaler.bench.sandbox_startup`."""
