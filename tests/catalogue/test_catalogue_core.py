"""The five closed-ended public benchmarks: loaders, prompts, metrics, and errors on malformed files. (Their
metrics by hand: tests/metrics/test_exact_match.py, test_medcalc.py, test_medec.py.)

Real data is read from ``../shared/data`` beside the repository when it exists (skipped otherwise); everything
else runs on small synthetic files written to ``tmp_path``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from catalogue_helpers import (
    BENCHMARKS,
    REAL_DATA,
    assert_missing_column,
    check_real_count_and_reference_prompt,
    csv_text,
    load,
    loaded,
    write,
)

from pytest_medhelm.catalogue.taxonomy import CATEGORY_BY_SLUG
from pytest_medhelm.data.errors import DataError, DataMissing
from pytest_medhelm.data.readers import data_file
from pytest_medhelm.data.sources import resolve_files

REAL_COUNTS = {"pubmedqa": 1000, "medcalc_bench": 1047, "headqa": 2675, "medbullets": 308, "medec": 597}

SUBCATEGORIES = {
    "pubmedqa": ("medical_research", "Conducting Literature Research"),
    "medcalc_bench": ("clinical_decision_support", "Supporting Diagnostic Decisions"),
    "headqa": ("clinical_decision_support", "Providing Clinical Knowledge Support"),
    "medbullets": ("clinical_decision_support", "Providing Clinical Knowledge Support"),
    "medec": ("clinical_decision_support", "Planning Treatments"),
}


# --------------------------------------------------------------------------------------------------------------
# Definitions


@pytest.mark.parametrize("slug", sorted(REAL_COUNTS))
def test_definition_metadata(slug: str) -> None:
    benchmark = BENCHMARKS[slug]
    category, subcategory = SUBCATEGORIES[slug]
    assert benchmark.category == category and category in CATEGORY_BY_SLUG
    assert benchmark.subcategory == subcategory
    assert (benchmark.access, benchmark.kind) == ("public", "closed")
    assert benchmark.stop == ()  # HELM: stop_sequences=[] for these runs, hard-coded [] for multiple choice
    downloadable = [f for f in benchmark.files if not f.optional]
    assert downloadable and all(f.url.startswith("https://") and len(f.sha256) == 64 for f in downloadable)
    expected_tokens = {"medcalc_bench": 10, "medec": 256}.get(slug, 1)
    assert benchmark.max_tokens == expected_tokens


def test_metric_names() -> None:
    names = {slug: BENCHMARKS[slug].metric.name for slug in REAL_COUNTS}
    assert names == {
        "pubmedqa": "exact_match",
        "headqa": "exact_match",
        "medbullets": "exact_match",
        "medcalc_bench": "medcalc_bench_accuracy",
        "medec": "medec_error_flag_accuracy",
    }


# --------------------------------------------------------------------------------------------------------------
# (a) Real data: counts, and HELM's prompt byte for byte


@pytest.mark.parametrize("slug", sorted(REAL_COUNTS))
def test_real_data_count_and_reference_prompt(slug: str) -> None:
    # Each reference prompt is the first instance of HELM's sample: that pins the order of the instance list
    check_real_count_and_reference_prompt(slug, REAL_COUNTS[slug])


def test_real_medcalc_categories_are_those_of_v1_0() -> None:
    if not (REAL_DATA / "medcalc_bench").is_dir():
        pytest.skip("no real MedCalc-Bench data")
    categories = {}
    for instance in load("medcalc_bench", REAL_DATA):
        categories[instance.extra["category"]] = categories.get(instance.extra["category"], 0) + 1
    assert categories == {
        "lab": 327, "risk": 240, "physical": 240, "severity": 80, "diagnosis": 60, "date": 60, "dosage": 40,
    }


def test_real_medec_references() -> None:
    if not (REAL_DATA / "medec").is_dir():
        pytest.skip("no real MEDEC data")
    instances = load("medec", REAL_DATA)
    with_error = [i for i in instances if i.extra["error_flag"] == 1]
    assert (len(with_error), len(instances) - len(with_error)) == (311, 286)
    assert all(i.references[0].startswith(f"{i.extra['error_sentence_id']} ") for i in with_error)
    assert all("\r" not in i.input for i in instances)


#: what the loaders' filters remove on the real data (counted, never silent)
REAL_REMOVED = {
    "headqa": {"question with an image (HELM keeps the text-only questions)": 67},
    "medec": {"empty padding row (no 'Sentences'; HELM skips it)": 328},
}


@pytest.mark.parametrize("slug", sorted(REAL_REMOVED))
def test_real_data_removed_is_counted(slug: str) -> None:
    if not (REAL_DATA / slug).is_dir():
        pytest.skip(f"no real data for {slug}")
    result = loaded(slug, REAL_DATA)
    assert result.removed == REAL_REMOVED[slug]
    assert len(result) == REAL_COUNTS[slug]


# --------------------------------------------------------------------------------------------------------------
# (b) Synthetic files: loader, prompt shape, metric


def test_pubmedqa_synthetic(tmp_path: Path) -> None:
    data = {
        "111": {
            "QUESTION": "Does X help?",
            "CONTEXTS": ["First paragraph.", "Second paragraph."],
            "LABELS": ["BACKGROUND", "RESULTS"],
            "final_decision": "no",
            "YEAR": "2001",
        },
        "222": {"QUESTION": "Is Y safe?", "CONTEXTS": ["Only."], "LABELS": ["METHODS"], "final_decision": "maybe"},
    }
    write(tmp_path, "pubmedqa", "ori_pqal.json", json.dumps(data))
    first, second = load("pubmedqa", tmp_path)
    assert (first.id, second.id) == ("111", "222")  # file order
    assert first.choices == ("yes", "no", "maybe") and first.correct == 1 and second.correct == 2
    assert BENCHMARKS["pubmedqa"].render_prompt(first) == (
        "Answer A for yes, B for no or C for maybe. Do not include any explanation or additional text. "
        "Output only the letter on a single line.\n\n"
        "Question: Context: Background. First paragraph.\nResults. Second paragraph.\n\n"
        "Question: Does X help?\n\n"
        "A. yes\nB. no\nC. maybe\nAnswer:"
    )
    metric = BENCHMARKS["pubmedqa"].metric
    assert metric.score("B", first).value == 1.0
    assert metric.score("A", first).value == 0.0


MEDCALC_HEADER = [
    "Row Number", "Calculator ID", "Calculator Name", "Category", "Output Type", "Note ID", "Note Type",
    "Patient Note", "Question", "Relevant Entities", "Ground Truth Answer", "Lower Limit", "Upper Limit",
    "Ground Truth Explanation",
]


def medcalc_row(number: str, category: str, gold: str, lower: str, upper: str, note: str = "A note.") -> list[str]:
    return [number, "1", "Calc", category, "decimal", "n1", "Extracted", note, "What is the value?", "{}", gold,
            lower, upper, "because"]


def test_medcalc_synthetic(tmp_path: Path) -> None:
    rows = [
        medcalc_row("7", "lab", "25.2", "24", "26", note='A 70-year-old, "frail",\nwoman.'),
        medcalc_row("8", "date", "09/23/2014", "09/23/2014", "09/23/2014"),
    ]
    write(tmp_path, "medcalc_bench", "test_data.csv", csv_text(MEDCALC_HEADER, rows))
    lab, date = load("medcalc_bench", tmp_path)
    assert (lab.id, date.id) == ("7", "8")
    assert lab.extra["category"] == "lab" and lab.extra["lower_limit"] == "24" and lab.references == ("25.2",)
    assert BENCHMARKS["medcalc_bench"].render_prompt(lab) == (
        "Given a patient note and a clinical question, compute the requested medical value.\n\n"
        'Patient note: A 70-year-old, "frail",\nwoman.\n\nQuestion: What is the value?\n\n'
        "Answer only the requested quantity without units. No explanation needed:"
    )
    metric = BENCHMARKS["medcalc_bench"].metric
    assert metric.score(" 25 ", lab).value == 1.0
    assert metric.score("25", lab, compat="helm").value == 0.0
    assert metric.score("09/23/2014", date).value == 1.0


def headqa_exam(name: str, year: str, questions: list[dict]) -> dict:
    return {"name": name, "category": "medicine", "year": year, "data": questions}


def headqa_question(qid: str, text: str, ra: str, image: str = "") -> dict:
    answers = [{"aid": k, "atext": f"option {k}"} for k in range(1, 5)]
    return {"qid": qid, "qtext": text, "ra": ra, "answers": answers, "image": image}


def test_headqa_synthetic_reads_test_years_of_the_full_file(tmp_path: Path) -> None:
    exams = {
        "Cuaderno_2015_1_M": headqa_exam("Cuaderno_2015_1_M", "2015", [headqa_question("1", "Old?", "1")]),
        "Cuaderno_2016_1_M": headqa_exam(
            "Cuaderno_2016_1_M",
            "2016",
            [headqa_question("1", "Image?", "1", image="images/a.jpg"), headqa_question("2", " Which? ", "3")],
        ),
        "Cuaderno_2017_1_B": headqa_exam("Cuaderno_2017_1_B", "2017", [headqa_question("5", "Last?", "4")]),
    }
    write(tmp_path, "headqa", "HEAD_EN.json", json.dumps({"version": "1.0", "language": "en", "exams": exams}))
    result = loaded("headqa", tmp_path)
    which, last = result
    assert (which.id, last.id) == ("2016_1_M-2", "2017_1_B-5")
    # the image question is removed and counted; the 2015 exam is another split, not a removal
    assert result.removed == {"question with an image (HELM keeps the text-only questions)": 1}
    assert which.input == "Which?" and which.correct == 2 and last.correct == 3
    assert BENCHMARKS["headqa"].render_prompt(which).endswith(
        "(A, B, C, or D).\n\nQuestion: Which?\nA. option 1\nB. option 2\nC. option 3\nD. option 4\nAnswer:"
    )
    assert BENCHMARKS["headqa"].metric.score("C", which).value == 1.0


def test_headqa_upstream_test_file_stands_in_for_the_full_file(tmp_path: Path) -> None:
    exams = {"Cuaderno_2016_1_M": headqa_exam("Cuaderno_2016_1_M", "2016", [headqa_question("9", "Q?", "2")])}
    write(tmp_path, "headqa", "test_HEAD_EN.json", json.dumps({"exams": exams}))
    files = resolve_files(BENCHMARKS["headqa"], tmp_path, download=False)
    assert list(files) == ["test_HEAD_EN.json"]
    (only,) = BENCHMARKS["headqa"].build_instances(files)
    assert only.id == "2016_1_M-9" and only.correct == 1


def test_headqa_without_any_file_names_the_pinned_one(tmp_path: Path) -> None:
    with pytest.raises(DataMissing, match="HEAD_EN.json"):
        resolve_files(BENCHMARKS["headqa"], tmp_path, download=False)


MEDBULLETS_HEADER = ["link", "question", "opa", "opb", "opc", "opd", "ope", "answer_idx", "answer", "explanation"]


def test_medbullets_synthetic(tmp_path: Path) -> None:
    rows = [
        ["https://step2.medbullets.com/testview?qid=108992", "A man, 64.\nWhat next?", "a", "b", "c", "d", "e",
         "E", "e", "why"],
        ["https://bit.ly/47KxMQs", "Second?", "a", "b", "c", "d", "e", "A", "a", "why"],
    ]
    write(tmp_path, "medbullets", "medbullets_op5.csv", csv_text(MEDBULLETS_HEADER, rows, newline="\r\n"))
    first, second = load("medbullets", tmp_path)
    assert (first.id, second.id) == ("108992", "47KxMQs")
    assert first.choices == ("a", "b", "c", "d", "e") and first.correct == 4
    assert BENCHMARKS["medbullets"].render_prompt(first).endswith(
        "(A, B, C, D, or E).\n\nClinical Scenario: A man, 64.\nWhat next?\nA. a\nB. b\nC. c\nD. d\nE. e\nAnswer:"
    )
    assert BENCHMARKS["medbullets"].metric.score("E", first).value == 1.0


MEDEC_HEADER = [
    "Text ID", "Text", "Sentences", "Error Flag", "Error Type", "Error Sentence ID", "Error Sentence",
    "Corrected Sentence", "Corrected Text",
]


def test_medec_synthetic(tmp_path: Path) -> None:
    rows = [
        ["ms-test-0", "t", "0 A man.\r\n1 Given aspirin.\r\n", "1", "treatment", "1", "Given aspirin.",
         "Given heparin.", "t2"],
        ["ms-test-1", "t", "0 A woman.", "0", "NA", "-1", "NA", "NA", "NA"],
        [""] * 9,  # upstream pads the file with empty rows; HELM skips them
    ]
    write(tmp_path, "medec", "MEDEC-MS-TestSet-with-GroundTruth-and-ErrorType.csv",
          csv_text(MEDEC_HEADER, rows, newline="\r\n"))
    result = loaded("medec", tmp_path)
    assert result.removed == {"empty padding row (no 'Sentences'; HELM skips it)": 1}
    error, correct = result
    # HELM opens the CSV with universal newlines: the "\r\n" inside a note becomes "\n"; then .strip()
    assert error.input == "0 A man.\n1 Given aspirin."
    assert error.references == ("1 Given heparin.",) and error.extra["error_sentence_id"] == 1
    assert correct.references == ("CORRECT",) and correct.extra["error_sentence_id"] is None
    assert BENCHMARKS["medec"].render_prompt(error).endswith(
        "and a corrected version of the sentence.\n\nClinical Note: 0 A man.\n1 Given aspirin.\nAnswer:"
    )
    metric = BENCHMARKS["medec"].metric
    score = metric.score("1 Given heparin.", error)
    assert score.value == 1.0 and score.extra["medec_error_sentence_accuracy"] == 1.0


# --------------------------------------------------------------------------------------------------------------
# (d) Malformed files: a DataError naming the file, the place and what was expected


def test_truncated_json_names_file_and_position(tmp_path: Path) -> None:
    path = write(tmp_path, "pubmedqa", "ori_pqal.json", '{"111": {"QUESTION": "Does X help?", "CONT')
    with pytest.raises(DataError) as info:
        load("pubmedqa", tmp_path)
    assert info.value.path == str(path)
    assert info.value.where.startswith("line 1, column ")
    assert "invalid JSON" in str(info.value) and str(path) in str(info.value)


def test_missing_json_key_names_the_record(tmp_path: Path) -> None:
    path = write(tmp_path, "pubmedqa", "ori_pqal.json",
                 json.dumps({"111": {"QUESTION": "q", "CONTEXTS": ["c"], "LABELS": ["L"]}}))
    with pytest.raises(DataError) as info:
        load("pubmedqa", tmp_path)
    assert (info.value.path, info.value.where) == (str(path), "key '111'")
    assert "'final_decision'" in info.value.problem


def test_json_record_of_the_wrong_type(tmp_path: Path) -> None:
    write(tmp_path, "pubmedqa", "ori_pqal.json", json.dumps({"111": ["not", "an", "object"]}))
    with pytest.raises(DataError, match="key '111'.*expected an object"):
        load("pubmedqa", tmp_path)


def test_missing_csv_column_names_it(tmp_path: Path) -> None:
    header = [c for c in MEDCALC_HEADER if c != "Upper Limit"]
    row = medcalc_row("1", "lab", "1", "1", "1")
    del row[MEDCALC_HEADER.index("Upper Limit")]
    path = write(tmp_path, "medcalc_bench", "test_data.csv", csv_text(header, [row]))
    assert_missing_column("medcalc_bench", tmp_path, path, "Upper Limit")


def test_short_csv_row_names_row_and_line(tmp_path: Path) -> None:
    rows = [medcalc_row("1", "lab", "1", "1", "1", note="two\nlines"), ["2", "1", "Calc"]]
    write(tmp_path, "medcalc_bench", "test_data.csv", csv_text(MEDCALC_HEADER, rows))
    with pytest.raises(DataError) as info:
        load("medcalc_bench", tmp_path)
    # the first record spans lines 2-3, so the second starts on line 4
    assert info.value.where == "row 2 (line 4)"
    assert "expected 14 fields" in info.value.problem


EMPTY_FILES = {
    "pubmedqa": "ori_pqal.json",
    "medcalc_bench": "test_data.csv",
    "headqa": "HEAD_EN.json",
    "medbullets": "medbullets_op5.csv",
    "medec": "MEDEC-MS-TestSet-with-GroundTruth-and-ErrorType.csv",
}


@pytest.mark.parametrize("slug", sorted(EMPTY_FILES))
def test_empty_file(tmp_path: Path, slug: str) -> None:
    path = write(tmp_path, slug, EMPTY_FILES[slug], "")
    with pytest.raises(DataError) as info:
        load(slug, tmp_path)
    assert info.value.path == str(path) and "empty" in info.value.problem


def test_header_only_csv(tmp_path: Path) -> None:
    write(tmp_path, "medbullets", "medbullets_op5.csv", csv_text(MEDBULLETS_HEADER, []))
    with pytest.raises(DataError, match="no data rows"):
        load("medbullets", tmp_path)


def test_wrong_encoding_gives_byte_offset(tmp_path: Path) -> None:
    text = csv_text(MEDBULLETS_HEADER, [["l", "Caf\u00e9?", "a", "b", "c", "d", "e", "A", "a", "x"]])
    path = write(tmp_path, "medbullets", "medbullets_op5.csv", text.encode("latin-1"))
    offset = text.encode("latin-1").index(b"\xe9")
    with pytest.raises(DataError) as info:
        load("medbullets", tmp_path)
    assert info.value.path == str(path)
    assert info.value.where == f"byte {offset} (line 2)"
    assert "UTF-8" in info.value.problem


def test_medbullets_bad_answer_letter(tmp_path: Path) -> None:
    rows = [["l1", "q", "a", "b", "c", "d", "e", "A", "a", "x"], ["l2", "q", "a", "b", "c", "d", "e", "F", "a", "x"]]
    write(tmp_path, "medbullets", "medbullets_op5.csv", csv_text(MEDBULLETS_HEADER, rows))
    with pytest.raises(DataError, match=r"row 2 \(line 3\).*answer_idx"):
        load("medbullets", tmp_path)


def test_medec_bad_error_flag(tmp_path: Path) -> None:
    rows = [["ms-test-0", "t", "0 x", "yes", "NA", "-1", "NA", "NA", "NA"]]
    write(tmp_path, "medec", "MEDEC-MS-TestSet-with-GroundTruth-and-ErrorType.csv", csv_text(MEDEC_HEADER, rows))
    with pytest.raises(DataError, match=r"row 1 \(line 2\).*'Error Flag'"):
        load("medec", tmp_path)


def test_headqa_right_answer_not_among_options(tmp_path: Path) -> None:
    exams = {"Cuaderno_2016_1_M": headqa_exam("Cuaderno_2016_1_M", "2016", [headqa_question("1", "Q?", "7")])}
    write(tmp_path, "headqa", "HEAD_EN.json", json.dumps({"exams": exams}))
    with pytest.raises(DataError, match=r"exam 'Cuaderno_2016_1_M', question 1: the right answer ra=7"):
        load("headqa", tmp_path)


def test_headqa_missing_exams_key(tmp_path: Path) -> None:
    write(tmp_path, "headqa", "HEAD_EN.json", json.dumps({"version": "1.0"}))
    with pytest.raises(DataError, match="top level.*'exams'"):
        load("headqa", tmp_path)


def test_loader_without_its_file_is_data_missing() -> None:
    with pytest.raises(DataMissing, match="ori_pqal.json"):
        BENCHMARKS["pubmedqa"].build_instances({})
    with pytest.raises(DataMissing):
        data_file({}, "x.csv")


