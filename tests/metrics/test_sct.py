"""SCT-Bench: the script-concordance scoring against hand-computed partial credit, the rating's extraction (cases
and a Hypothesis fuzz, whose input counts are printed), the loader on synthetic files in the upstream format (with
a synthetic template module, so these run without ../shared), and the variants' arguments."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from fuzzing import fuzz
from hypothesis import given
from hypothesis import strategies as st
from medhelm08_fixtures import SCT_CASE, SCT_ROWS, sct_csv, write_sct
from terminal_lines import figures_reported

from pytest_medhelm.catalogue.clinical_decision_support import sct_bench
from pytest_medhelm.data.errors import DataError
from pytest_medhelm.metrics.sct import SCT_SCORE, parse_rating
from pytest_medhelm.values import Instance

FUZZED: Counter = Counter()


_report_inputs = figures_reported(FUZZED, lambda fuzzed: "\nSCT rating extraction fuzz (measured): "
                                  + ", ".join(f"{count} {what}" for what, count in sorted(fuzzed.items())))


def panel_instance(panel) -> Instance:
    return Instance(id="q", input="…", references=("+1",), extra={"expert_distribution": tuple(panel)})


# ------------------------------------------------------------------------------------------ partial credit
@pytest.mark.parametrize(("panel", "answer", "credit", "member"), [
    # by hand: the panel's count for the rating over its largest count
    ((0, 0, 1, 4, 10), "Rating: +2", 10 / 10, 1.0),
    ((0, 0, 1, 4, 10), "Rating: +1\nbecause crackles", 4 / 10, 1.0),
    ((0, 0, 1, 4, 10), "Rating: 0", 1 / 10, 1.0),
    ((0, 0, 1, 4, 10), "Rating: -1", 0.0, 0.0),
    ((3, 6, 1, 0, 0), "  Rating: -2 (pain on palpation)  ", 3 / 6, 1.0),
    ((2, 2, 2, 0, 0), "Rating: -1", 1.0, 1.0),  # a tie for the mode: both modal answers get full credit
    ((0, 0, 0, 0, 0), "Rating: 0", 0.0, 0.0),  # an empty panel gives nothing (medhelm: max 0 -> 0)
    ((0.5, 1.5, 0, 0, 0), "Rating: -2", 0.5 / 1.5, 1.0),  # panels may hold fractions
    ((0, 0, 1, 4, 10), "I think +2", 0.0, 0.0),  # no "Rating: "
    ((0, 0, 1, 4, 10), "Rating: 2", 0.0, 0.0),  # unsigned 2 is not in SCT-Bench's pattern: no rating
    ((0, 0, 1, 4, 10), "Rating: 10", 1 / 10, 1.0),  # SCT-Bench's reading: "10" -> the "0" in it
    ((0, 0, 1, 4, 10), "Rating: +1 or +2", 4 / 10, 1.0),  # five characters "+1 or": only +1
    ((0, 0, 1, 4, 10), "Rating: +1/+2", 0.0, 0.0),  # "+1/+2" joins to "+1+2": not an integer
])
def test_partial_credit_by_hand(panel, answer, credit, member) -> None:
    score = SCT_SCORE.score(answer, panel_instance(panel))
    assert score.value == pytest.approx(credit)
    assert score.extra["sct_expert_set_membership"] == member
    assert score.raw_value == pytest.approx(credit)


def test_metric_is_the_same_in_every_mode_and_names_the_rating() -> None:
    instance = panel_instance((0, 0, 1, 4, 10))
    for compat in ("default", "helm", "medhelm"):
        assert SCT_SCORE.score("Rating: +1", instance, compat).value == pytest.approx(0.4)
    score = SCT_SCORE.score("Rating: +1", instance)
    assert score.extra["rating"] == 1 and "rated +1" in score.detail and "+2: 10" in score.detail
    assert SCT_SCORE.name == "sct_score" and not SCT_SCORE.binary and SCT_SCORE.pass_mark == 1.0
    with pytest.raises(ValueError, match="expert distribution"):
        SCT_SCORE.score("Rating: +1", Instance(id="x", input=""))


# ------------------------------------------------------------------------------------------ the fuzz
LABELS = ("+2", "+1", "0", "-1", "-2")


@fuzz(400)
@given(st.text())
def test_fuzz_any_text_gives_a_rating_in_range_or_none(text: str) -> None:
    FUZZED["arbitrary texts"] += 1
    rating = parse_rating(text)
    assert rating is None or rating in (-2, -1, 0, 1, 2)
    score = SCT_SCORE.score(text, panel_instance((1, 2, 3, 4, 5)))
    assert 0.0 <= score.value <= 1.0


@fuzz(400)
@given(prefix=st.text().filter(lambda t: "Rating: " not in t), label=st.sampled_from(LABELS),
       suffix=st.text(alphabet=st.characters(blacklist_characters="+-0123456789")).filter(
           lambda t: "Rating: " not in t))
def test_fuzz_a_rating_after_the_mark_is_read(prefix: str, label: str, suffix: str) -> None:
    text = f"{prefix}Rating: {label}{suffix}"
    if "Rating: " in text[: len(prefix) + 7]:  # the prefix's end and the mark made an earlier mark
        return
    FUZZED["texts with a rating"] += 1
    assert parse_rating(text) == int(label)


@fuzz(200)
@given(st.lists(st.integers(min_value=0, max_value=50), min_size=5, max_size=5), st.sampled_from(LABELS))
def test_fuzz_partial_credit_is_the_count_over_the_largest(panel, label) -> None:
    FUZZED["panels"] += 1
    value = SCT_SCORE.score(f"Rating: {label}", panel_instance(panel)).value
    count = panel[LABELS[::-1].index(label)]
    assert value == (count / max(panel) if max(panel) else 0.0)


# ------------------------------------------------------------------------------------------ the loader
TEMPLATE = '''
GUIDELINE_TEMPLATE = """# Guide

Answer with "Rating: " and a brief explanation for your choice.
"""
TESTCASE_TEMPLATE = """## Scenario

{{ scenario }}

## Hypothesis

{{ hypothesis }}

## Additional Information

{{ additional information }}

## Response"""
EXAMPLE_NEG2 = "<-2>"
EXAMPLE_NEG1 = "<-1>"
EXAMPLE_0 = "<0>"
EXAMPLE_POS1 = "<+1>"
EXAMPLE_POS2 = "<+2>"
raise SystemExit("this module is data: it must never run")
'''


def synthetic_files(tmp_path: Path, csv_text: str | bytes | None = None) -> dict[str, Path]:
    template = tmp_path / "sct_bench_scenario.py"
    template.write_text(TEMPLATE, encoding="utf-8")
    write_sct(tmp_path, template=None)
    data = tmp_path / "sct_bench" / "sct_cleaned_full.csv"
    if isinstance(csv_text, bytes):
        data.write_bytes(csv_text)
    elif csv_text is not None:
        data.write_text(csv_text, encoding="utf-8")
    return {"sct_cleaned_full.csv": data, "sct_bench_scenario.py": template}


def build(files, reason=False, few_shot=False):
    return sct_bench.build_instances(files, arguments=sct_bench.SctVariant(reason=reason, few_shot=few_shot))


@pytest.mark.parametrize(("reason", "few_shot", "head"), [
    (False, False, '# Guide\n\nAnswer with "Rating: ".\n'),
    (True, False, '# Guide\n\nAnswer with "Rating: " and a brief explanation for your choice.\n'),
    (False, True, '# Guide\n\nAnswer with "Rating: ".\n## Examples with Response Labels<-2><-1><0><+1><+2>'),
])
def test_loader_assembles_the_template_as_medhelm(tmp_path, reason, few_shot, head) -> None:
    instances = build(synthetic_files(tmp_path), reason, few_shot)
    assert [i.id for i in instances] == ["sct-0", "sct-1", "sct-2"]
    assert instances.removed == {sct_bench.SKIPPED: 1}
    for instance, row in zip(instances, SCT_ROWS):
        # the instance text is the filled template; the generation adapter adds "\n"
        assert instance.input + "\n" == head + SCT_CASE.format(row[1], row[2], row[3])
        assert sct_bench.BENCHMARK.render_prompt(instance) == instance.input + "\n"
        assert instance.extra["expert_distribution"] == tuple(float(x) for x in row[4])
    # the reference: the panel's most chosen rating, the first maximum in the order -2 … +2
    assert [i.references for i in instances] == [("+2",), ("-1",), ("-2",)]


def test_an_all_zero_panel_refers_to_minus_two(tmp_path) -> None:
    rows = [("z", "stem", "hypothesis", "finding", (0, 0, 0, 0, 0))]
    [instance] = build(synthetic_files(tmp_path, sct_csv(rows)))
    assert instance.references == ("-2",)


def test_undecodable_bytes_vanish_and_crlf_in_a_field_becomes_lf(tmp_path) -> None:
    raw = sct_csv([("b", "fe\xff", "h", "f", (0, 0, 0, 1, 0))]).encode("utf-8")
    raw = raw.replace("\xff".encode(), b"ver\xff\xfe").replace(b"h,f", b'"h\r\nx",f')
    [instance] = build(synthetic_files(tmp_path, raw))
    assert "## Scenario\n\nfever\n\n## Hypothesis\n\nh\nx\n\n" in instance.input


@pytest.mark.parametrize(("cell", "problem"), [("many", "'1' must be a non-negative number, got 'many'"),
                                                ("", "got ''"), ("-1", "got '-1'"), ("nan", "got 'nan'")])
def test_a_bad_panel_cell_names_file_row_and_column(tmp_path, cell, problem) -> None:
    text = sct_csv(SCT_ROWS[:2]).replace(",0,0,1,4,10", f",0,0,1,{cell},10")
    files = synthetic_files(tmp_path, text)
    with pytest.raises(DataError) as err:
        build(files)
    assert str(files["sct_cleaned_full.csv"]) in str(err.value) and "row 1 (line 2)" in str(err.value)
    assert problem in str(err.value)


def test_duplicate_or_missing_columns_are_errors(tmp_path) -> None:
    files = synthetic_files(tmp_path, sct_csv(SCT_ROWS[:1] * 2))
    with pytest.raises(DataError, match=r"row 2 \(line 3\): 'question_id' must be unique"):
        build(files)
    files = synthetic_files(tmp_path, sct_csv().replace("additional_info", "info"))
    with pytest.raises(DataError, match="missing column.*'additional_info'"):
        build(files)


def test_a_template_module_without_the_constants_is_an_error_naming_it(tmp_path) -> None:
    files = synthetic_files(tmp_path)
    files["sct_bench_scenario.py"].write_text("GUIDELINE_TEMPLATE = 'x' + 'y'\n", encoding="utf-8")
    with pytest.raises(DataError) as err:
        build(files)
    assert str(files["sct_bench_scenario.py"]) in str(err.value)
    assert "GUIDELINE_TEMPLATE is not a string literal" in str(err.value)


# ------------------------------------------------------------------------------------------ the variants
@pytest.mark.parametrize(("given", "compat", "variant"), [
    ((), "default", (False, False)),
    ((("reason", "true"),), "default", (True, False)),
    ((("reason", "TRUE"), ("few_shot", "1")), "default", (True, True)),
    ((("reason", "false"), ("few_shot", "no")), "default", (False, False)),
    ((("reason", "true"), ("reason", "false")), "default", (False, False)),  # the last value wins
    # medhelm's run entries: a string, any non-empty value is true, "False" too
    ((("reason", "False"),), "medhelm", (True, False)),
    ((("few_shot", "0"),), "helm", (False, True)),
    ((("reason", ""),), "medhelm", (False, False)),
])
def test_variant_arguments(given, compat, variant) -> None:
    read = sct_bench.read_arguments(given, compat)
    assert (read.reason, read.few_shot) == variant


def test_variant_run_names_and_bad_arguments() -> None:
    assert sct_bench.SctVariant().helm_run == "sct_bench"
    assert sct_bench.SctVariant(True, True).helm_run == "sct_bench:reason=True,few_shot=True"
    assert sct_bench.SctVariant(False, True).helm_run == "sct_bench:few_shot=True"
    with pytest.raises(ValueError, match="expected true or false"):
        sct_bench.read_arguments((("reason", "perhaps"),), "default")
    with pytest.raises(ValueError, match="not shots"):
        sct_bench.read_arguments((("shots", "5"),), "medhelm")
