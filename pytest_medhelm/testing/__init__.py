"""Test helpers shipped with pytest-medhelm.

``pytest_medhelm.testing.server`` is a small, scriptable OpenAI-compatible chat-completions server (aiohttp, loopback
only) used by the plugin's integration tests and by the performance benchmark script. It can run in a background
thread of the test process (``running_server``) or as a subprocess (``start_subprocess_server``) whose counters are
readable over HTTP from any process.

This package module is deliberately empty so that importing it costs nothing; aiohttp is imported only by the
``server`` submodule.
"""
