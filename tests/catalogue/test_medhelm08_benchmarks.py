"""The six medhelm 0.8.0 benchmarks of this module (sct_bench, medxpertqa, healthqa_br, synt_family_disclosure,
synt_right_of_access, synt_written_consent): registered where they belong, their prompts byte for byte the fork's
(row 0 against ../shared/reference/prompts/medhelm08_*.txt, every row against the spec's layout written out in
tests/medhelm08_fixtures.py), malformed files named, the variants' arguments, and all six end to end through the
plugin against our test server, serial and with -n 2."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path

import pytest
import pytester_runs
from fuzzing import fuzz
from hypothesis import given
from hypothesis import strategies as st
from medhelm08_fixtures import (
    MEDXPERT_LABELS,
    PROMPTS,
    SCT_ROWS,
    SYNT,
    TEMPLATE_SOURCE,
    healthqa_expected,
    medxpert_expected,
    medxpert_row,
    sct_expected,
    synt_expected,
    synt_rows,
    write_healthqa,
    write_medxpert,
    write_sct,
    write_synt,
)
from pytester_runs import SUITE
from terminal_lines import figures_reported

from pytest_medhelm.catalogue import builtin_benchmarks
from pytest_medhelm.catalogue.clinical_decision_support.healthqa_br import split_question
from pytest_medhelm.data.errors import DataError
from pytest_medhelm.data.sources import resolve_files
from pytest_medhelm.testing.server import running_server

BENCHMARKS = {b.slug: b for b in builtin_benchmarks()}
SIX = ("sct_bench", "medxpertqa", "healthqa_br", "synt_family_disclosure", "synt_right_of_access",
       "synt_written_consent")
#: the fork's example prompt of each (../shared/reference/prompts/medhelm08_<name>.txt)
REFERENCE = {"sct_bench": "sct_bench", "medxpertqa": "medxpert_qa_text", "healthqa_br": "healthqa_br",
             **{slug: slug for slug in SYNT}}


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def file_sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def need(path: Path) -> None:
    if not path.exists():
        pytest.skip(f"{path} is absent (../shared)")


def load(data: Path, slug: str, args=(), compat="default"):
    bench = BENCHMARKS[slug]
    return bench, bench.instance_builder(compat, args)(resolve_files(bench, data, download=False))


def write_all(data: Path) -> None:
    write_sct(data)
    write_medxpert(data)
    write_healthqa(data)
    for slug in SYNT:
        write_synt(data, slug)


def expected_prompts() -> dict[str, list[str]]:
    """Each benchmark's prompts, instance by instance, rendered from the spec independently of the package."""
    return {
        "sct_bench": [sct_expected("medhelm08_sct_bench.txt", row) for row in SCT_ROWS[:3]],
        "medxpertqa": [medxpert_expected(medxpert_row(i, label)) for i, label in enumerate(MEDXPERT_LABELS)],
        "healthqa_br": [healthqa_expected(i) for i in range(3)],
        **{slug: [synt_expected(slug, q, c) for q, c, _ in synt_rows(slug)] for slug in SYNT},
    }


# ------------------------------------------------------------------------------------------ the catalogue
def test_the_six_are_registered_in_their_categories() -> None:
    places = {slug: (BENCHMARKS[slug].category, BENCHMARKS[slug].subcategory, BENCHMARKS[slug].access)
              for slug in SIX}
    assert places == {
        "sct_bench": ("clinical_decision_support", "Supporting Diagnostic Decisions", "public"),
        "medxpertqa": ("clinical_decision_support", "Providing Clinical Knowledge Support", "public"),
        "healthqa_br": ("clinical_decision_support", "Providing Clinical Knowledge Support", "public"),
        "synt_family_disclosure": ("administration_workflow", "Organizing Workflow Processes", "private"),
        "synt_right_of_access": ("administration_workflow", "Organizing Workflow Processes", "private"),
        "synt_written_consent": ("administration_workflow", "Organizing Workflow Processes", "private"),
    }
    assert {slug: (BENCHMARKS[slug].metric.name, BENCHMARKS[slug].max_tokens) for slug in SIX} == {
        "sct_bench": ("sct_score", 200), **{slug: ("exact_match", 1) for slug in SIX[1:]}}
    # each has its test module in the suite
    for slug in SIX:
        assert list(SUITE.rglob(f"test_{slug}.py")), slug


def test_the_template_is_pinned_data_in_its_shared_folder() -> None:
    [template] = [f for f in BENCHMARKS["sct_bench"].files if f.name == "sct_bench_scenario.py"]
    assert template.folder == "medhelm08_templates" and template.url.startswith("https://raw.githubusercontent.com/")
    assert "1becdd64a28da8572b4a0adfe3f7f0104cb7900d" in template.url
    assert template.sha256 == "f3184b1d4f498832760d4aeef4a3a14602fa4042af375032c5ac0f9f2a4957d3"
    if TEMPLATE_SOURCE.exists():  # the shared copy is the pinned file
        assert hashlib.sha256(TEMPLATE_SOURCE.read_bytes()).hexdigest() == template.sha256
    # never copied into the package: no line of the guideline is in its code
    package = Path(BENCHMARKS["sct_bench"].build_instances.__code__.co_filename).parents[2]
    for path in package.rglob("*.py"):
        assert "Script Concordance Testing" not in path.read_text(encoding="utf-8"), path


# ------------------------------------------------------------------------------------------ the prompts
@pytest.mark.parametrize("slug", SIX)
def test_prompts_are_the_forks_byte_for_byte(tmp_path: Path, slug: str) -> None:
    need(PROMPTS)
    need(TEMPLATE_SOURCE)
    write_all(tmp_path)
    bench, instances = load(tmp_path, slug)
    reference = (PROMPTS / f"medhelm08_{REFERENCE[slug]}.txt").read_text(encoding="utf-8")
    assert sha(bench.render_prompt(instances[0])) == sha(reference)
    assert [bench.render_prompt(i) for i in instances] == expected_prompts()[slug]


@pytest.mark.parametrize(("args", "compat"), [((("reason", "true"), ("few_shot", "true")), "default"),
                                              # medhelm's string flags: "False" switches both on
                                              ((("reason", "False"), ("few_shot", "False")), "medhelm"),
                                              ((("reason", "False"), ("few_shot", "False")), "helm")])
def test_sct_few_shot_reason_prompt_is_the_forks(tmp_path: Path, args, compat) -> None:
    need(PROMPTS)
    need(TEMPLATE_SOURCE)
    write_sct(tmp_path)
    bench, instances = load(tmp_path, "sct_bench", args, compat)
    reference = (PROMPTS / "medhelm08_sct_bench.few_shot_reason.txt").read_text(encoding="utf-8")
    assert sha(bench.render_prompt(instances[0])) == sha(reference)
    assert [bench.render_prompt(i) for i in instances] == [
        sct_expected("medhelm08_sct_bench.few_shot_reason.txt", row) for row in SCT_ROWS[:3]]
    assert instances[0].extra["helm_run"] == "sct_bench:reason=True,few_shot=True"


# ------------------------------------------------------------------------------------------ bad files
@pytest.mark.parametrize("slug", list(SYNT))
def test_synt_bad_label_names_file_and_row(tmp_path: Path, slug: str) -> None:
    rows = synt_rows(slug)
    rows[1] = (rows[1][0], rows[1][1], "D")
    write_synt(tmp_path, slug, rows)
    with pytest.raises(DataError) as err:
        load(tmp_path, slug)
    assert f"{slug}/{slug}.csv, row 2 (line 3)" in str(err.value) and "got 'D'" in str(err.value)


def test_synt_repeated_prompt_keeps_first_place_and_last_label(tmp_path: Path) -> None:
    slug = "synt_written_consent"
    rows = synt_rows(slug)
    write_synt(tmp_path, slug, [*rows, (rows[0][0], rows[0][1], "A")])
    _, instances = load(tmp_path, slug)
    assert [i.expected for i in instances] == ["A", "B", "A"] and sum(instances.removed.values()) == 1


def test_synt_missing_file_says_what_to_put_where(tmp_path: Path) -> None:
    from pytest_medhelm.data.errors import DataMissing

    with pytest.raises(DataMissing) as err:
        load(tmp_path, "synt_right_of_access")
    text = str(err.value)
    assert "synt_right_of_access/synt_right_of_access.csv" in text
    assert "Synthetic example row: prompt,context,label" in text


def test_medxpert_bad_rows_name_file_and_line(tmp_path: Path) -> None:
    write_medxpert(tmp_path)
    path = tmp_path / "medxpertqa" / "test.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[1] = json.dumps({**json.loads(lines[1]), "label": "K"})
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"test.jsonl, line 2: 'label' 'K' is not one of the option letters"):
        load(tmp_path, "medxpertqa")
    lines[1] = json.dumps({"question": "q", "label": "A"})
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"line 2: missing key 'options'"):
        load(tmp_path, "medxpertqa")


def test_healthqa_bad_row_names_file_and_row(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "healthqa_br").mkdir()
    pq.write_table(pa.Table.from_pylist([{"question": "x\n'A': 'um'", "answer": None}]),
                   tmp_path / "healthqa_br" / "healthqa-br.parquet")
    with pytest.raises(DataError, match=r"healthqa-br.parquet, row 1: 'question' and 'answer' must be strings"):
        load(tmp_path, "healthqa_br")


def test_healthqa_parsing_quirks(tmp_path: Path) -> None:
    # a repeated letter keeps its last text; an apostrophe ends an option early
    assert split_question("Q?\n'A': 'one'\n'B': 'd'água'\n'A': 'three'") == ("Q?", {"A": "three", "B": "d"})
    assert split_question("Q only") == ("Q only", {})


# ------------------------------------------------------------------------------------------ fuzz: HealthQA-BR's parser
FUZZED: Counter = Counter()


_report_inputs = figures_reported(FUZZED, lambda fuzzed: "\nHealthQA-BR question parser fuzz (measured): "
                                  + ", ".join(f"{count} {what}" for what, count in sorted(fuzzed.items())))


@fuzz(300)
@given(st.text())
def test_fuzz_any_question_cell_parses_without_error(text: str) -> None:
    FUZZED["arbitrary cells"] += 1
    statement, options = split_question(text)
    assert isinstance(statement, str) and all(len(k) == 1 and k.isupper() for k in options)


_OPTION_TEXT = st.text(alphabet=st.characters(blacklist_characters="'\n\r", blacklist_categories=("Cs",)),
                       min_size=1).filter(lambda t: t.strip() == t)


@fuzz(300)
@given(statement=st.text(alphabet=st.characters(blacklist_characters="'", blacklist_categories=("Cs",))),
       options=st.dictionaries(st.sampled_from("ABCDEFGH"), _OPTION_TEXT, min_size=1, max_size=8))
def test_fuzz_written_options_are_read_back(statement: str, options: dict[str, str]) -> None:
    FUZZED["written questions"] += 1
    cell = statement + "".join(f"\n'{letter}': '{text}'" for letter, text in options.items())
    assert split_question(cell) == (statement.strip(), options)


# ------------------------------------------------------------------------------------------ the arguments
@pytest.mark.parametrize(("args", "message"), [
    (["--medhelm-benchmark-args", "sct_bench:reason=perhaps"],
     "sct_bench:reason='perhaps': expected true or false (sct_bench takes reason: "),
    (["--medhelm-benchmark-args", "sct_bench:shots=5"], "sct_bench takes the arguments reason and few_shot, not shots"),
    (["--medhelm-benchmark-args", "medqa:x=1"], "medqa: this benchmark takes no arguments"),
    (["--medhelm-benchmark-args", "nope:x=1"], "'nope': unknown benchmark"),
    (["--medhelm-benchmark-args", "sct_bench"], "expected SLUG:NAME=VALUE[,NAME=VALUE]"),
])
def test_bad_benchmark_args_are_usage_errors(pytester: pytest.Pytester, args, message) -> None:
    result = pytester_runs.run(pytester, "--medhelm-model", "openai/m", *args)
    assert result.ret == 4, result.stdout.str() + result.stderr.str()
    assert message in result.stdout.str() + result.stderr.str()


def test_benchmark_args_from_the_ini_file(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nmedhelm_benchmark_args =\n    sct_bench:few_shot=maybe\n")
    result = pytester_runs.run(pytester, "--medhelm-model", "openai/m")
    assert result.ret == 4
    text = result.stdout.str() + result.stderr.str()
    assert "ini key medhelm_benchmark_args" in text and "sct_bench:few_shot='maybe': expected true or false" in text
    # the same value under --medhelm-compat medhelm is medhelm's string flag: on, no error
    assert pytester_runs.run(pytester, "--medhelm-model", "openai/m", "--medhelm-compat", "medhelm",
                             "--collect-only").ret in (0, 5)


# ------------------------------------------------------------------------------------------ end to end
def answers(body: dict) -> str:
    """SCT: always +1; the multiple-choice benchmarks: always A."""
    prompt = body["messages"][-1]["content"]
    return "Rating: +1\nBecause the finding fits." if "Script Concordance" in prompt else "A"


#: by hand: the test server's answers against the fixtures' gold answers
EXPECTED_MEANS = {
    "sct_bench": (0.4 + 0 + 0) / 3,  # +1 on panels (0,0,1,4,10), (3,6,1,0,0), (2,2,2,0,0)
    "medxpertqa": 1 / 3,  # gold C, A, J
    "healthqa_br": 0.0,  # gold B, D, E
    "synt_family_disclosure": 2 / 3,  # gold A, B, A
    "synt_right_of_access": 1 / 3,  # gold C, A, B
    "synt_written_consent": 1 / 3,  # gold B, B, A
}


@pytest.mark.e2e
@pytest.mark.parametrize("xdist", [pytest.param(["-p", "no:xdist"], id="serial"),
                                   pytest.param(["-n", "2"], id="xdist", marks=pytest.mark.e2e)])
def test_the_six_run_end_to_end(pytester: pytest.Pytester, xdist) -> None:
    need(TEMPLATE_SOURCE)
    data = pytester.mkdir("data")
    write_all(data)
    out = pytester.path / "r.json"
    selection = [arg for slug in SIX for arg in ("--medhelm-benchmark", slug)]
    with running_server(answer="A") as server:
        server.set_answer(answers)
        result = pytester_runs.run(pytester, str(SUITE), "--medhelm-model", "openai/writer", "--medhelm-api-base",
                                   server.url, "--medhelm-data-dir", str(data), *selection, "--medhelm-json", str(out),
                                   *xdist, subprocess=True)
        sent = server.count
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert sent == 18  # 3 instances each, one request per item
    report = json.loads(out.read_text())
    means = {b["benchmark" if "benchmark" in b else "slug"]: b for b in report["benchmarks"]}
    assert {slug: (row["n"], row["n_errors"]) for slug, row in means.items()} == {slug: (3, 0) for slug in SIX}
    assert {slug: row["mean"] for slug, row in means.items()} == pytest.approx(EXPECTED_MEANS)
    # every prompt sent is the one rendered independently from the spec
    expected = {slug: {sha(p) for p in prompts} for slug, prompts in expected_prompts().items()}
    got: dict[str, set[str]] = {}
    for record in report["instances"]:
        got.setdefault(record["benchmark"], set()).add(record["prompt_sha256"])
    assert got == expected
    sct = {r["instance_id"]: r for r in report["instances"] if r["benchmark"] == "sct_bench"}
    assert {i: (r["score"], r["metrics"]["sct_expert_set_membership"]) for i, r in sct.items()} == {
        "sct-0": (pytest.approx(0.4), 1.0), "sct-1": (0.0, 0.0), "sct-2": (0.0, 0.0)}
    # the public files with no pinned sha256 are recorded as used unverified (the pinned template is verified)
    assert {slug: {name: entry["actual"] for name, entry in files.items() if entry["expected"] is None}
            for slug, files in report["run"]["data_unverified"].items()} == {
        "healthqa_br": {"healthqa-br.parquet": file_sha(data / "healthqa_br" / "healthqa-br.parquet")},
        "medxpertqa": {"test.jsonl": file_sha(data / "medxpertqa" / "test.jsonl")},
        "sct_bench": {"sct_cleaned_full.csv": file_sha(data / "sct_bench" / "sct_cleaned_full.csv")},
    }
    assert report["run"]["filtered"]["sct_bench"] == {
        "a row with an empty sct_stem, question or additional_info (medhelm skips these rows)": 1}


@pytest.mark.e2e
def test_sct_variant_through_the_option_and_the_forks_flags(pytester: pytest.Pytester) -> None:
    need(TEMPLATE_SOURCE)
    need(PROMPTS)
    data = pytester.mkdir("data")
    write_sct(data)
    out = pytester.path / "r.json"
    with running_server(answer="Rating: -2") as server:
        result = pytester_runs.run(pytester, str(SUITE), "-p", "no:xdist", "--medhelm-model", "openai/writer",
                                   "--medhelm-api-base", server.url, "--medhelm-data-dir", str(data),
                                   "--medhelm-benchmark", "sct_bench", "--medhelm-compat", "medhelm",
                                   "--medhelm-benchmark-args", "sct_bench:reason=False,few_shot=False",
                                   "--medhelm-json", str(out), subprocess=True)
    assert result.ret == 0, result.stdout.str()[-3000:]
    report = json.loads(out.read_text())
    expected = {sha(sct_expected("medhelm08_sct_bench.few_shot_reason.txt", row)) for row in SCT_ROWS[:3]}
    assert {r["prompt_sha256"] for r in report["instances"]} == expected
    assert report["run"]["options"]["benchmark_args"] == [["sct_bench", [["reason", "False"], ["few_shot", "False"]]]]
    # -2 on the three panels: 0/10, 3/6, 2/2
    [bench] = report["benchmarks"]
    assert bench["mean"] == pytest.approx((0 + 0.5 + 1) / 3)


def test_list_and_tree_show_the_six_with_their_data(pytester: pytest.Pytester, monkeypatch) -> None:
    monkeypatch.setenv("MEDHELM_DATA_HOME", str(pytester.mkdir("empty-cache")))
    data = pytester.mkdir("data")
    write_medxpert(data)
    write_healthqa(data)
    for slug in SYNT:
        write_synt(data, slug)
    listed = pytester_runs.run(pytester, "--medhelm-list", "--medhelm-data-dir", str(data))
    assert listed.ret == 0
    rows = {line.split()[0]: line for line in listed.stdout.lines if line.split() and line.split()[0] in SIX}
    assert set(rows) == set(SIX)
    assert rows["healthqa_br"].rstrip().endswith("yes     3 (1 filtered)")
    assert rows["synt_right_of_access"].rstrip().endswith("yes     3")
    assert rows["sct_bench"].rstrip().endswith("no      -")  # no CSV, no template in this data dir
    tree = pytester_runs.run(pytester, "--medhelm-tree", "--medhelm-data-dir", str(data)).stdout.str()
    block = tree[tree.index("Organizing Workflow Processes"):tree.index("Care Coordination and Planning")]
    for slug in SYNT:
        assert f"{slug}  " in block and "data: yes" in block.split(slug, 1)[1].splitlines()[0]
    block = tree[tree.index("Supporting Diagnostic Decisions"):tree.index("Planning Treatments")]
    assert "sct_bench" in block
