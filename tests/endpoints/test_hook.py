"""The built-in resolution of model strings (pytest_medhelm/endpoints/hook.py): a module-level hook implementation
registered as its own plugin, ``medhelm-endpoints``, that resolves with the run's endpoint options and gives way to
a user's plugin. Whole runs of the toy benchmark against our test server, serial and under xdist."""

from __future__ import annotations

import pytest
from pytester_runs import run

RESOLUTION_TEST = """
import sys

import pytest


@pytest.mark.medhelm(benchmark="toy")
def test_resolved_by_the_endpoints_plugin(request, medhelm_model):
    plugin = request.config.pluginmanager.get_plugin("medhelm-endpoints")
    assert plugin is sys.modules["pytest_medhelm.endpoints.hook"]
    assert request.config.pluginmanager.get_plugin("medhelm-run") is not plugin
    assert medhelm_model.spec.api_base == {url!r}
    assert medhelm_model.spec.litellm_model == {litellm!r}
"""

USERS_PLUGIN = """

from pytest_medhelm.values import ModelSpec


def pytest_medhelm_model_spec(name, api_base, config):
    # a user's resolution wins over the built-in one (which runs last)
    if name == "openai/toy-model":
        return ModelSpec(name=name, litellm_model="hosted_vllm/renamed", api_base=api_base)
"""

MODES = pytest.mark.parametrize("mode", [pytest.param(["-p", "no:xdist"], id="serial"),
                                    pytest.param(["-n", "2"], id="xdist", marks=pytest.mark.e2e)])


def toy_args(server, data) -> list[str]:
    return ["--medhelm-model", "openai/toy-model", "--medhelm-api-base", server.url, "--medhelm-data-dir", str(data)]


@MODES
def test_the_builtin_resolution_is_a_plugin_of_its_own(pytester, toy, server, mode):
    data = toy(2)
    pytester.makepyfile(test_resolution=RESOLUTION_TEST.format(url=server.url, litellm="openai/toy-model"))
    result = run(pytester, *mode, *toy_args(server, data), "test_resolution.py")
    result.assert_outcomes(passed=2)


@MODES
def test_a_users_plugin_resolves_first(pytester, toy, server, mode):
    data = toy(2)
    conftest = pytester.path / "conftest.py"
    conftest.write_text(conftest.read_text() + USERS_PLUGIN)
    pytester.makepyfile(test_resolution=RESOLUTION_TEST.format(url=server.url, litellm="hosted_vllm/renamed"))
    result = run(pytester, *mode, *toy_args(server, data), "test_resolution.py")
    result.assert_outcomes(passed=2)
