"""A shared answer cache on Redis, behind the local one (``--medhelm-cache-url redis://host:port/db``).

Runners of a CI matrix, a retried job and the processes of one run share answers and judgements through it: the
same keys (the sha256 of the request) and the same JSON values as the local cache (:mod:`.cache_disk`), under the
prefix ``medhelm:answer:``. Reading falls back to it after a local miss; every new answer is written to both.

What comes back from Redis is untrusted (anyone who can write to that Redis can put anything there): it is read
as JSON text only (never unpickled) and checked by :func:`~pytest_medhelm.models.cache.valid_entry` before use.

A Redis that cannot be reached never stops a run: the first failure in a process switches the shared tier off for
that process (the run goes on with its local cache, nothing waits on a dead server twice), and the run says so once
(:func:`probe` at start-up, :attr:`SharedCache.failure` afterwards). The ``redis`` client is imported only here.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

#: every key of ours in the Redis database starts with this: the database may be shared with other tools
KEY_PREFIX = "medhelm:answer:"
#: seconds to connect and for one command: a shared cache must never be what a run waits on
SOCKET_TIMEOUT = 2.0
#: the largest value read back (an answer's entry is a few kilobytes; a planted 1 GB string is not read)
MAX_VALUE_BYTES = 32 * 1024 * 1024
SCHEMES = ("redis", "rediss", "unix")


def url_problem(url: str) -> str | None:
    """Why ``url`` is not a Redis URL (the usage error's text), or None."""
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES:
        return (f"{redacted(url)!r}: expected redis://HOST:PORT/DB (or rediss://, unix://), "
                "e.g. redis://localhost:6379/0")
    if parts.scheme != "unix" and not parts.hostname:
        return f"{redacted(url)!r}: no host; expected redis://HOST:PORT/DB"
    try:
        _ = parts.port  # (parsed on access)
    except ValueError:
        return f"{redacted(url)!r}: the port is not a number"
    db = parts.path.strip("/")
    if parts.scheme != "unix" and db and not db.isdigit():
        return f"{redacted(url)!r}: the database {db!r} is not a number (redis://HOST:PORT/0)"
    return None


def redacted(url: str) -> str:
    """``url`` without its password (for messages, start-up lines and reports)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]  # host and port as written (the port may be what is wrong)
    return urlunsplit((parts.scheme, f"{user}:***@{host}", parts.path, parts.query, parts.fragment))


class SharedCache:
    def __init__(self, url: str) -> None:
        self.url = url
        self._client: Any = None
        #: why the shared tier was switched off in this process (None while it works)
        self.failure: str | None = None
        #: entries read from / written to Redis by this process
        self.hits = 0
        self.writes = 0

    def _connect(self) -> Any:
        if self._client is None:
            import redis

            self._client = redis.Redis.from_url(self.url, socket_timeout=SOCKET_TIMEOUT,
                                                socket_connect_timeout=SOCKET_TIMEOUT, retry_on_timeout=False)
        return self._client

    def _fail(self, exc: BaseException) -> None:
        self.failure = f"{type(exc).__name__}: {exc}"
        self.close()

    def get_many(self, keys: list[str]) -> dict[str, Any]:
        """The JSON values stored for ``keys``, in one round trip per
        :data:`~pytest_medhelm.models.cache_disk.READ_MANY_CHUNK` keys (a pipeline); absent keys are left out, and
        so are values that are too large or not JSON text. A failure switches the tier off: what was read before it
        is kept (an error reply for one key, the others of its chunk too). With the tier off, nothing is read."""
        from pytest_medhelm.models.cache_disk import READ_MANY_CHUNK

        found: dict[str, Any] = {}
        for start in range(0, len(keys), READ_MANY_CHUNK):
            if self.failure is not None:
                break
            chunk = keys[start:start + READ_MANY_CHUNK]
            try:
                pipeline = self._connect().pipeline(transaction=False)
                for key in chunk:
                    # at most one byte past the cap comes over the wire: a planted 1 GB string is never read whole
                    # (a missing key reads as b"")
                    pipeline.getrange(KEY_PREFIX + key, 0, MAX_VALUE_BYTES)
                # an error reply (a key holding a list, say) comes back in its place: the others are still read
                replies = pipeline.execute(raise_on_error=False)
            except Exception as exc:  # noqa: BLE001 - redis's ConnectionError, TimeoutError...
                self._fail(exc)
                break
            for key, raw in zip(chunk, replies):
                value = self._decoded(raw)
                if value is not None:
                    found[key] = value
            refused = next((reply for reply in replies if isinstance(reply, Exception)), None)
            if refused is not None:  # the tier goes off, as after a failed round trip
                self._fail(refused)
        return found

    def _decoded(self, raw: Any) -> Any:
        """The JSON value of what Redis returned for one key, or None (absent, too large, not JSON text)."""
        from pytest_medhelm.models.cache_disk import ForeignEntry, from_json_text

        if not isinstance(raw, bytes) or not raw or len(raw) > MAX_VALUE_BYTES:
            return None
        try:
            value = from_json_text(raw.decode("utf-8"))
        except (UnicodeDecodeError, ForeignEntry):
            return None
        self.hits += 1
        return value

    def put(self, key: str, entry: Any) -> None:
        if self.failure is not None:
            return
        from pytest_medhelm.models.cache_disk import to_json_text

        try:
            self._connect().set(KEY_PREFIX + key, to_json_text(entry).encode("utf-8"))
            self.writes += 1
        except Exception as exc:  # noqa: BLE001 - the answer is in the local cache; the shared copy is a bonus
            self._fail(exc)

    def ping(self) -> None:
        """Raise when the server cannot be reached (or refuses us)."""
        self._connect().ping()

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                client.close()
            except Exception:  # noqa: BLE001 - closing a broken connection
                pass


def probe(url: str) -> str | None:
    """At start-up: None when the shared cache answers, else the line that says the run goes on without it."""
    shared = SharedCache(url)
    try:
        shared.ping()
    except ImportError:
        return (f"medhelm: the shared cache {redacted(url)} needs the redis client (pip install "
                "'pytest-medhelm[redis]'): this run uses the local cache only")
    except Exception as exc:  # noqa: BLE001 - whatever the client raises
        return (f"medhelm: the shared cache {redacted(url)} cannot be reached ({type(exc).__name__}: {exc}): this "
                "run uses the local cache only")
    finally:
        shared.close()
    return None
