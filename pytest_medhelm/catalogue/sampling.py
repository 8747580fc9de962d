"""HELM's deterministic sample of eval instances (runner.py::downsample_eval_instances).

HELM does ``np.random.seed(0); np.random.choice(instances, k, replace=False)``. With numpy's legacy generator that
is the first ``k`` of ``np.random.permutation(len(instances))``, kept in that (unsorted) order. We draw it from a
private ``RandomState(0)`` so that nobody else's use of the global generator can change the sample.
"""

from __future__ import annotations

from typing import Sequence, TypeVar

T = TypeVar("T")


def helm_sample(instances: Sequence[T], k: int | None) -> list[T]:
    if k is None or k >= len(instances):
        return list(instances)
    import numpy as np

    order = np.random.RandomState(0).permutation(len(instances))[:k]
    return [instances[int(i)] for i in order]
