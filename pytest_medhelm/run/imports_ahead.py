"""Libraries imported on a thread while this process would otherwise wait, and joined before they are used.

Used where the process has time to spare before a library is needed: xdist's controller waits for its workers'
collections before it sends (aiohttp: 0.1-0.2 s of import, with the TLS contexts it makes as it loads), and every
reporting process waits for answers while its items run (numpy and tabulate, which only the results need). Only
third-party or standard libraries are imported here, never a module of this package: two threads importing
modules that import each other could see one of them half-initialized.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Sequence


class ImportsAhead:
    def __init__(self, modules: Sequence[str], name: str) -> None:
        self.modules = tuple(modules)
        self.name = name
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._load, name=self.name, daemon=True)
            self._thread.start()

    def join(self) -> None:
        """Wait for the imports (if they were started): the caller then imports the same modules at no cost."""
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()

    def _load(self) -> None:
        for module in self.modules:
            try:
                importlib.import_module(module)
            except Exception:  # noqa: BLE001 - imported again where it is used, which then says what is wrong
                pass
