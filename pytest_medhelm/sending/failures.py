"""What a failed request means and says: which failures are systematic (every request of the model fails alike),
and the message the run shows, with every credential we know of removed."""

from __future__ import annotations

import os
import re

from pytest_medhelm.endpoints.wire import api_key_for
from pytest_medhelm.sending.transport import RequestFailed
from pytest_medhelm.values import ModelError, ModelSpec, printable, redact_url

#: statuses that mean every request to this model will fail the same way
SYSTEMATIC_STATUSES = (401, 403, 404)
RATE_LIMITED = 429
#: what the message of a request to an endpoint marked down says (also in the text of a stored error) when the
#: endpoint never answered in this run; one that answered before and then went down "stopped answering": its
#: answers so far count, and its items error one by one
UNREACHABLE = " is unreachable or not answering: "
STOPPED_ANSWERING = " stopped answering: "


def systematic_failure(error: ModelError) -> bool:
    """Whether ``error`` fails every request of its model alike: a 401, 403 or 404, or an endpoint that never
    answered in this run. The run stops asking (and repeating the message) once every model under test is so."""
    return error.status in SYSTEMATIC_STATUSES or error.systematic


def is_connection_failure(exc: RequestFailed) -> bool:
    """No HTTP status: the connection was refused, reset or dropped, or no answer came within the timeout."""
    return exc.status is None


def is_charged(exc: RequestFailed) -> bool:
    """A 2xx whose body was no chat completion: the provider answered, and may have charged for it."""
    return exc.status is not None and 200 <= exc.status < 300


#: environment variables whose values are credentials: never repeated in an error message
_SECRET_NAME = re.compile(r"(API_KEY|_KEY|_TOKEN|_SECRET|PASSWORD)$", re.IGNORECASE)
_PLACEHOLDER_KEYS = frozenset({"sk-no-key"})


def redact(text: str, spec: ModelSpec | None = None) -> str:
    """``text`` with every credential we know of replaced by ``***``: the key sent to ``spec`` and the value of any
    ``*_API_KEY`` / ``*_TOKEN`` / ``*_SECRET`` environment variable. A provider may echo the key it was given in
    its error message, and that message goes to the terminal, the cache's error entries and the reports."""
    secrets = {value for name, value in os.environ.items() if _SECRET_NAME.search(name) and len(value) >= 8}
    if spec is not None:
        key = api_key_for(spec)
        if key and key not in _PLACEHOLDER_KEYS:
            secrets.add(key)
    for secret in sorted(secrets, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, "***")
    # (and the credentials of any URL: http://user:pass@host; a server's control characters escaped: printable)
    return printable(redact_url(text) or text)


_BARE_TIMEOUT = re.compile(r"[\w.]*Timeout\w*:?")


def described(exc: RequestFailed, timeout: float) -> str:
    """The failure's message; an aiohttp timeout that says nothing but its class name gets a useful one (the
    transport's ``except (ClientError, OSError)`` catches ``TimeoutError``, an ``OSError``, before its own
    timeout branch can)."""
    message = (exc.message or "").strip()
    if exc.status is None and _BARE_TIMEOUT.fullmatch(message):
        return f"no answer within {timeout:g} s (--medhelm-timeout)"
    return message or (f"HTTP {exc.status}" if exc.status else "request failed without a message")
