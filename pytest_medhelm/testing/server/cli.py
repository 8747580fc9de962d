"""The test server from a shell: ``python -m pytest_medhelm.testing.server --port 0 --answer A --latency 0.1
--port-file PATH`` (what :func:`~.subprocess_server.start_subprocess_server` runs)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

from pytest_medhelm.testing.server.app import HOST, ServerCore
from pytest_medhelm.testing.server.behaviour import DEFAULT_ANSWER, validate
from pytest_medhelm.testing.server.protocol import REPLY_SHAPES
from pytest_medhelm.testing.server.reasoning import REASONING_SHAPES
from pytest_medhelm.testing.server.state import ServerState


def _write_port_file(path: str, port: int) -> None:
    # Write then rename, so that a reader polling the file never sees a partial number.
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(f"{port}\n")
    os.replace(tmp, path)


def _watch_stdin(loop: asyncio.AbstractEventLoop, core: ServerCore) -> None:
    # The parent holds our stdin pipe; EOF means it closed it or died, and an orphaned server must not linger.
    # os.read on the raw descriptor, not sys.stdin: a daemon thread blocked holding sys.stdin's lock would make
    # interpreter shutdown abort.
    try:
        while os.read(0, 4096):
            pass
    except OSError:
        pass
    with contextlib.suppress(RuntimeError):  # loop already closed
        loop.call_soon_threadsafe(core.request_shutdown)


def _json_arg(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc}") from None


def _parse_args(argv: Sequence[str] | None) -> tuple[argparse.Namespace, dict]:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_medhelm.testing.server",
        description="Scriptable OpenAI-compatible chat-completions test server (loopback only).",
    )
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: a free one)")
    parser.add_argument("--port-file", help="write the bound port here once listening")
    parser.add_argument("--watch-stdin", action="store_true", help="exit when stdin reaches EOF (parent gone)")
    parser.add_argument("--config", type=_json_arg, default={}, help="JSON object of options (flags override it)")
    parser.add_argument("--answer", help=f"constant answer (default {DEFAULT_ANSWER!r})")
    parser.add_argument("--latency", type=float, help="seconds before each answer")
    parser.add_argument("--rules", type=_json_arg, help='JSON {"substring": "answer", ...}')
    parser.add_argument("--faults", type=_json_arg, help='JSON [["status", 429, {"Retry-After": "1"}], ...]')
    parser.add_argument("--fail-matching", type=_json_arg, help='JSON {"substring": ["status", 500], ...}')
    parser.add_argument("--script", help="answer with package.module:function(request_json) -> str | None")
    parser.add_argument("--api-key", help="require this bearer token")
    parser.add_argument("--model", action="append", dest="models", help="a model id for /v1/models (repeatable)")
    parser.add_argument("--stop-after", type=int, help="serve N chat requests, then go down")
    parser.add_argument("--reply-shape", choices=REPLY_SHAPES, help="bend every answer (content parts, no usage, ...)")
    parser.add_argument("--reasoning-tokens", type=int, help="tokens of thinking each reply spends out of its limit")
    parser.add_argument("--reasoning-shape", choices=REASONING_SHAPES, help="where the thinking goes (default hidden)")
    parser.add_argument("--thinking-text", help="the thinking's text (default: 'hmm' per reasoning token)")
    args = parser.parse_args(argv)
    if not isinstance(args.config, dict):
        parser.error("--config must be a JSON object")
    config = dict(args.config)
    for key in ("answer", "latency", "rules", "faults", "fail_matching", "script", "api_key", "models",
                "stop_after", "reply_shape", "reasoning_tokens", "reasoning_shape", "thinking_text"):
        value = getattr(args, key)
        if value is not None:
            config[key] = value
    try:
        validate(config)
    except (ValueError, TypeError, ImportError, AttributeError) as exc:
        parser.error(str(exc))
    return args, config


async def _serve(args: argparse.Namespace, config: dict) -> None:
    core = ServerCore(ServerState(**config))
    port = await core.start(args.port)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):  # not on Windows
            loop.add_signal_handler(sig, core.request_shutdown)
    if args.watch_stdin:
        threading.Thread(target=_watch_stdin, args=(loop, core), daemon=True).start()
    if args.port_file:
        _write_port_file(args.port_file, port)
    print(f"pytest-medhelm test server listening on http://{HOST}:{port}/v1", file=sys.stderr, flush=True)
    await core.wait_stopped()


def main(argv: Sequence[str] | None = None) -> int:
    args, config = _parse_args(argv)
    asyncio.run(_serve(args, config))
    return 0
