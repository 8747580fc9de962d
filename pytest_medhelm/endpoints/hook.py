"""The built-in resolution of a model string, as a small plugin of its own (registered as ``medhelm-endpoints``).

``pytest_medhelm_model_spec`` is implemented here, at module level, beside the resolution it calls: a model string
becomes its :class:`~pytest_medhelm.values.ModelSpec` from below, reading only the endpoint options the run
configuration left in the config's stash (:data:`ENDPOINT_OPTIONS`), never through the run's orchestrator. It runs
last (``trylast``): a user's plugin that returns a spec first wins.
"""

from __future__ import annotations

import pytest

from pytest_medhelm.endpoints.resolve import EndpointOptions, Role, spec_for
from pytest_medhelm.values import ModelSpec

#: the name the plugin is registered under (the start-up check of ``local/...`` models leaves it out: it asks the
#: users' plugins only, while the run configuration is still being built)
PLUGIN_NAME = "medhelm-endpoints"


#: set by the run once its configuration is validated
ENDPOINT_OPTIONS = pytest.StashKey[EndpointOptions]()


@pytest.hookimpl(trylast=True)
def pytest_medhelm_model_spec(name: str, api_base: str | None, config: pytest.Config, role: str) -> ModelSpec:
    """Any litellm string, ``local/...`` models, ``--medhelm-endpoint`` and the key variable of the model's part
    in the run (``role``: "model" under test or "judge")."""
    judge_or_model: Role = "judge" if role == "judge" else "model"
    return spec_for(config.stash[ENDPOINT_OPTIONS], name, judge_or_model)


def register(config: pytest.Config, options: EndpointOptions) -> None:
    """The plugin registered (once) with the run's endpoint options."""
    import sys

    config.stash[ENDPOINT_OPTIONS] = options
    if not config.pluginmanager.has_plugin(PLUGIN_NAME):
        config.pluginmanager.register(sys.modules[__name__], PLUGIN_NAME)
