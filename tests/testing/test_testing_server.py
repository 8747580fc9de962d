"""Tests of the OpenAI-compatible test server in pytest_medhelm.testing.server.

No timed assertions: overlap is checked through the server's own max_in_flight gauge, and "stopped" through
connection errors.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import aiohttp
import pytest

from pytest_medhelm.testing import server as server_module
from pytest_medhelm.testing.server import (
    ChatServer,
    Fault,
    count_tokens,
    running_server,
    start_subprocess_server,
)

REPO_ROOT = Path(server_module.__file__).resolve().parents[3]


# --------------------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------------------


def chat(url, content="What is 2+2?", *, model="test-model", headers=None, path="/chat/completions", body=None,
         raw=None, timeout=10.0):
    """POST a chat request with urllib; returns (status, headers, body bytes) for any HTTP answer."""
    if raw is None:
        payload = body if body is not None else {"model": model, "messages": [{"role": "user", "content": content}]}
        raw = json.dumps(payload).encode()
    request = urllib.request.Request(
        url + path, data=raw, headers={"Content-Type": "application/json", **(headers or {})}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def answer(url, content="What is 2+2?", **kwargs) -> str:
    status, _, body = chat(url, content, **kwargs)
    assert status == 200, body
    return json.loads(body)["choices"][0]["message"]["content"]


def get_json(url, headers=None):
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def post_json(url, payload):
    request = urllib.request.Request(
        url, data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def assert_refused(url):
    with pytest.raises(urllib.error.URLError) as excinfo:
        chat(url, timeout=5)
    assert isinstance(excinfo.value.reason, ConnectionRefusedError)


def assert_openai_error(body: bytes, status_type: str, code=None) -> dict:
    error = json.loads(body)["error"]
    assert set(error) >= {"message", "type", "code"}
    assert error["type"] == status_type
    assert error["code"] == code
    assert isinstance(error["message"], str) and error["message"]
    return error


# --------------------------------------------------------------------------------------------------------------
# answers and response shape
# --------------------------------------------------------------------------------------------------------------


def test_completion_has_openai_shape_and_echoes_model():
    with running_server() as server:
        assert server.url == f"http://127.0.0.1:{server.port}/v1"
        status, headers, raw = chat(server.url, "one two  three\nfour", model="my-model")
        assert status == 200
        assert headers["Content-Type"].startswith("application/json")
        body = json.loads(raw)
        assert set(body) == {"id", "object", "created", "model", "choices", "usage"}
        assert body["id"].startswith("chatcmpl-")
        assert body["object"] == "chat.completion"
        assert isinstance(body["created"], int)
        assert body["model"] == "my-model"
        assert body["choices"] == [
            {"index": 0, "message": {"role": "assistant", "content": "A"}, "finish_reason": "stop"}
        ]
        assert body["usage"] == {"prompt_tokens": 4, "completion_tokens": 1, "total_tokens": 5}


def test_usage_counts_words_over_all_messages_and_text_parts():
    with running_server(answer="the answer is B") as server:
        messages = [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "first part"}, {"type": "text", "text": "x"}]},
        ]
        status, _, raw = chat(server.url, body={"model": "m", "messages": messages})
        assert status == 200
        assert json.loads(raw)["usage"] == {"prompt_tokens": 5, "completion_tokens": 4, "total_tokens": 9}


def test_count_tokens():
    assert count_tokens("") == 0
    assert count_tokens("   ") == 1  # non-empty text counts at least one token
    assert count_tokens("a b\tc\n d") == 4


def test_both_paths_models_and_health():
    with running_server(models=["m1", "m2"]) as server:
        assert answer(server.url, path="/chat/completions") == "A"  # .../v1/chat/completions
        assert answer(server.base_url, path="/chat/completions") == "A"  # .../chat/completions
        assert [r["path"] for r in server.requests] == ["/v1/chat/completions", "/chat/completions"]
        status, models = get_json(server.url + "/models")
        assert status == 200
        assert models["object"] == "list"
        assert [m["id"] for m in models["data"]] == ["m1", "m2"]
        assert get_json(server.base_url + "/health") == (200, {"status": "ok"})
        assert server.count == 2  # only chat requests are counted


def test_rules_match_substring_of_last_user_message_first_match_wins():
    rules = {"pubmed": "yes", "yes or no": "maybe", "calc": "42"}
    with running_server(answer="Z", rules=rules) as server:
        assert answer(server.url, "pubmed question: yes or no?") == "yes"
        assert answer(server.url, "answer yes or no") == "maybe"
        assert answer(server.url, "nothing matches") == "Z"
        # Only the last user message is matched, not earlier turns.
        body = {
            "model": "m",
            "messages": [
                {"role": "user", "content": "calc this"},
                {"role": "assistant", "content": "ok"},
                {"role": "user", "content": "plain"},
            ],
        }
        assert json.loads(chat(server.url, body=body)[2])["choices"][0]["message"]["content"] == "Z"


def test_script_callable_then_rules_then_constant():
    seen = []

    def script(request_json):
        seen.append(request_json)
        text = request_json["messages"][-1]["content"]
        return None if "fallthrough" in text else text.upper()

    with running_server(answer="C", rules={"rule": "R"}, script=script) as server:
        assert answer(server.url, "hello") == "HELLO"
        assert answer(server.url, "fallthrough rule") == "R"
        assert answer(server.url, "fallthrough") == "C"
        assert seen[0]["model"] == "test-model"


def test_async_script():
    async def script(request_json):
        await asyncio.sleep(0)
        return "async"

    with running_server(script=script) as server:
        assert answer(server.url) == "async"


def test_set_answer_replaces_the_policy():
    with running_server() as server:
        assert answer(server.url) == "A"
        server.set_answer("B")
        assert answer(server.url) == "B"
        server.set_answer({"two": "4"})
        assert answer(server.url, "two plus two") == "4"
        assert answer(server.url, "other") == "B"  # the constant stays the fallback
        server.set_answer(lambda request_json: "from script")
        assert answer(server.url) == "from script"
        server.set_answer("D")  # a string clears rules and script
        assert answer(server.url, "two plus two") == "D"


def test_broken_script_is_a_500_naming_the_exception(capsys):
    def script(request_json):
        raise KeyError("boom")

    with running_server(script=script) as server:
        status, _, raw = chat(server.url)
    assert status == 500
    error = assert_openai_error(raw, "server_error")
    assert "KeyError" in error["message"] and "boom" in error["message"]


def test_invalid_requests_are_400_and_consume_no_fault():
    with running_server(faults=[("status", 503)]) as server:
        status, _, raw = chat(server.url, raw=b"{not json")
        assert status == 400
        assert_openai_error(raw, "invalid_request_error")
        assert chat(server.url, body={"messages": [{"role": "user", "content": "x"}]})[0] == 400
        assert chat(server.url, body={"model": "m", "messages": []})[0] == 400
        streaming = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "x"}]}
        assert chat(server.url, body=streaming)[0] == 400
        assert chat(server.url)[0] == 503  # the planned fault is still there
        log = server.requests
        assert log[0]["json"] is None and log[0]["raw_body"] == "{not json"
        assert [r["status"] for r in log] == [400, 400, 400, 400, 503]


# --------------------------------------------------------------------------------------------------------------
# latency and concurrency
# --------------------------------------------------------------------------------------------------------------


async def _load(url: str, n: int, concurrency: int) -> list[str]:
    semaphore = asyncio.Semaphore(concurrency)
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(i: int) -> str:
            async with semaphore:
                payload = {"model": "m", "messages": [{"role": "user", "content": f"question {i}."}]}
                async with session.post(url + "/chat/completions", json=payload) as response:
                    assert response.status == 200
                    return (await response.json())["choices"][0]["message"]["content"]

        return await asyncio.gather(*(one(i) for i in range(n)))


def test_latency_overlaps_concurrent_requests():
    with running_server(rules={"question 7.": "B"}, latency=0.05) as server:
        # Read the log from another thread while requests pour in: the log must stay consistent.
        stop_reading = threading.Event()
        snapshots = []

        def reader():
            while not stop_reading.is_set():
                snapshots.append(len(server.requests))
                time.sleep(0.001)

        thread = threading.Thread(target=reader)
        thread.start()
        try:
            answers = asyncio.run(_load(server.url, n=200, concurrency=32))
        finally:
            stop_reading.set()
            thread.join()
        assert len(answers) == 200
        assert answers[7] == "B" and answers.count("A") == 199
        stats = server.stats()
        assert stats["count"] == 200 and stats["answered"] == 200 and stats["in_flight"] == 0
        assert server.max_in_flight >= 16
        assert sorted(r["n"] for r in server.requests) == list(range(1, 201))
        assert snapshots == sorted(snapshots)


# --------------------------------------------------------------------------------------------------------------
# faults
# --------------------------------------------------------------------------------------------------------------


def test_status_faults_are_consumed_in_arrival_order():
    faults = [
        ("status", 429, {"Retry-After": "1"}),
        ("status", 500),
        ("ok",),
        ("status", 503, None, "try later"),
    ]
    with running_server(faults=faults) as server:
        status, headers, raw = chat(server.url)
        assert status == 429
        assert headers["Retry-After"] == "1"
        assert_openai_error(raw, "requests", "rate_limit_exceeded")

        status, _, raw = chat(server.url)
        assert status == 500
        assert_openai_error(raw, "server_error")

        assert answer(server.url) == "A"

        status, _, raw = chat(server.url)
        assert status == 503
        assert assert_openai_error(raw, "server_error")["message"] == "try later"

        assert answer(server.url) == "A"  # queue exhausted: normal answers
        assert [(r["status"], r["fault"]) for r in server.requests] == [
            (429, "status"), (500, "status"), (200, None), (503, "status"), (200, None)
        ]
        assert server.stats()["by_status"] == {"429": 1, "500": 1, "200": 2, "503": 1}


def test_add_faults_appends_to_the_queue():
    with running_server() as server:
        server.add_faults(("status", 500))
        server.add_faults(("status", 502), ("disconnect",))
        assert server.stats()["faults_pending"] == 3
        assert chat(server.url)[0] == 500
        server.configure(faults=[("status", 404)])  # faults= replaces the queue
        assert server.stats()["faults_pending"] == 1
        status, _, raw = chat(server.url)
        assert status == 404
        assert_openai_error(raw, "invalid_request_error", "model_not_found")
        assert answer(server.url) == "A"


def test_timeout_fault_holds_the_request():
    with running_server(faults=[("timeout", 30), ("timeout", 0.05)]) as server:
        with pytest.raises((TimeoutError, urllib.error.URLError)):
            chat(server.url, timeout=0.3)
        # A hold shorter than the client's timeout is just a slow answer.
        assert answer(server.url) == "A"
        assert answer(server.url) == "A"
        assert [r["fault"] for r in server.requests] == ["timeout", "timeout", None]
    # Leaving the block did not wait for the 30 s hold: the handler was cancelled with the server.


def test_malformed_fault_is_a_200_that_is_not_json():
    with running_server(faults=[("malformed",), ("malformed", '{"choices": []}')]) as server:
        status, headers, raw = chat(server.url)
        assert status == 200
        assert headers["Content-Type"].startswith("application/json")
        with pytest.raises(ValueError):
            json.loads(raw)
        status, _, raw = chat(server.url)
        assert status == 200 and json.loads(raw) == {"choices": []}
        assert answer(server.url) == "A"


def test_disconnect_fault_drops_the_connection_without_response():
    with running_server(faults=[("disconnect",)]) as server:
        with pytest.raises(ConnectionError):
            chat(server.url)
        assert answer(server.url) == "A"
        first = server.requests[0]
        assert first["status"] is None and first["fault"] == "disconnect"
        assert server.stats()["by_status"] == {"disconnect": 1, "200": 1}


def test_disconnect_fault_with_aiohttp_client():
    async def go(url):
        async with aiohttp.ClientSession() as session:
            payload = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
            with pytest.raises(aiohttp.ServerDisconnectedError):
                async with session.post(url + "/chat/completions", json=payload) as response:
                    await response.read()
            async with session.post(url + "/chat/completions", json=payload) as response:
                return response.status

    with running_server(faults=[("disconnect",)]) as server:
        assert asyncio.run(go(server.url)) == 200


def test_fail_matching_fails_every_matching_request():
    with running_server(fail_matching={"poison": ("status", 500), "drop": ("disconnect",)}) as server:
        for _ in range(3):
            assert chat(server.url, "this is poison")[0] == 500
            assert answer(server.url, "this is fine") == "A"
        with pytest.raises(ConnectionError):
            chat(server.url, "drop me")
        server.configure(fail_matching=None)
        assert answer(server.url, "poison") == "A"


@pytest.mark.parametrize(
    "spec",
    [("status", 200), ("status",), ("status", 500, "not a mapping"), ("timeout",), ("timeout", -1),
     ("explode",), ("disconnect", 1), "status", ("malformed", 3)],
)
def test_invalid_fault_specs_are_rejected_early(spec):
    with pytest.raises(ValueError):
        Fault.parse(spec)
    with pytest.raises(ValueError):
        ChatServer(faults=[spec])


def test_fault_dict_form_and_json_round_trip():
    fault = Fault.parse({"kind": "status", "status": 429, "headers": {"Retry-After": "2"}})
    assert fault == Fault.parse(("status", 429, {"Retry-After": "2"}))
    specs = [("status", 429, {"Retry-After": "2"}, "m"), ("timeout", 1.5), ("malformed",), ("disconnect",), ("ok",)]
    for spec in specs:
        parsed = Fault.parse(spec)
        assert Fault.parse(json.loads(json.dumps(parsed.to_json()))) == parsed


def test_unknown_options_are_rejected():
    with pytest.raises(TypeError, match="latncy"):
        ChatServer(latncy=1)
    with pytest.raises(ValueError):
        ChatServer(latency=-1)


# --------------------------------------------------------------------------------------------------------------
# API key
# --------------------------------------------------------------------------------------------------------------


def test_api_key_is_required_and_never_logged():
    secret = "sk-test-very-secret-key"
    with running_server(api_key=secret) as server:
        status, _, raw = chat(server.url, headers={"Authorization": "Bearer sk-wrong-key"})
        assert status == 401
        error = assert_openai_error(raw, "invalid_request_error", "invalid_api_key")
        assert "Incorrect API key" in error["message"]
        assert "sk-wrong-key" not in raw.decode()

        assert chat(server.url)[0] == 401  # no key at all
        assert get_json(server.url + "/models")[0] == 401
        assert get_json(server.base_url + "/health")[0] == 200

        assert answer(server.url, headers={"Authorization": f"Bearer {secret}"}) == "A"
        assert get_json(server.url + "/models", {"Authorization": f"Bearer {secret}"})[0] == 200

        log = server.requests
        assert [r["had_auth"] for r in log] == [True, False, True]
        assert [r["status"] for r in log] == [401, 401, 200]
        assert all("authorization" not in {h.lower() for h in r["headers"]} for r in log)
        dumped = json.dumps(log)
        assert secret not in dumped and "sk-wrong-key" not in dumped


def test_401_does_not_consume_faults():
    with running_server(api_key="k", faults=[("status", 500)]) as server:
        assert chat(server.url)[0] == 401
        assert chat(server.url, headers={"Authorization": "Bearer k"})[0] == 500


# --------------------------------------------------------------------------------------------------------------
# counters, log, control endpoints
# --------------------------------------------------------------------------------------------------------------


def test_counters_log_and_reset():
    with running_server() as server:
        for i in range(3):
            answer(server.url, f"q{i}", headers={"X-Trace": str(i)})
        assert server.count == 3
        log = server.requests
        assert [r["n"] for r in log] == [1, 2, 3]
        assert [r["json"]["messages"][0]["content"] for r in log] == ["q0", "q1", "q2"]
        assert log[1]["headers"]["X-Trace"] == "1"
        assert log[0]["method"] == "POST" and log[0]["had_auth"] is False
        server.wait_for_requests(3, timeout=1)
        with pytest.raises(TimeoutError):
            server.wait_for_requests(4, timeout=0.05)

        log[0]["json"] = "mutated"  # snapshots are copies
        assert server.requests[0]["json"] != "mutated"

        server.reset()
        assert server.count == 0 and server.requests == [] and server.max_in_flight == 0
        answer(server.url)
        assert server.requests[0]["n"] == 1


def test_log_requests_off_still_counts():
    with running_server(log_requests=False) as server:
        answer(server.url)
        assert server.count == 1 and server.requests == []


def test_http_control_endpoints_on_in_process_server():
    with running_server() as server:
        answer(server.url)
        status, stats = get_json(server.base_url + "/_stats")
        assert status == 200 and stats["count"] == 1 and stats["port"] == server.port
        status, config = post_json(server.base_url + "/_config", {"answer": "Q", "faults": [["status", 429]]})
        assert status == 200 and config["answer"] == "Q" and config["faults"] == [["status", 429, {}, None]]
        assert chat(server.url)[0] == 429
        assert answer(server.url) == "Q"
        status, body = post_json(server.base_url + "/_config", {"latncy": 1})
        assert status == 400 and "latncy" in body["error"]["message"]
        status, body = get_json(server.base_url + "/_requests")
        assert len(body["requests"]) == 3
        assert post_json(server.base_url + "/_reset", {})[1]["count"] == 0
        assert server.count == 0


# --------------------------------------------------------------------------------------------------------------
# stopping mid-run
# --------------------------------------------------------------------------------------------------------------


def test_stop_drops_in_flight_requests_and_refuses_new_ones():
    server = ChatServer(latency=30).start()
    url = server.url
    errors = []

    def in_flight_request():
        try:
            chat(url, timeout=20)
        except Exception as exc:  # noqa: BLE001 - the expected outcome, whatever the client raises
            errors.append(exc)

    threads = [threading.Thread(target=in_flight_request) for _ in range(3)]
    for t in threads:
        t.start()
    server.wait_for_requests(3)
    server.stop()
    for t in threads:
        t.join(20)
    assert len(errors) == 3 and all(isinstance(e, ConnectionError) for e in errors), errors
    assert server.stopped
    assert_refused(url)
    assert server.count == 3  # observations survive the stop
    server.stop()  # idempotent


def test_handlers_of_requests_the_client_dropped_end_with_the_server():
    """Clients that hang up while their requests are being served, then the stop at once (a test ending right
    after its run): each handler ends, none is left pending with the loop (one warning per task at exit)."""
    server = ChatServer(latency=30).start()
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    clients = []
    for _ in range(2):
        client = socket.create_connection(("127.0.0.1", server.port))
        client.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        clients.append(client)
    server.wait_for_requests(2)
    for client in clients:
        client.close()
    server.stop()
    assert server.stats()["in_flight"] == 0


def test_stop_after_goes_down_like_a_crash():
    with running_server(stop_after=2) as server:
        assert answer(server.url) == "A"
        assert answer(server.url) == "A"
        with pytest.raises(ConnectionError):
            chat(server.url)
        assert_refused(server.url)  # refused as soon as the client saw the disconnect
        server.wait_stopped()
        assert server.count == 3
        assert server.requests[2]["fault"] == "stopped"


def test_stop_from_http_control_endpoint():
    with running_server() as server:
        assert post_json(server.base_url + "/_stop", {}) == (200, {"stopping": True})
        server.wait_stopped()
        assert server.stopped
        assert_refused(server.url)


# --------------------------------------------------------------------------------------------------------------
# subprocess mode
# --------------------------------------------------------------------------------------------------------------


def test_subprocess_server_counts_configures_and_stops():
    with start_subprocess_server(answer="S", latency=0.01, faults=[("status", 500)], rules={"rule": "R"}) as server:
        assert server.url == f"http://127.0.0.1:{server.port}/v1"
        assert chat(server.url)[0] == 500
        assert answer(server.url) == "S"
        assert answer(server.url, "a rule") == "R"
        stats = server.stats()
        assert stats["count"] == 3 and stats["answered"] == 2 and stats["by_status"] == {"500": 1, "200": 2}
        assert server.count == 3

        server.configure(answer="T", latency=0)
        server.add_faults(("status", 429, {"Retry-After": "1"}))
        status, headers, _ = chat(server.url)
        assert status == 429 and headers["Retry-After"] == "1"
        assert answer(server.url) == "T"
        server.set_answer({"x": "X"})
        assert answer(server.url, "x") == "X"

        log = server.requests
        assert [r["n"] for r in log] == list(range(1, 7))
        assert log[0]["json"]["model"] == "test-model"

        server.reset()
        assert server.count == 0

        # Concurrency is visible across processes too.
        server.configure(latency=0.05)
        assert len(asyncio.run(_load(server.url, n=64, concurrency=32))) == 64
        assert server.max_in_flight >= 16
        url = server.url
    assert server.process.returncode == 0  # SIGTERM is a clean shutdown
    assert_refused(url)
    assert server.stop() == 0  # idempotent


def test_subprocess_server_with_script_and_api_key():
    with start_subprocess_server(script="json:dumps", api_key="k") as server:
        assert chat(server.url)[0] == 401
        # json.dumps(request_json) as the answer: the script received the request body.
        text = answer(server.url, "hi", headers={"Authorization": "Bearer k"})
        assert json.loads(text)["messages"][0]["content"] == "hi"
        assert [r["had_auth"] for r in server.requests] == [False, True]


def test_subprocess_stop_after_exits_the_process():
    with start_subprocess_server(stop_after=1) as server:
        assert answer(server.url) == "A"
        with pytest.raises(ConnectionError):
            chat(server.url)
        assert server.process.wait(10) == 0
        assert_refused(server.url)


def test_subprocess_exits_when_its_parent_goes_away():
    with start_subprocess_server() as server:
        server.process.stdin.close()  # what the OS does when the test process dies
        assert server.process.wait(10) == 0


def test_subprocess_rejects_bad_configuration():
    with pytest.raises(ValueError):
        start_subprocess_server(faults=[("explode",)])
    with pytest.raises(TypeError, match="import path"):
        start_subprocess_server(script=lambda request_json: "x")
    with pytest.raises(RuntimeError, match="no_such_module"):
        start_subprocess_server(script="no_such_module:f")


@pytest.mark.e2e
def test_command_line_with_port_file(tmp_path):
    port_file = tmp_path / "port"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    command = [
        sys.executable, "-m", "pytest_medhelm.testing.server",
        "--port", "0", "--answer", "A", "--latency", "0.01", "--port-file", str(port_file),
        "--faults", json.dumps([["status", 429, {"Retry-After": "1"}], ["malformed"]]),
        "--rules", json.dumps({"cat": "C"}),
    ]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 15
        while not (port_file.exists() and port_file.read_text().strip()):
            assert process.poll() is None, process.stderr.read().decode()
            assert time.monotonic() < deadline, "no port file"
            time.sleep(0.01)
        base = f"http://127.0.0.1:{int(port_file.read_text())}"
        assert chat(base + "/v1")[0] == 429
        status, _, raw = chat(base + "/v1")
        assert status == 200
        with pytest.raises(ValueError):
            json.loads(raw)
        assert answer(base + "/v1", "a cat") == "C"
        assert answer(base + "/v1", "a dog") == "A"
        assert get_json(base + "/_stats")[1]["count"] == 4
        assert post_json(base + "/_config", {"answer": "B"})[0] == 200
        assert answer(base + "/v1", "a dog") == "B"
        assert post_json(base + "/_stop", {})[0] == 200
        assert process.wait(10) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stderr.close()


def test_command_line_rejects_bad_json():
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    result = subprocess.run(
        [sys.executable, "-m", "pytest_medhelm.testing.server", "--faults", "[not json"],
        env=env, capture_output=True, text=True, timeout=30, check=False,
    )
    assert result.returncode == 2
    assert "not valid JSON" in result.stderr
