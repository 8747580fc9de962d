"""A shared answer cache on Redis, behind the local one (``--medhelm-cache-url redis://host:port/db``).

Runners of a CI matrix, a retried job and the processes of one run share answers and judgements through it: the
same keys (the sha256 of the request) and the same JSON values as the local cache (:mod:`.cache_disk`), under the
prefix ``medhelm:answer:``. Reading falls back to it after a local miss; every new answer is written to both.

What comes back from Redis is untrusted (anyone who can write to that Redis can put anything there): it is read
as JSON text only (never unpickled) and checked by :func:`~pytest_medhelm.cache.store.valid_entry` before use.

A Redis that cannot be reached never stops a run: the first failure in a process switches the shared tier off for
that process (the run goes on with its local cache, nothing waits on a dead server twice), and the run says so once
(:func:`probe` at start-up, :attr:`SharedCache.failure` afterwards). The ``redis`` client is imported only here.

Its bounds (issue 30, item 3): a value is read only up to :data:`MAX_VALUE_BYTES`, and one round trip reads at most
:data:`MAX_ROUND_TRIP_BYTES` in all (the lengths are asked first, ``STRLEN``; what does not fit is a miss, asked
again); every operation, connecting included, has a deadline of :data:`OPERATION_DEADLINE` seconds in all, not only
per socket read (a server that sends a byte every second and a half never trips a read timeout): past it the
connection is cut and the tier goes off; a key of ours that holds another Redis type (``WRONGTYPE``) is a miss for
that key, counted and said, not a failure of the tier.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from typing import Any
from urllib.parse import urlsplit, urlunsplit

#: every key of ours in the Redis database starts with this: the database may be shared with other tools
KEY_PREFIX = "medhelm:answer:"
#: seconds to connect and for one command: a shared cache must never be what a run waits on
SOCKET_TIMEOUT = 2.0
#: the largest value read back (an answer's entry is a few kilobytes; a planted 1 GB string is not read)
MAX_VALUE_BYTES = 32 * 1024 * 1024
#: the most bytes of values one round trip reads (up to 500 keys of :data:`READ_MANY_CHUNK`): twelve planted 32 MB
#: values cannot take a run to 400 MB at once; the values past it are misses
MAX_ROUND_TRIP_BYTES = 64 * 1024 * 1024
#: seconds one operation (a round trip, connecting included) may take in all, whatever the server drips
OPERATION_DEADLINE = 10.0
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


class ClientMissing(Exception):
    """``--medhelm-cache-url`` without the ``redis`` client installed: a usage error (the message says what to
    install), never a run that silently uses its local cache only."""


class DeadlineExceeded(Exception):
    """An operation took longer than :data:`OPERATION_DEADLINE` in all."""


class SharedCache:
    def __init__(self, url: str) -> None:
        self.url = url
        self._client: Any = None
        #: why the shared tier was switched off in this process, as the run says it ("stopped answering (...)",
        #: "did not answer within 10 s ...", "answered with an error (...)"); None while it works
        self.failure: str | None = None
        #: entries read from / written to Redis by this process
        self.hits = 0
        self.writes = 0
        #: keys of ours holding another Redis type (WRONGTYPE), and values left unread for the round trip's bound
        self.wrong_type = 0
        self.over_budget = 0

    def _connect(self) -> Any:
        if self._client is None:
            try:
                import redis
                from redis.backoff import NoBackoff
                from redis.retry import Retry
            except ImportError as exc:
                raise ClientMissing(f"--medhelm-cache-url {redacted(self.url)} needs the redis client ({exc}): "
                                    "pip install 'pytest-medhelm[redis]', or leave the option out") from None
            # no retries: a failure switches the tier off, and a cut connection must not be opened again behind
            # the deadline's back
            self._client = redis.Redis.from_url(self.url, socket_timeout=SOCKET_TIMEOUT,
                                                socket_connect_timeout=SOCKET_TIMEOUT, retry_on_timeout=False,
                                                retry=Retry(NoBackoff(), 0))
        return self._client

    def _within_deadline(self, operation: Callable[[Any], Any]) -> Any:
        """``operation(client)`` on a thread of its own, waited for at most :data:`OPERATION_DEADLINE` seconds;
        past that the connections are cut (which ends the thread's read) and :class:`DeadlineExceeded` raised."""
        client = self._connect()
        outcome: dict[str, Any] = {}

        def work() -> None:
            try:
                outcome["value"] = operation(client)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller as is
                outcome["error"] = exc

        thread = threading.Thread(target=work, name="medhelm-shared-cache", daemon=True)
        thread.start()
        thread.join(OPERATION_DEADLINE)
        if thread.is_alive():
            try:
                client.connection_pool.disconnect()
            except Exception:  # noqa: BLE001 - cutting a connection that misbehaves
                pass
            raise DeadlineExceeded(f"did not answer within {OPERATION_DEADLINE:g} s")
        if "error" in outcome:
            raise outcome["error"]
        return outcome.get("value")

    def _fail(self, exc: BaseException) -> None:
        from redis.exceptions import ResponseError

        if isinstance(exc, DeadlineExceeded):
            self.failure = f"{exc} during the run (the deadline of one operation, connecting included)"
        elif isinstance(exc, ResponseError):
            self.failure = f"answered with an error during the run ({type(exc).__name__}: {exc})"
        else:
            self.failure = f"stopped answering during the run ({type(exc).__name__}: {exc})"
        self.close()

    def notes(self) -> list[str]:
        """What the run says about this process's reads besides a failure (keys of another type, values left
        unread for the round trip's bound)."""
        return notes(self.url, self.wrong_type, self.over_budget)

    def state(self) -> dict[str, Any]:
        """What this process saw of the tier (an xdist worker hands it to the controller)."""
        return {"failure": self.failure, "hits": self.hits, "writes": self.writes, "wrong_type": self.wrong_type,
                "over_budget": self.over_budget}

    def get_many(self, keys: list[str]) -> dict[str, Any]:
        """The JSON values stored for ``keys``, in two round trips per
        :data:`~pytest_medhelm.cache.disk.READ_MANY_CHUNK` keys (pipelines: the lengths, then the values that
        fit :data:`MAX_ROUND_TRIP_BYTES`); absent keys are left out, and so are values that are too large, over the
        round trip's bound, of another Redis type or not JSON text. A failure switches the tier off: what was read
        before it is kept. With the tier off, nothing is read."""
        from pytest_medhelm.cache.disk import READ_MANY_CHUNK

        found: dict[str, Any] = {}
        for start in range(0, len(keys), READ_MANY_CHUNK):
            if self.failure is not None:
                break
            chunk = keys[start:start + READ_MANY_CHUNK]
            try:
                lengths = self._within_deadline(partial(_pipelined, commands=[
                    ("strlen", KEY_PREFIX + key) for key in chunk]))
                wanted = self._budgeted(chunk, lengths)
                # at most the length said: a value that grew since reads truncated (not JSON: a miss)
                replies = self._within_deadline(partial(_pipelined, commands=[
                    ("getrange", KEY_PREFIX + key, 0, size - 1) for key, size in wanted])) if wanted else []
            except Exception as exc:  # noqa: BLE001 - redis's ConnectionError, TimeoutError, an error reply...
                self._fail(exc)
                break
            for (key, _size), raw in zip(wanted, replies):
                value = self._decoded(raw)
                if value is not None:
                    found[key] = value
        return found

    def _budgeted(self, chunk: list[str], lengths: list[Any]) -> list[tuple[str, int]]:
        """The keys of ``chunk`` to read, with their lengths (``STRLEN``'s replies): present, at most
        :data:`MAX_VALUE_BYTES` each and :data:`MAX_ROUND_TRIP_BYTES` together. A key holding another type is a
        miss (counted); any other error reply raises it (the tier goes off)."""
        from redis.exceptions import ResponseError

        budget = MAX_ROUND_TRIP_BYTES
        wanted = []
        for key, size in zip(chunk, lengths):
            if isinstance(size, ResponseError) and str(size).startswith("WRONGTYPE"):
                self.wrong_type += 1
                continue
            if isinstance(size, BaseException):
                raise size
            if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
                continue  # absent (0), or a reply that is no length
            if size > MAX_VALUE_BYTES or size > budget:
                self.over_budget += 1
                continue
            budget -= size
            wanted.append((key, size))
        return wanted

    def _decoded(self, raw: Any) -> Any:
        """The JSON value of what Redis returned for one key, or None (absent, too large, not JSON text)."""
        from pytest_medhelm.cache.disk import ForeignEntry, from_json_text

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
        from pytest_medhelm.cache.disk import to_json_text

        value = to_json_text(entry).encode("utf-8")
        try:
            self._within_deadline(lambda client: client.set(KEY_PREFIX + key, value))
            self.writes += 1
        except Exception as exc:  # noqa: BLE001 - the answer is in the local cache; the shared copy is a bonus
            self._fail(exc)

    def ping(self) -> None:
        """Raise when the server cannot be reached (or refuses us), or does not answer within the deadline;
        :class:`ClientMissing` without the redis client."""
        self._within_deadline(lambda client: client.ping())

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                client.close()
            except Exception:  # noqa: BLE001 - closing a broken connection
                pass


def notes(url: str, wrong_type: int, over_budget: int) -> list[str]:
    """The summary's lines on keys of another type and values left unread for the round trip's bound."""
    lines = []
    if wrong_type:
        lines.append(f"medhelm: the shared cache {redacted(url)}: {wrong_type} key(s) under {KEY_PREFIX} hold "
                     "another Redis type than a string (WRONGTYPE): read as misses and asked again; something else "
                     "writes there")
    if over_budget:
        lines.append(f"medhelm: the shared cache {redacted(url)}: {over_budget} value(s) left unread (more than "
                     f"{MAX_ROUND_TRIP_BYTES // 2**20} MB in one round trip, or more than "
                     f"{MAX_VALUE_BYTES // 2**20} MB each): read as misses and asked again")
    return lines


def _pipelined(client: Any, commands: list[tuple[Any, ...]]) -> list[Any]:
    """The replies to ``commands`` (a command's name and arguments) in one round trip; an error reply (a key
    holding a list, say) comes back in its command's place, the others are still read."""
    pipeline = client.pipeline(transaction=False)
    for name, *args in commands:
        getattr(pipeline, name)(*args)
    replies: list[Any] = pipeline.execute(raise_on_error=False)
    return replies


def probe(url: str) -> str | None:
    """At start-up: None when the shared cache answers, else the line that says the run goes on without it.
    Raises :class:`ClientMissing` without the redis client (a usage error)."""
    shared = SharedCache(url)
    try:
        shared.ping()
    except ClientMissing:
        raise
    except DeadlineExceeded as exc:
        return (f"medhelm: the shared cache {redacted(url)} {exc} (the deadline of one operation, connecting "
                "included): this run uses the local cache only")
    except Exception as exc:  # noqa: BLE001 - whatever the client raises
        return (f"medhelm: the shared cache {redacted(url)} cannot be reached ({type(exc).__name__}: {exc}): this "
                "run uses the local cache only")
    finally:
        shared.close()
    return None
