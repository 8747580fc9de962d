"""Where medhelm 0.8.0 kept HELM 0.5.16's code, ``--medhelm-compat medhelm`` keeps HELM's quirks exactly as
``--medhelm-compat helm`` does, and the default keeps our corrections.

One row per place in the code where the mode decides (every ``reproduces_helm`` of the project but the jury's
reading and EHRSQL's gold query, which the fork changed and which test_compat_medhelm_jury.py and
test_compat_medhelm_ehrsql.py cover): on an input where HELM and our default differ, medhelm must give HELM's
value. Each value is the metric's own output on a real instance; the spec (``medhelm-0.8-additions.md`` §10) lists
the files the fork changed, and none of these is among them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from catalogue_helpers import BENCHMARKS

from pytest_medhelm.compat import MODES, is_medhelm, reproduces_helm
from pytest_medhelm.metrics.base import ScoringError
from pytest_medhelm.values import Completion, Instance


def medcalc(compat: str) -> float:
    lab = Instance(id="l", input="?", references=("5",), benchmark="medcalc_bench",
                   extra={"category": "lab", "lower_limit": "4", "upper_limit": "6"})
    return BENCHMARKS["medcalc_bench"].metric.score("5", lab, compat).value


def medec(compat: str) -> float:
    note = Instance(id="n", input="?", references=("CORRECT",), benchmark="medec")
    return BENCHMARKS["medec"].metric.score("CORRECT.", note, compat).value


def mimic_billing(compat: str) -> float:
    note = Instance(id="b", input="?", references=("M1A.00X0",), benchmark="mimic_billing")
    return BENCHMARKS["mimic_billing"].metric.score("M1A.00X0", note, compat).value


def ehrshot(compat: str) -> float:
    # a prompt HELM pairs with another patient's label (Instance.extra["helm_correct"])
    item = Instance(id="e", input="?", references=("yes",), choices=("yes", "no"), correct=0, benchmark="ehrshot",
                    extra={"helm_correct": 1})
    return BENCHMARKS["ehrshot"].metric.score("A", item, compat).value


def jury_without_a_readable_judge(compat: str) -> Any:
    from pytest_medhelm.metrics.jury import JuryMetric

    metric = JuryMetric("aci_bench", judge_completions=lambda instance, answer: {"j": Completion(text="no JSON")})
    # (no reference: no ROUGE or BERTScore beside the jury, which are not under test here)
    item = Instance(id="a", input="a conversation", benchmark="aci_bench")
    try:
        return metric.score("a note", item, compat).raw
    except ScoringError:
        return "not scored"


def noteextract_secondary(compat: str) -> Any:
    from pytest_medhelm.metrics.jury import JuryMetric

    item = Instance(id="x", input="a note", references=("the source note",), benchmark="noteextract")
    return JuryMetric("noteextract").secondary_inputs("an extraction", item, compat)


def mtsamples_procedures_loader(compat: str) -> Callable:
    return BENCHMARKS["mtsamples_procedures"].instance_builder(compat)


PLACES: list[tuple[str, Callable[[str], Any]]] = [
    ("medcalc: the lab category scores 0", medcalc),
    ("medec: 'CORRECT.' flags an error", medec),
    ("mimic_billing: HELM's ICD-10 regex", mimic_billing),
    ("ehrshot: HELM's mis-paired label", ehrshot),
    ("jury: no readable judge scores HELM's 1.0", jury_without_a_readable_judge),
    ("noteextract: ROUGE against the source note", noteextract_secondary),
    ("mtsamples_procedures: the files HELM cannot download", mtsamples_procedures_loader),
]


@pytest.mark.parametrize("place", [p[1] for p in PLACES], ids=[p[0] for p in PLACES])
def test_medhelm_follows_helm_where_the_fork_kept_helms_code(place: Callable[[str], Any]) -> None:
    default, helm, medhelm = (place(compat) for compat in ("default", "helm", "medhelm"))
    assert helm != default  # a place where the mode matters ...
    assert medhelm == helm  # ... and the fork behaves as HELM 0.5.16


def test_the_modes_and_their_questions() -> None:
    assert MODES == ("default", "helm", "medhelm")
    assert [reproduces_helm(m) for m in MODES] == [False, True, True]
    assert [is_medhelm(m) for m in MODES] == [False, False, True]


def test_only_the_benchmarks_the_fork_changed_have_a_medhelm_variant() -> None:
    changed = {slug for slug, bench in BENCHMARKS.items()
               if bench.build_instances_medhelm is not None or bench.prompt_medhelm is not None}
    assert changed == {"ehrsql", "proxysender"}


def test_default_and_helm_get_the_benchmarks_own_prompt_and_loader() -> None:
    """The medhelm variants are reached only under medhelm: the default and helm render with ``prompt`` and load
    with the loaders they had before the medhelm mode existed."""
    def loader(bench, compat: str) -> Callable:
        builder = bench.instance_builder(compat)
        return getattr(builder, "func", builder)  # a benchmark with arguments gets its loader with them bound

    for slug, bench in BENCHMARKS.items():
        assert bench.prompt_for("default") is bench.prompt_for("helm") is bench.prompt, slug
        assert loader(bench, "default") is bench.build_instances, slug
        assert loader(bench, "helm") is (bench.build_instances_helm or bench.build_instances), slug
        # medhelm: the fork's variant, else HELM's loader (the fork kept its scenario)
        assert loader(bench, "medhelm") is (bench.build_instances_medhelm or bench.build_instances_helm
                                            or bench.build_instances), slug
