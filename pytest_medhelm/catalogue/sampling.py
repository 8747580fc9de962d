"""HELM's deterministic sample of eval instances (runner.py::downsample_eval_instances).

HELM does ``np.random.seed(0); np.random.choice(instances, k, replace=False)``. With numpy's legacy generator that
is the first ``k`` of ``np.random.permutation(len(instances))``, kept in that (unsorted) order. We draw it from a
private ``RandomState(0)`` so that nobody else's use of the global generator can change the sample.
"""

from __future__ import annotations

from typing import TypeVar
from collections.abc import Sequence

T = TypeVar("T")


def helm_sample(instances: Sequence[T], k: int | None) -> list[T]:
    if k is None or k >= len(instances):
        return list(instances)
    import numpy as np

    order = np.random.RandomState(0).permutation(len(instances))[:k]
    return [instances[int(i)] for i in order]


def helm_sample_by_subset(instances: Sequence[T], k: int | None) -> list[T]:
    """HELM's sample of each subset separately, in order of first appearance.

    A benchmark that HELM runs as several runs (MedDialog's two subsets, CLEAR's 13 conditions, EHRSHOT's tasks)
    caps each run at ``k``; an instance's ``subset`` names its run. Benchmarks without subsets have one group and
    get exactly :func:`helm_sample`."""
    groups: dict[str, list[T]] = {}
    for inst in instances:
        groups.setdefault(getattr(inst, "subset", ""), []).append(inst)
    if len(groups) <= 1:
        return helm_sample(instances, k)
    return [inst for group in groups.values() for inst in helm_sample(group, k)]
