"""Model strings to where and how to reach them: a model string becomes a :class:`~pytest_medhelm.values.ModelSpec`
(URL, replicas, key variable, wire), provider keys stay with their provider, and ``local/...`` models get a
llama.cpp server of their own. See docs/architecture.md."""
