"""The run: one pytest session of pytest-medhelm, in rooms of its own, data flowing one way.

    configure  context.RunContext       options, registry, cache, prices, budget, model specs, role; in config.stash
    collect    collection.Collection    parametrization per instance x model, deselection, shards
    plan       plan.AnswerPlan          benchmark x instance x model -> request; answer -> judge requests
    send       delivery.Delivery        the one sending path (background sender) and the items' complete()
    run items  items.ItemHooks          the per-item hooks: record, miss, error, teststatus
    aggregate, gate, report             reporting.Reporting (results, terminal summary, files)
    preflight  preflight                dry run, --medhelm-local-only, prices for a budget
    xdist      xdist                    the hooks only a distributed run needs (registered only then)

:class:`pytest_medhelm.run.session.Run` holds these and registers them with pytest; the plugin entry point starts
it (:func:`start`). Library code reaches the run in one way only: ``config.stash[RUN_SERVICES]`` (defined in
:mod:`pytest_medhelm.recording`), which the fixtures use; metrics get a :class:`~pytest_medhelm.metrics.base.
ScoringContext` from the assertion, never a global.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import pytest

    from pytest_medhelm.run.session import Run


def start(config: pytest.Config) -> Run:
    """The run of this pytest process, created and registered once."""
    from pytest_medhelm.recording import RUN_SERVICES
    from pytest_medhelm.run.session import Run

    run = config.stash.get(RUN_SERVICES, None)
    if run is None:
        run = Run(config)
        config.stash[RUN_SERVICES] = run
        run.register()
    return run  # type: ignore[return-value]


def started(config: pytest.Config) -> bool:
    from pytest_medhelm.recording import RUN_SERVICES

    return RUN_SERVICES in config.stash
