"""The run's llama.cpp servers: one per ``local/...`` model for the whole run, also under xdist.

The controlling process (or the only process, without xdist) starts the servers, and publishes their URLs in a
small JSON file in the cache directory, named by run id; xdist workers read it. Workers never start a server: the
controller starts them before xdist schedules the first item, as soon as any worker has collected medhelm items.
A model's cache identity is its GGUF file (:func:`.gguf.cache_identity`), never the ephemeral port.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from pytest_medhelm.endpoints.llama.gguf import LlamaModelUnavailable, resolve_gguf, served_model_name
from pytest_medhelm.endpoints.llama.server import LlamaServer
from pytest_medhelm.values import ModelSpec

#: requests one llama.cpp server serves at once: ``llama_cpp.server`` runs one model behind one lock (it has no
#: parallel slots), so a second request only waits inside the server, its timeout running
SERVER_SLOTS = 1


class LlamaEndpoints:
    """The llama.cpp servers this process started, by model name, and the file that tells the workers where."""

    def __init__(self, publish_path: Path, log_dir: Path, n_ctx: int = 8192, n_threads: int | None = None,
                 signing_key: bytes = b"") -> None:
        self.publish_path = publish_path
        self.signing_key = signing_key  # the run's coordination key: workers believe only what it signed
        self.log_dir = log_dir
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self._servers: dict[str, LlamaServer] = {}
        self._published: dict[str, dict[str, str]] = {}

    def start(self, name: str) -> dict[str, str]:
        """Start ``name``'s server unless it runs; returns {"url", "model"} or {"error"} (also published)."""
        if name in self._published:
            return self._published[name]
        from pytest_medhelm.cache.store import make_private_dir

        make_private_dir(self.log_dir)
        log_path = self.log_dir / f"llama-server-{served_model_name(name)}.log"
        try:
            server = LlamaServer(resolve_gguf(name), log_path, n_ctx=self.n_ctx, n_threads=self.n_threads)
            url = server.start()
            self._servers[name] = server
            entry = {"url": url, "model": server.model_name, "log": str(log_path),
                     "startup_seconds": f"{server.startup_seconds:.2f}", "slots": str(SERVER_SLOTS)}
        except LlamaModelUnavailable as exc:
            entry = {"error": str(exc)}
        self._published[name] = entry
        self._publish()
        return entry

    def _publish(self) -> None:
        from pytest_medhelm.cache.store import signed, write_private_text

        # inside the cache directory: private like it, and signed (a planted file would send prompts elsewhere)
        write_private_text(self.publish_path, signed(self.signing_key, json.dumps(self._published)))

    def stop_all(self) -> None:
        for server in self._servers.values():
            server.stop()
        self._servers.clear()
        self.publish_path.unlink(missing_ok=True)


def attach(spec: ModelSpec, entry: dict[str, str]) -> ModelSpec:
    """``spec`` (a ``local/...`` ModelSpec) sent to its started server: the server's URL and its slot count."""
    slots = int(entry.get("slots") or SERVER_SLOTS)
    return dataclasses.replace(spec, api_base=entry["url"], slots=slots)


def read_published(publish_path: Path, name: str, signing_key: bytes = b"") -> dict[str, str] | None:
    """A worker's view: the controller's entry for ``name``, or None when it has not started one (or when the file
    is not signed with the run's ``signing_key``: then it was not the controller's)."""
    from pytest_medhelm.cache.store import CacheRefused, read_private_text, verified

    try:
        text = verified(signing_key, read_private_text(publish_path))
        entry = json.loads(text).get(name) if text is not None else None
    except (OSError, ValueError, AttributeError, CacheRefused):
        return None
    if not isinstance(entry, dict) or not all(isinstance(v, str) for v in entry.values()):
        return None
    return entry
