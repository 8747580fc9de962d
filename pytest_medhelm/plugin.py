"""pytest-medhelm's entry point (``pytest11: medhelm``): options, markers, fixtures, and the session object.

Kept thin and cheap on purpose: a pytest session that collects no medhelm item imports nothing heavy (no litellm,
no pydantic, no numpy). The work happens in :class:`pytest_medhelm.session.MedhelmSession`.
"""

from __future__ import annotations

import pytest

from pytest_medhelm.fixtures import medhelm_case, medhelm_instance, medhelm_model  # noqa: F401  (fixtures)
from pytest_medhelm.options import add_options, option_given

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
        from pytest_medhelm.listing import show_list

        config._do_configure()
        try:
            return show_list(config)
        finally:
            config._ensure_unconfigure()
    return None


def pytest_configure(config: pytest.Config) -> None:
    for line in MARKERS:
        config.addinivalue_line("markers", line)
    from pytest_medhelm.session import MedhelmSession

    session = MedhelmSession(config)
    config.pluginmanager.register(session, "medhelm-session")
    if option_given(config):
        session.run_config  # validate now: a bad value is a usage error before anything runs
        from pytest_medhelm.compare.plugin import register

        register(config)  # saved runs, comparisons, shards: only when one of their options is set
