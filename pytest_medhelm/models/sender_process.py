"""The child process of :class:`~pytest_medhelm.models.background.ProcessSender`.

    python -m pytest_medhelm.models.sender_process '<json config>'

Reads jobs as JSON lines on stdin (``{"spec": ..., "request": ..., "urgent": false}``; urgent: an item waits for
it now; ``{"end": true}`` when no more will come;
``{"drain": true}`` when the run stopped early: what is queued is dropped, what is in flight is finished),
sends them with the same :class:`~pytest_medhelm.models.scheduler.Scheduler` (retries, rate limits, outages),
writes every answer to the shared cache, and reports each result as one JSON line on stdout; a last line carries
the scheduler's statistics. An end of stdin before ``{"end": true}`` means the parent is gone or gave up: what is
in flight is cancelled and the process exits (answers already stored stay stored).
"""

from __future__ import annotations

import asyncio
import os
import json
import sys
from typing import Any


async def _serve(config: dict[str, Any]) -> None:
    from pytest_medhelm.models.background import SHARED_CACHE_ENV, job_from_json
    from pytest_medhelm.models.cache import AnswerCache
    from pytest_medhelm.values import ModelError
    from pytest_medhelm.models.scheduler import Scheduler, Settings

    cache = AnswerCache(config["cache_dir"], mode=config["cache_mode"], run_id=config["run_id"],
                        shared_url=os.environ.get(SHARED_CACHE_ENV))  # every answer to both tiers, as the parent
    scheduler = Scheduler(cache, Settings(concurrency=config["concurrency"], timeout=config["timeout"],
                                          retries=config["retries"]))
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=2**30)  # a job line holds a whole prompt (a clinical note, an EHR)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    queue: asyncio.Queue = asyncio.Queue()
    out = sys.stdout.buffer

    def report(message: dict[str, Any]) -> None:
        out.write(json.dumps(message).encode("utf-8") + b"\n")
        out.flush()

    def on_done(job, result) -> None:
        if isinstance(result, ModelError):
            report({"key": job.key, "error": result.to_json()})
        else:
            report({"key": job.key, "completion": result.to_cache()})

    async def read_jobs() -> None:
        while True:
            line = await reader.readline()
            if not line:  # the parent closed our stdin before saying "end": stop everything
                serving.cancel()
                return
            message = json.loads(line)
            if message.get("end"):
                queue.put_nowait(None)
                return
            if message.get("drain"):  # the run stopped early: finish what is in flight, start nothing new
                while not queue.empty():
                    queue.get_nowait()
                scheduler.drain()
                queue.put_nowait(None)
                return
            queue.put_nowait(job_from_json(message))

    serving = asyncio.ensure_future(scheduler.serve(queue, on_done))
    reading = asyncio.ensure_future(read_jobs())
    try:
        await serving
    except asyncio.CancelledError:
        pass
    finally:
        reading.cancel()
        cache.close()
    report({"broken": scheduler.broken, "summary": scheduler.summary()})


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    config = json.loads(argv[0])
    from pytest_medhelm.models.parent_death import die_with_parent

    die_with_parent(config["parent_pid"])  # SIGTERM when pytest ends, however it ends; exits now if it already has
    try:
        asyncio.run(_serve(config))
    except KeyboardInterrupt:  # Ctrl-C reaches the whole process group: the parent handles it
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
