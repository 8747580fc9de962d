"""What the sending did, counted as it goes (``Scheduler.stats``) and said in one line at the end of the run."""

from __future__ import annotations

from collections.abc import Mapping


def new_stats() -> dict[str, int | float]:
    return {
        "requests": 0,  # HTTP requests (or litellm calls) sent, retries included
        "answers": 0,  # requests that came back with an answer
        "retries": 0,  # tries after the first
        "rate_limited": 0,  # 429 responses
        "server_errors": 0,  # 5xx responses
        "connection_errors": 0,  # refused, reset, dropped, timed out (no HTTP status)
        "malformed": 0,  # a 2xx whose body is not a chat completion
        "failed": 0,  # requests given up on (their items are errors)
        "concurrency_min": 0,  # the lowest number of requests allowed in flight (0: never lowered)
        "waited_s": 0.0,  # total seconds spent in backoff and Retry-After pauses
        "not_sent_budget": 0,  # jobs the budget refused (never sent; their items are skipped)
        "failovers": 0,  # tries sent again at once to another replica of the model (its replica failed)
    }


def stats_line(stats: Mapping[str, int | float], concurrency: int, rested: Mapping[str, str]) -> str:
    """One line for the terminal: what retrying and rate limiting did, or "" when nothing happened. ``rested``:
    the replicas that rested, and why."""
    s = stats
    parts = []
    if s["retries"]:
        parts.append(f"{s['retries']} retr{'y' if s['retries'] == 1 else 'ies'}")
    if s["rate_limited"]:
        text = f"{s['rate_limited']} rate-limit response(s)"
        if s["concurrency_min"]:
            text += f" (concurrency lowered to {s['concurrency_min']} of {concurrency})"
        parts.append(text)
    if s["server_errors"]:
        parts.append(f"{s['server_errors']} server error(s)")
    if s["connection_errors"]:
        parts.append(f"{s['connection_errors']} connection failure(s) or timeout(s)")
    if s["malformed"]:
        parts.append(f"{s['malformed']} malformed response(s)")
    if s["failed"]:
        parts.append(f"{s['failed']} request(s) failed for good")
    if s.get("failovers"):
        why = ", ".join(f"{url} ({reason})" for url, reason in rested.items())
        parts.append(f"{s['failovers']} request(s) sent again to another replica (rested: {why})")
    if s.get("not_sent_budget"):
        parts.append(f"{s['not_sent_budget']} request(s) not sent (--medhelm-budget reached)")
    return ", ".join(parts)
