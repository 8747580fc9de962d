"""The plugin lives inside the user's process: it leaves that process's umask and environment as it found them,
and starts no child with a ``preexec_fn`` (code between fork and exec in a process with threads can deadlock).

* importing litellm and loading tiktoken's encodings leave ``os.environ`` unchanged (checked in a fresh
  interpreter, where the import really happens), and a value the user set is kept;
* llama.cpp's server is launched without ``preexec_fn`` and still stops when its parent is killed (the SIGKILL
  test of tests/e2e/test_local_server.py covers the second half).

The cache's own modes and umask are checked with the cache, in tests/cache/test_store.py.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _fresh_interpreter(code: str, env: dict[str, str]) -> dict:
    """Run ``code`` in a new Python (litellm not yet imported there) and return the JSON it prints last."""
    clean = {k: v for k, v in os.environ.items()
             if k not in ("LITELLM_LOCAL_MODEL_COST_MAP", "TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR")}
    clean.update(env, PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=clean, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


ENVIRONMENT_AROUND = """\
import json, os, sys
before = dict(os.environ)
{action}
after = dict(os.environ)
changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
print(json.dumps({{"changed": changed, "litellm": "litellm" in sys.modules, "result": result,
                  "env": {{k: after.get(k) for k in ("LITELLM_LOCAL_MODEL_COST_MAP", "TIKTOKEN_CACHE_DIR")}}}}))
"""


def _around(action: str) -> str:
    return ENVIRONMENT_AROUND.format(action=textwrap.dedent(action).strip())


@pytest.mark.e2e  # a fresh interpreter, where litellm's import really happens
def test_counting_tokens_offline_then_importing_litellm_leave_the_environment_as_it_was():
    # one interpreter for both (litellm's import costs each new one 3-7 s of CPU): the counter's loading of its
    # encodings, which does not import litellm, then litellm's import, each checked on its own
    action = """
    import socket
    def refused(*args, **kwargs):
        raise OSError("no network in this check")
    socket.getaddrinfo = socket.create_connection = socket.socket.connect = refused
    from pytest_medhelm.catalogue.user_files import count_tokens
    from pytest_medhelm.dryrun import TokenCounter
    counter = TokenCounter()
    text = "Le patient présente une douleur thoracique ; 患者胸痛。"
    counted = {"changed": sorted(k for k in set(before) | set(os.environ) if before.get(k) != os.environ.get(k)),
               "counts": [count_tokens(text), counter("openai/gpt-4o", text), counter("openai/toy-model", text)],
               "litellm": "litellm" in sys.modules, "method": counter.method}
    before = dict(os.environ)
    from pytest_medhelm.thirdparty import import_litellm
    litellm = import_litellm()
    result = [counted, len(litellm.model_cost) > 100]  # its bundled price table, read offline
    """
    out = _fresh_interpreter(_around(action), {"HF_HUB_OFFLINE": "1"})
    counted, price_table = out["result"]
    assert counted["changed"] == []  # loading the encodings and counting changed nothing
    assert not counted["litellm"] and counted["method"] == "tiktoken"  # (counted without importing litellm)
    cl100k, gpt4o, toy = counted["counts"]
    # both encodings loaded offline; a model tiktoken does not know was looked up in litellm's price table (read
    # from its file: litellm still not imported) and counted with cl100k_base, the chat format's 7 tokens around it
    assert toy == cl100k + 7 and gpt4o != toy
    assert out["litellm"] and price_table
    assert out["changed"] == []  # nor did the import
    assert out["env"] == {"LITELLM_LOCAL_MODEL_COST_MAP": None, "TIKTOKEN_CACHE_DIR": None}


@pytest.mark.e2e  # a fresh interpreter, where litellm's import really happens
def test_a_value_the_user_set_is_kept(tmp_path):
    action = """
    from pytest_medhelm.thirdparty import import_litellm
    import_litellm()
    result = None
    """
    out = _fresh_interpreter(_around(action),
                             {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "TIKTOKEN_CACHE_DIR": str(tmp_path)})
    assert out["changed"] == []
    assert out["env"] == {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "TIKTOKEN_CACHE_DIR": str(tmp_path)}


@pytest.mark.e2e
def test_llama_cpp_is_started_without_preexec_fn(tmp_path, monkeypatch):
    from pytest_medhelm.endpoints.llama import process
    from pytest_medhelm.endpoints.llama import server as llama_server

    launched: list[dict] = []

    class Recorded(subprocess.Popen):  # the real Popen: the kwargs are recorded, the process really starts
        def __init__(self, *args, **kwargs):
            launched.append(dict(kwargs))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(process.subprocess, "Popen", Recorded)
    gguf = tmp_path / "not-a-model.gguf"
    gguf.write_bytes(b"GGUF but not really")
    monkeypatch.setattr(llama_server, "require_server", lambda: None)  # the launch is what is checked, not llama.cpp
    server = llama_server.LlamaServer(gguf, tmp_path / "llama.log", startup_timeout=20)
    with pytest.raises(llama_server.LlamaModelUnavailable):
        server.start()  # the child starts, then fails on the file (or on llama.cpp missing): either way it ran
    assert launched, "no process was started"
    assert all(kw.get("preexec_fn") is None for kw in launched)
    assert all(kw.get("start_new_session") for kw in launched)
    assert stat.S_IMODE((tmp_path / "llama.log").stat().st_mode) == 0o600
