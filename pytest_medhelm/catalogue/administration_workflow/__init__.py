"""Benchmarks of the category administration workflow."""
