"""Everything under the cache directory: the answer cache on disk (JSON only), the shared Redis tier behind it, the
writer thread that stores answers, the cache identity of a request, and the private files kept there (batch records,
the llama.cpp servers' URLs). See docs/architecture.md."""
