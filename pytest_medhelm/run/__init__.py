"""The run: one pytest session of pytest-medhelm, in rooms of its own, data flowing one way.

    configure  context.RunContext       options, registry, cache, prices, budget, model specs, role; in config.stash
    collect    collection.Collection    parametrization per instance x model, deselection, shards
    plan       plan.AnswerPlan          benchmark x instance x model -> request; answer -> judge requests
    send       delivery.Delivery        the one sending path (background sender) and the items' complete()
    run items  items.ItemHooks          the per-item hooks: record, miss, error, teststatus
    aggregate, gate, report             reporting.Reporting (results, terminal summary, files)
    preflight  preflight                dry run, --medhelm-local-only, prices for a budget
    roles      roles.Central           the run's pytest plugin, what this process does (xdist.Controller, .Worker)

:class:`pytest_medhelm.run.session.Run` holds these rooms; the role of the process (chosen once, by
:func:`choose_role`) owns the run, is registered as its pytest plugin and drives it. The plugin entry point starts
it (:func:`start`, the only place a run is created). Library code reaches the run in one way only:
``config.stash[RUN_SERVICES]`` (defined in :mod:`pytest_medhelm.item_api`), which the fixtures use; metrics get a
:class:`~pytest_medhelm.metrics.base.ScoringContext` from the assertion, never a global.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import pytest

    from pytest_medhelm.run.roles import Role
    from pytest_medhelm.run.session import Run


def choose_role(config: pytest.Config) -> type[Role]:
    """The role of this process, decided here only: an xdist worker, xdist's controller, or the one process of the
    run."""
    from pytest_medhelm.options import is_xdist_worker, starts_xdist_workers

    if is_xdist_worker(config):
        from pytest_medhelm.run.xdist import Worker

        return Worker
    if starts_xdist_workers(config):
        from pytest_medhelm.run.xdist import Controller

        return Controller
    from pytest_medhelm.run.roles import Central

    return Central


def start(config: pytest.Config) -> Run:
    """The run of this pytest process, created with its role and registered, once."""
    from pytest_medhelm.item_api import RUN_SERVICES

    services = config.stash.get(RUN_SERVICES, None)
    if services is None:
        role = choose_role(config)(config)
        config.stash[RUN_SERVICES] = services = role.run
        role.register()
    return services  # type: ignore[return-value]  # (the stash holds the Run, typed as the items' view of it)
