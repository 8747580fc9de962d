"""HELM's deterministic samples: of eval instances (runner.py::downsample_eval_instances) and of in-context
examples (:func:`helm_in_context_examples`).

HELM does ``np.random.seed(0); np.random.choice(instances, k, replace=False)``. With numpy's legacy generator that
is the first ``k`` of ``np.random.permutation(len(instances))``, kept in that (unsorted) order. We draw it from a
private ``RandomState(0)`` so that nobody else's use of the global generator can change the sample.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

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


class TooFewExamples(ValueError):
    """HELM's in-context sampler ran out of labelled examples before it had ``k`` (it then samples the rest from the
    unlabelled ones, and with none left it fails): one label was an empty text, which ends HELM's round-robin."""


def helm_in_context_examples(train: Sequence[T], k: int, label: Callable[[T], str | None], seed: int = 0) -> list[T]:
    """HELM's in-context examples (``InContextLearningAdapter.sample_examples`` with ``sample_train=True``): the
    ``k`` train instances HELM puts before every eval instance of trial ``seed``.

    ``label(instance)`` is the text of its first correct reference (None: it has none). Labels are grouped by how
    many instances carry them, most first; within a count, in sorted order shuffled by Python's ``random`` seeded
    ``seed`` (one shuffle per count, largest count first); then one instance per label round-robin, each drawn with
    ``randrange`` from those left under its label, until ``k``. Unlabelled instances fill the rest
    (``random.sample``). HELM's quirks kept: an empty label ends the round-robin (``if not next_label: break``).
    Raises :class:`TooFewExamples` where HELM's own sampler would raise (or loop for ever)."""
    import random

    rng = random.Random(seed)  # the same sequence as HELM's ``random.seed(seed)`` on the module's generator
    wanted = min(len(train), k)
    unlabelled: list[T] = []
    by_label: dict[str, list[T]] = {}
    for instance in train:
        text = label(instance)
        if text is None:
            unlabelled.append(instance)
        else:
            by_label.setdefault(text, []).append(instance)
    by_count: dict[int, list[str]] = {}
    for text, members in sorted(by_label.items(), key=lambda item: item[0]):
        by_count.setdefault(len(members), []).append(text)
    ordered: list[str] = []
    for count in sorted(by_count, reverse=True):
        labels = by_count[count]
        rng.shuffle(labels)
        ordered.extend(labels)
    examples: list[T] = []
    if ordered:
        position = 0
        while wanted > 0:
            text = ordered[position % len(ordered)]
            position += 1
            if not text:
                break
            members = by_label[text]
            if not members:
                if not any(by_label[t] for t in ordered):  # HELM would cycle for ever
                    break
                continue
            examples.append(members.pop(rng.randrange(len(members))))
            wanted -= 1
    if wanted > len(unlabelled):
        raise TooFewExamples(f"HELM's sampler cannot draw {k} in-context examples from these {len(train)}: "
                             + ("a correct answer is an empty text" if "" in by_label else "too few labelled ones"))
    return examples + rng.sample(unlabelled, wanted)
