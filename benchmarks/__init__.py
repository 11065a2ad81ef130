"""Benchmarks: `make bench` (not part of `make test`)."""
