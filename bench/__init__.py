"""Benchmarks and their recorded results (see bench/README.md)."""
