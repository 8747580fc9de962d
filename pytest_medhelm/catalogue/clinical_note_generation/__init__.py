"""Benchmarks of the category clinical note generation."""
