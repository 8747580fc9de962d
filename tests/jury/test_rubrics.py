"""The jury's own rubrics (jury/rubrics.py): one per open benchmark, their shape and wording, their rendering."""

from __future__ import annotations

import pytest
from judge_replies import (
    ACC,
    OPEN_SLUGS,
)

from pytest_medhelm.catalogue import builtin_benchmarks
from pytest_medhelm.jury import (
    RUBRICS,
    rubric_for,
)
from pytest_medhelm.metrics.jury import JuryMetric

#: HELM's annotator prompts: the tag around {QUESTION} per benchmark
INPUT_TAGS = {
    "aci_bench": "conversation", "noteextract": "user_request", "dischargeme": "patient_information",
    "meddialog": "conversation", "medalign": "user_request", "mediqa": "question",
    "medicationqa": "medication_question", "mentalhealth": "conversation", "mimic_bhc": "user_request",
    "mimic_rrs": "user_request", "mtsamples_procedures": "user_request", "mtsamples": "patient_information",
    "patientinstruct": "case_details",
}


def test_a_rubric_for_every_open_benchmark_of_the_catalogue_and_no_other():
    open_benchmarks = [b for b in builtin_benchmarks() if b.kind == "open"]
    open_in_catalogue = {b.slug for b in open_benchmarks if isinstance(b.metric, JuryMetric)}
    assert set(RUBRICS) == set(OPEN_SLUGS) == open_in_catalogue
    # the other open-ended ones are graded per rubric criterion (HealthBench's grader), not by the jury's rubrics
    assert {b.slug for b in open_benchmarks} - open_in_catalogue == {"healthbench", "healthbench_professional"}
    closed = [b.slug for b in builtin_benchmarks() if b.kind == "closed"]
    assert closed and all(rubric_for(slug) is None for slug in closed)


@pytest.mark.parametrize("slug", OPEN_SLUGS)
def test_rubric_shape(slug):
    rubric = rubric_for(slug)
    assert rubric is not None and rubric.slug == slug and rubric.version
    assert rubric.purpose == f"judge:{slug}:{rubric.version}"
    expected = ("accuracy", "structure", "clarity") if slug == "noteextract" else ACC
    assert rubric.criteria == expected
    assert rubric.has_gold is (slug != "noteextract")
    template = rubric.template
    tag = INPUT_TAGS[slug]
    assert f"<{tag}>\n{{QUESTION}}\n</{tag}>" in template
    assert "<response>\n{RESPONSE}\n</response>" in template
    assert ("<gold_response>\n{GOLD_RESPONSE}\n</gold_response>" in template) is rubric.has_gold
    assert "1 to 5" in template and "1 = very poor" in template and "5 = excellent" in template
    for criterion in expected:
        assert f"- {criterion}:" in template  # described
        assert f'"{criterion}": {{"score": <integer from 1 to 5>, "explanation": "<why this score>"}}' in template
    assert "JSON" in template and "explanation" in template


def test_rubric_wording_follows_the_spec_where_it_is_specific():
    assert "therapeutic technique" in rubric_for("mentalhealth").template
    assert "empathetic" in rubric_for("mentalhealth").template
    assert "Possible correct impressions" in rubric_for("mimic_rrs").template
    assert "One possible correct response" in rubric_for("mimic_bhc").template
    assert "plain language" in rubric_for("mediqa").template  # consumer clarity
    assert "all the parts of the required format" in rubric_for("noteextract").template


def test_render_substitutes_in_one_pass():
    rubric = rubric_for("aci_bench")
    text = rubric.render("Q {RESPONSE}", "an answer mentioning {GOLD_RESPONSE} literally", "GOLD")
    assert "Q {RESPONSE}" in text  # not expanded again
    assert "an answer mentioning {GOLD_RESPONSE} literally" in text
    assert "<gold_response>\nGOLD\n</gold_response>" in text
