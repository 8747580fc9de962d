"""The items' API: what a medhelm item sees of the run, and what it records about itself, for the report.

Its parameter (:class:`Case`), its record (:func:`record_for`), the run's services (:class:`ItemServices`, reached
through :func:`services_of`) and the miss (:class:`Missed`): the fixtures and assertions a test calls use these.

The run registers its services under ``config.stash[RUN_SERVICES]``: the one way library code (the fixtures, the
assertions) reaches the run, through the item being run (``CURRENT_ITEM``, set by the run around setup and call).
The model fixture and the assertions write into the running item's record, a typed value
(:class:`~pytest_medhelm.item_record.ItemRecord`); the run makes the results' record of it and attaches that to the
item's report (``report.medhelm``, as plain data), which xdist carries to the controlling process like any report
attribute.
"""

from __future__ import annotations

import contextvars
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import pytest

if TYPE_CHECKING:  # pragma: no cover
    from pytest_medhelm.catalogue import Registry
    from pytest_medhelm.config import RunConfig
    from pytest_medhelm.item_record import ItemRecord
    from pytest_medhelm.metrics.base import ScoringContext
    from pytest_medhelm.report.records import Results
    from pytest_medhelm.values import ChatRequest, Completion, Instance, ModelSpec

#: the running item's record (:class:`~pytest_medhelm.item_record.ItemRecord`), made by its first use
RECORD = pytest.StashKey["ItemRecord"]()
#: pytest-timeout's settings for an item whose timer it set (so that the wait for an answer can be left out)
TIMEOUT_SETTINGS = pytest.StashKey[Any]()
#: the item whose test body is running (set by the run around setup and call)
CURRENT_ITEM: contextvars.ContextVar[pytest.Item | None] = contextvars.ContextVar("medhelm_item", default=None)


class Case(NamedTuple):  # (not a frozen dataclass: building that class costs every pytest start milliseconds)
    """One item's parameter. ``problem`` (a data error) is raised at setup; ``deselected`` items are dropped."""

    benchmark: str
    instance: Instance | None = None
    model: str | None = None
    problem: BaseException | None = None
    deselected: bool = False


class ItemServices(Protocol):
    """What the run offers the items of its process."""

    @property
    def registry(self) -> Registry: ...

    @property
    def run_config(self) -> RunConfig: ...

    def model_spec(self, name: str) -> ModelSpec: ...

    def answer_request(self, instance: Instance, model: str) -> ChatRequest:
        """The benchmark's request for ``instance`` to ``model`` (the one the run planned, when it did)."""

    def complete(self, spec: ModelSpec, request: ChatRequest) -> Completion: ...

    def scoring_context(self) -> ScoringContext: ...

    @property
    def results(self) -> Results | None:
        """The run's results once built (the plugins that save and compare runs read them at the session's end)."""


RUN_SERVICES = pytest.StashKey[ItemServices]()


class Missed(AssertionError):
    """The model's answer scored below the metric's pass mark: a measurement, not a failure (unless
    --medhelm-strict)."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def services_of(item: pytest.Item) -> ItemServices:
    services = item.config.stash.get(RUN_SERVICES, None)
    if services is None:
        raise RuntimeError("pytest-medhelm: no medhelm run in this pytest session")
    return services


def record_for(item: pytest.Item | None = None) -> ItemRecord:
    """The record of ``item`` (default: the running item), created on first use."""
    item = item or CURRENT_ITEM.get()
    if item is None:
        raise RuntimeError("pytest-medhelm: no medhelm item is running (assertions work inside a medhelm test)")
    record = item.stash.get(RECORD, None)
    if record is None:
        from pytest_medhelm.item_record import ItemRecord

        record = item.stash[RECORD] = ItemRecord()
    return record


def case_of(item: pytest.Item) -> Case | None:
    """The item's medhelm parameter, or None for any other test."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    return callspec.params.get("medhelm_case")
