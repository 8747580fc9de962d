"""Benchmarks of the category clinical decision support."""
