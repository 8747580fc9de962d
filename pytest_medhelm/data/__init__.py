"""Benchmark data: pinned sources, download and verification, and readers that name the file and row on error."""
