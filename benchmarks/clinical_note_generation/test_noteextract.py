"""NoteExtract: restructure a free-text care-plan note into a fixed format."""

from pytest_medhelm import benchmark_test

test_noteextract = benchmark_test("noteextract")
