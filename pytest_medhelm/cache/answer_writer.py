"""The answers of one sending loop, stored off the loop and in batches.

A cache write is SQLite work and disk I/O: done on the loop it would hold every request behind it, and done one
answer per transaction by a thread it still costs about 0.2 ms of wall time each, serialized (a third of a 2,000
answer run's overhead over a bare aiohttp loop, measured). :class:`AnswerWriter` stores, on one thread, whatever
the loop queued while the previous batch was being written, in one transaction; each answer's sender waits on its
own future, resolved once its batch is committed, so that an answer is reported only once it is stored (a crash or
Ctrl-C after that loses nothing an item saw). A batch that fails is written again one entry at a time, so that one
answer that cannot be stored is that answer's error only.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from dataclasses import dataclass
from typing import Any

from pytest_medhelm.cache.store import AnswerCache, Stored
from pytest_medhelm.values import Completion, ModelError


@dataclass
class _Pending:
    stored: Stored
    done: asyncio.Future[Exception | None]


class AnswerWriter:
    def __init__(self, cache: AnswerCache, loop: asyncio.AbstractEventLoop) -> None:
        self.cache = cache
        self._loop = loop
        self._queue: queue.SimpleQueue[_Pending | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._write, name="medhelm-cache-writer", daemon=True)
        self._thread.start()

    def store(self, key: str, result: Completion | ModelError,
              request_json: dict[str, Any] | None = None) -> asyncio.Future[Exception | None]:
        """Queue ``result`` for ``key``; the future gives the exception that kept it from being stored, or None."""
        done: asyncio.Future[Exception | None] = self._loop.create_future()
        self._queue.put(_Pending(Stored(key, result, request_json), done))
        return done

    def close(self) -> None:
        """Store what is queued, then end the thread (an answer being stored when the run is cancelled is kept)."""
        self._queue.put(None)
        self._thread.join()

    def _write(self) -> None:
        ending = False
        while not ending:
            first = self._queue.get()
            batch = [] if first is None else [first]
            ending = first is None
            while not ending:  # everything queued meanwhile goes into the same transaction
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    ending = True
                else:
                    batch.append(more)
            if batch:
                self._resolve(batch, self._commit(batch))  # (_commit returns every error as an outcome)

    def _commit(self, batch: list[_Pending]) -> list[Exception | None]:
        try:
            self.cache.put_many([pending.stored for pending in batch])
            return [None] * len(batch)
        except Exception:  # noqa: BLE001 - which entry it was is found by writing them one by one
            outcomes: list[Exception | None] = []
            for pending in batch:
                try:
                    self.cache.put_many([pending.stored])
                    outcomes.append(None)
                except Exception as exc:  # noqa: BLE001 - e.g. diskcache's lock timeout: this answer's error
                    outcomes.append(exc)
            return outcomes

    def _resolve(self, batch: list[_Pending], outcomes: list[Exception | None]) -> None:
        def resolve() -> None:
            for pending, outcome in zip(batch, outcomes, strict=True):
                if not pending.done.done():  # (its sender may have been cancelled meanwhile)
                    pending.done.set_result(outcome)

        try:
            self._loop.call_soon_threadsafe(resolve)
        except Exception:  # noqa: BLE001 - the loop has closed (RuntimeError): nobody waits any more, the batch is written
            pass
