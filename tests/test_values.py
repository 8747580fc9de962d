"""values.py: the value types every layer shares (instances, requests, answers, failures), and text made safe."""

from __future__ import annotations

from pytest_medhelm.values import Loaded


def test_redact_url() -> None:
    from pytest_medhelm.values import ModelSpec, redact_url

    assert redact_url("http://u:p@h:1/v1") == "http://***@h:1/v1"
    assert redact_url("redis://:pw@cache:6379/0 and https://tok@x.org/a?b=c@d") == \
        "redis://***@cache:6379/0 and https://***@x.org/a?b=c@d"
    assert redact_url("http://h/v1") == "http://h/v1" and redact_url(None) is None
    # credentials in a query string: their values go, the other parameters stay
    assert redact_url("https://g.example/v1beta/m:generate?key=AIzaSyA-1_x&alt=sse") == \
        "https://g.example/v1beta/m:generate?key=***&alt=sse"
    assert redact_url("https://a.example/o?api-version=2024-06-01&sig=Ab%2Bc&sp=r&SharedAccessSignature=xyz") == \
        "https://a.example/o?api-version=2024-06-01&sig=***&sp=r&SharedAccessSignature=***"
    assert redact_url("redis://cache:6379/0?password=pw1&db=2 and GET /v1?access_token=t0k 400") == \
        "redis://cache:6379/0?password=***&db=2 and GET /v1?access_token=*** 400"
    assert redact_url("a=b, x == y, https://h/v1?model=k") == "a=b, x == y, https://h/v1?model=k"
    assert redact_url("https://h/v1?max_tokens=512&tokenizer=llama&author=me&design=x") == \
        "https://h/v1?max_tokens=512&tokenizer=llama&author=me&design=x"  # (names that only contain a word)
    assert redact_url("https://a.example/v1?key=K1,https://b.example/v1") == \
        "https://a.example/v1?key=***,https://b.example/v1"  # (a replica group keeps its other replicas)
    assert redact_url("https://h/cb#access_token=tok&state=s") == "https://h/cb#access_token=***&state=s"
    spec = ModelSpec("openai/x", "openai/x", "http://u:p@h/v1")
    assert spec.cache_identity == "openai/x@http://***@h/v1"


def test_redacting_a_huge_hostile_message_takes_linear_time() -> None:
    # what a provider may send back as its error message: shapes that made earlier patterns backtrack
    import time

    from pytest_medhelm.values import redact_url

    for text in ("=?" + "key" * 70_000, "@ " + "a." * 100_000, "x=1 ?" + "aZ0_-" * 40_000):
        started = time.perf_counter()
        redact_url(text)
        assert time.perf_counter() - started < 2.0, text[:20]  # (quadratic: minutes; linear: milliseconds)


def test_printable_escapes_what_a_terminal_would_act_on_and_keeps_the_rest():
    from pytest_medhelm.values import printable

    assert printable("plain text, ünïcode, 引用") == "plain text, ünïcode, 引用"
    assert printable("a\x1b[2Jb\x07\x9b\u202ec") == "a\\x1b[2Jb\\x07\\x9b\\u202ec"
    # a miss's detail keeps its line breaks, and only those
    assert printable("a\nb\r\x1b", keep_breaks=True) == "a\nb\\r\\x1b"


def test_loaded_counts_what_filters_removed() -> None:
    loaded = Loaded(slug="x")
    loaded.note_removed("a reason", 0)
    assert loaded.removed == {}
    loaded.note_removed("a reason")
    loaded.note_removed("a reason", 2)
    assert loaded.removed == {"a reason": 3}
    assert loaded.counts({"short": "a reason", "other": "never"}) == {"short": 3, "other": 0}
    assert loaded.done() is loaded and loaded == []
