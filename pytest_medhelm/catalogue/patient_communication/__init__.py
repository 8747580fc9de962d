"""Benchmarks of the category patient communication."""
