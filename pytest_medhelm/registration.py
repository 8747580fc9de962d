"""Where benchmarks may be registered: the rules of ``pytest_medhelm_register_benchmarks``.

The registry of benchmarks is built at start-up, once per process (the options are checked against it, and under
xdist the controlling process, which collects nothing, must know the same benchmarks as its workers). A hook
implementation is therefore only seen when pytest has loaded it by then: in a plugin (``-p NAME``, a ``pytest11``
entry point, ``pytest_plugins`` of the rootdir conftest) or in an *initial* conftest.py: the one at the rootdir and
those of the directories named on the command line (or in ``testpaths``). pytest draws the same line for its own
start-up hooks (``pytest_addoption``, ``pytest_plugins``).

A conftest.py that pytest only loads while collecting, in a subfolder, would come too late, and its benchmarks
would be unknown to the options, to the gates and to xdist's controller: :class:`LateRegistrationGuard` makes it a
collection error (exit status 2, before any item runs) with a message that says where to move the hook.
"""

from __future__ import annotations

from typing import Any

import pytest

HOOK = "pytest_medhelm_register_benchmarks"


def late_registration_message(plugin: Any, name: str) -> str:
    where = getattr(plugin, "__file__", None) or name
    return (f"pytest-medhelm: {where} implements {HOOK}, but pytest loaded it while collecting, after the "
            "benchmarks were registered at start-up, so its benchmarks would be unknown to the options, the gates "
            "and xdist. Register benchmarks in the conftest.py at the rootdir, in the conftest.py of a directory "
            "given on the command line (or in testpaths), or in a plugin (-p MODULE, or a pytest11 entry point).")


class LateRegistrationGuard:
    """Registered at ``pytest_configure``; from then on, a conftest implementing the hook is an error."""

    def __init__(self) -> None:
        self.armed = False  # pytest_plugin_registered is historic: registering replays the plugins loaded before

    def pytest_plugin_registered(self, plugin: Any, plugin_name: str) -> None:
        if self.armed and callable(getattr(plugin, HOOK, None)) and str(getattr(plugin, "__file__", "")).endswith(
                "conftest.py"):
            # a collection error of the directory being collected (shown without a traceback): nothing runs
            raise pytest.Collector.CollectError(late_registration_message(plugin, plugin_name))


def install_guard(config: pytest.Config) -> None:
    guard = LateRegistrationGuard()
    config.pluginmanager.register(guard, "medhelm-late-registration-guard")
    guard.armed = True
