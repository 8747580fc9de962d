"""llama.cpp models (``local/<name>`` model strings): a real llama.cpp OpenAI-compatible server on a loopback port.

* :mod:`.gguf`: which GGUF file a ``local/<name>`` is, whether llama.cpp's server is installed, the cache identity;
* :mod:`.cpu`: thread and CPU-feature defaults;
* :mod:`.process`: launching the server's process group, stopping it, and never letting it outlive its parent;
* :mod:`.parent_death`: the server stops when the run dies, even by SIGKILL;
* :mod:`.bootstrap`: what the server process runs (``python -m pytest_medhelm.endpoints.llama.bootstrap``);
* :mod:`.server`: :class:`~.server.LlamaServer`, one server for one GGUF file;
* :mod:`.servers`: the run's servers, one per model, published to xdist workers.

Nothing heavy is imported here: ``llama_cpp`` runs only in the server process.
"""
