"""pytest-medhelm's entry point (``pytest11: medhelm``): options, markers, fixtures, and the start of the run.

Kept thin and cheap on purpose: a pytest session that collects no medhelm item imports nothing heavy (no litellm,
no pydantic, no numpy) and not even :mod:`pytest_medhelm.run` (unless Ctrl-C stops it: the hook below). The work
happens in :mod:`pytest_medhelm.run`: the run is created in one place (:func:`pytest_medhelm.run.start`, which
chooses the process's role once and registers it as the run's plugin), at configure whenever a medhelm option is
set or xdist is in play; otherwise (no option, a single process: the role can only be the central one) when the
first medhelm test is collected.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from pytest_medhelm.fixtures import medhelm_case, medhelm_instance, medhelm_model  # noqa: F401  (fixtures)
from pytest_medhelm.options import add_options, is_xdist_worker, option_given, starts_xdist_workers

if TYPE_CHECKING:  # pragma: no cover
    from pytest_medhelm.run.session import Run

MARKERS = (
    "medhelm(benchmark): a MedHELM benchmark test; pytest-medhelm parametrizes it per instance and model",
    "clinical_decision_support: MedHELM category Clinical Decision Support",
    "clinical_note_generation: MedHELM category Clinical Note Generation",
    "patient_communication: MedHELM category Patient Communication and Education",
    "medical_research: MedHELM category Medical Research Assistance",
    "administration_workflow: MedHELM category Administration and Workflow",
    "public: a benchmark whose data is public",
    "gated: a benchmark whose data needs credentials or a data use agreement",
    "private: a benchmark on an institution's own data",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pytest_medhelm import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config):
    if config.getoption("medhelm_dry_run") and getattr(config.option, "numprocesses", None):
        # a dry run sends nothing and prints one estimate: no worker processes for that
        config.option.numprocesses = 0
        config.option.dist = "no"
        config.option.tx = []
    if config.getoption("medhelm_list") or config.getoption("medhelm_tree"):
        from pytest_medhelm.item_api import RUN_SERVICES
        from pytest_medhelm.listing import show_list

        config._do_configure()  # (a medhelm option is set: pytest_configure below starts the run)
        try:
            return show_list(config, config.stash[RUN_SERVICES])
        finally:
            config._ensure_unconfigure()
    return None


def pytest_configure(config: pytest.Config) -> None:
    for line in MARKERS:
        config.addinivalue_line("markers", line)
    from pytest_medhelm.registration import install_guard

    install_guard(config)  # benchmarks registered by a conftest that is loaded later would come too late
    if option_given(config):
        _ = start_run(config).run_config  # read now: a bad value is a usage error before anything runs
    elif is_xdist_worker(config) or starts_xdist_workers(config):
        # xdist: the controller passes the run id to the workers and sends the answers for them, so both sides
        # need the run from the start, before anything is collected
        start_run(config)
    # else the run starts with the first medhelm test collected (pytest_generate_tests below): a session that uses
    # none of the plugin never imports pytest_medhelm.run nor runs a medhelm hook per test


@pytest.hookimpl(tryfirst=True)  # before the terminal reporter prints the interruption
def pytest_keyboard_interrupt(excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    # In every session (a Ctrl-C can come before the run starts, or in a session with no medhelm test): a traceback
    # entry without a line number would make pytest's reporter crash (exit 1 instead of 2). Imported only now.
    from pytest_medhelm.run.interrupt_traceback import give_every_entry_a_line

    give_every_entry_a_line(excinfo)


def start_run(config: pytest.Config) -> Run:
    from pytest_medhelm.run import start

    return start(config)


@pytest.hookimpl(tryfirst=True)  # first, as the run's own hook is for the tests collected after this one
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # Only until the run exists: once registered, its own pytest_generate_tests parametrizes the medhelm tests.
    # (pluggy calls the implementations it had when this hook call started, so the new run is not called for this
    # test: it is handed the test here.)
    if "medhelm_case" in metafunc.fixturenames and not metafunc.config.pluginmanager.has_plugin("medhelm-run"):
        start_run(metafunc.config).collection.pytest_generate_tests(metafunc)
