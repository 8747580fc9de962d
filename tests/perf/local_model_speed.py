"""Speed of the embedded default model: llama.cpp server start-up and tokens/second of ``local/smollm2``.

    python tests/perf/local_model_speed.py [--model local/smollm2] [--tokens 64] [--threads N] [--runs 3]

Prints the server's start-up time, then for each run the prompt/completion tokens, the wall time of a
non-streamed chat completion, and (streamed) the time to first token and the decode rate. Loopback only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from llama_processes import find_llama_processes

from pytest_medhelm.endpoints.llama.gguf import resolve_gguf, served_model_name
from pytest_medhelm.endpoints.llama.server import LlamaServer

PROMPT = (
    "Write a detailed paragraph explaining to a patient how high blood pressure damages the heart, "
    "the kidneys and the brain, and what they can do about it."
)


def _open(request: urllib.request.Request | str, timeout: float = 300):
    return urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=timeout)


def _request(url: str, payload: dict) -> urllib.request.Request:
    return urllib.request.Request(url, json.dumps(payload).encode(), {"Content-Type": "application/json"})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="local/smollm2")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    gguf = resolve_gguf(args.model)
    log = Path(tempfile.mkdtemp(prefix="medhelm-llama-")) / "llama.log"
    server = LlamaServer(
        gguf, log, n_ctx=args.n_ctx, n_threads=args.threads, model_alias=served_model_name(args.model)
    )
    print(f"model: {gguf} ({gguf.stat().st_size / 2**20:.0f} MiB), cpus: {os.cpu_count()}, "
          f"threads: {server.n_threads}, n_ctx: {server.n_ctx}")  # fmt: skip
    with server:
        print(f"server start-up: {server.startup_seconds:.2f} s  ({server.base_url}, log {log})")
        url = server.base_url + "/chat/completions"
        base = {
            "model": server.model_name,
            "messages": [{"role": "user", "content": PROMPT}],
            "temperature": 0,
            "max_tokens": args.tokens,
        }
        walls, rates, decode_rates = [], [], []
        for run in range(args.runs):
            began = time.perf_counter()
            with _open(_request(url, base)) as response:
                answer = json.loads(response.read())
            wall = time.perf_counter() - began
            usage = answer["usage"]
            rate = usage["completion_tokens"] / wall
            walls.append(wall)
            rates.append(rate)

            # streamed: time to first token, then the decode rate alone
            began = time.perf_counter()
            first = None
            chunks = 0
            with _open(_request(url, {**base, "stream": True})) as response:
                for raw in response:
                    line = raw.decode().strip()
                    if not line.startswith("data:") or line == "data: [DONE]":
                        continue
                    delta = json.loads(line[5:])["choices"][0].get("delta", {})
                    if delta.get("content"):
                        chunks += 1
                        if first is None:
                            first = time.perf_counter()
            end = time.perf_counter()
            ttft = (first or end) - began
            decode = (chunks - 1) / (end - first) if first and chunks > 1 and end > first else float("nan")
            decode_rates.append(decode)
            print(f"run {run + 1}: prompt {usage['prompt_tokens']} tok, completion {usage['completion_tokens']} tok "
                  f"in {wall:.2f} s = {rate:.1f} tok/s end-to-end; streamed: first token after {ttft:.2f} s, "
                  f"decode {decode:.1f} tok/s")  # fmt: skip
        print(
            f"median: {statistics.median(walls):.2f} s per {args.tokens}-token answer, "
            f"{statistics.median(rates):.1f} tok/s end-to-end, {statistics.median(decode_rates):.1f} tok/s decode"
        )
        print(f"answer: {answer['choices'][0]['message']['content']!r}")
    pid = server.pid
    left = pid in find_llama_processes(gguf)
    print(f"server {pid} still running after stop: {left}")
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
