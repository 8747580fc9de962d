"""Benchmarks of the category medical research."""
