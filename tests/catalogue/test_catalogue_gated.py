"""The 21 gated and private benchmarks: loaders, prompts and metrics on small synthetic files, the skip reason when
the data is absent, errors on malformed files. (The ICD-10 billing metric itself: tests/metrics/test_icd10.py.)

Everything here is synthetic (made-up notes, no patient data). Every expected prompt is written out by hand from
HELM's scenario sources, not computed with the module's code.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import numpy as np
import pytest
from catalogue_helpers import BENCHMARKS, assert_missing_column, csv_text, load, loaded, write

from pytest_medhelm.catalogue.taxonomy import CATEGORY_BY_SLUG
from pytest_medhelm.data.errors import DataError, DataMissing
from pytest_medhelm.data.sources import resolve_files
from pytest_medhelm.values import Instance

GATED = ("ehrshot", "medalign", "dischargeme", "mimic_rrs", "mimic_bhc", "n2c2_ct", "mimic_billing")
PRIVATE = (
    "clear", "noteextract", "patientinstruct", "medconfinfo", "mentalhealth", "privacydetection", "proxysender",
    "bmt_status", "adhd_behavior", "adhd_medeffects", "hospicereferral", "clinicreferral", "cdi_qa", "ent_referral",
)
OPEN = ("medalign", "dischargeme", "mimic_rrs", "mimic_bhc", "noteextract", "patientinstruct", "mentalhealth")

PLACES = {
    "ehrshot": ("clinical_decision_support", "Predicting Patient Risks and Outcomes"),
    "medalign": ("clinical_decision_support", "Providing Clinical Knowledge Support"),
    "clear": ("clinical_decision_support", "Supporting Diagnostic Decisions"),
    "adhd_behavior": ("clinical_decision_support", "Providing Clinical Knowledge Support"),
    "adhd_medeffects": ("clinical_decision_support", "Providing Clinical Knowledge Support"),
    "dischargeme": ("clinical_note_generation", "Documenting Patient Visits"),
    "mimic_bhc": ("clinical_note_generation", "Documenting Patient Visits"),
    "mimic_rrs": ("clinical_note_generation", "Documenting Diagnostic Reports"),
    "noteextract": ("clinical_note_generation", "Documenting Care Plans"),
    "patientinstruct": ("patient_communication", "Delivering Personalized Care Instructions"),
    "medconfinfo": ("patient_communication", "Patient-Provider Messaging"),
    "privacydetection": ("patient_communication", "Patient-Provider Messaging"),
    "proxysender": ("patient_communication", "Patient-Provider Messaging"),
    "mentalhealth": ("patient_communication", "Facilitating Patient Engagement and Support"),
    "bmt_status": ("medical_research", "Recording Research Processes"),
    "n2c2_ct": ("medical_research", "Managing Research Enrollment"),
    "hospicereferral": ("administration_workflow", "Scheduling Resources and Staff"),
    "mimic_billing": ("administration_workflow", "Overseeing Financial Activities"),
    "clinicreferral": ("administration_workflow", "Organizing Workflow Processes"),
    "cdi_qa": ("administration_workflow", "Care Coordination and Planning"),
    "ent_referral": ("administration_workflow", "Care Coordination and Planning"),
}
MAX_TOKENS = {
    "medalign": 256, "dischargeme": 300, "mimic_rrs": 128, "mimic_bhc": 1024, "noteextract": 768,
    "patientinstruct": 256, "mentalhealth": 512, "mimic_billing": 256,
}

CLEAR_CONDITIONS = (
    "alcohol_dependence", "attention_deficit_hyperactivity_disorder", "bipolar_disorder", "chronic_pain",
    "homelessness", "liver_disease", "major_depression", "personality_disorder", "post_traumatic_stress_disorder",
    "substance_use_disorder", "suicidal_behavior", "tobacco_dependence", "unemployment",
)

FAMILY_TAIL = (
    "Answer the question with a 'A' for yes or 'B' for no. Do not provide any additional details or response, "
    "just a simple A or B response."
)


# --------------------------------------------------------------------------------------------------------------
# Helpers


def prompt(slug: str, instance: Instance) -> str:
    return BENCHMARKS[slug].render_prompt(instance)


def score(slug: str, answer: str, instance: Instance, compat: str = "default") -> float:
    """The benchmark's score without judges: open-ended benchmarks are scored here by ROUGE-L, the secondary
    metric recorded beside the jury (the jury itself: tests/metrics/test_jury.py)."""
    metric = BENCHMARKS[slug].metric
    if BENCHMARKS[slug].is_judged:
        from pytest_medhelm.metrics.rouge import ROUGE_L

        metric = ROUGE_L
    return metric.score(answer, instance, compat).value


# --------------------------------------------------------------------------------------------------------------
# Definitions


def test_all_21_are_registered() -> None:
    assert set(GATED) | set(PRIVATE) <= set(BENCHMARKS)
    assert len(set(GATED) | set(PRIVATE)) == 21


@pytest.mark.parametrize("slug", sorted(PLACES))
def test_definition_metadata(slug: str) -> None:
    benchmark = BENCHMARKS[slug]
    category, subcategory = PLACES[slug]
    assert benchmark.category == category and category in CATEGORY_BY_SLUG
    assert benchmark.subcategory == subcategory
    assert benchmark.access == ("gated" if slug in GATED else "private")
    assert benchmark.kind == ("open" if slug in OPEN else "closed")
    assert benchmark.max_tokens == MAX_TOKENS.get(slug, 1)
    assert benchmark.stop == ()
    assert benchmark.files and all(f.url == "" and f.description for f in benchmark.files)
    assert "Synthetic example" in benchmark.data_help
    help_text = benchmark.data_help.lower()
    if slug in GATED:
        assert "gated" in help_text
    else:
        assert "private" in help_text and "your institution's own" in help_text


def test_metric_names() -> None:
    names = {slug: BENCHMARKS[slug].metric.name for slug in PLACES}
    for slug in OPEN:
        assert names[slug].endswith("_accuracy") and BENCHMARKS[slug].is_judged  # HELM's jury metric
    assert names["mimic_billing"] == "mimiciv_billing_code_f1"
    closed = set(PLACES) - set(OPEN) - {"mimic_billing"}
    assert {names[slug] for slug in closed} == {"exact_match"}


# --------------------------------------------------------------------------------------------------------------
# Missing data: the skip reason names the file and where to put it


@pytest.mark.parametrize("slug", sorted(PLACES))
def test_missing_data_names_file_and_path(tmp_path: Path, slug: str) -> None:
    benchmark = BENCHMARKS[slug]
    with pytest.raises(DataMissing) as info:
        resolve_files(benchmark, tmp_path, download=False)
    message = str(info.value)
    first = benchmark.files[0].name
    assert f"data file {first!r} not found" in message
    assert str(tmp_path / slug / first) in message
    assert benchmark.files[0].description in message
    assert "Synthetic example" in message


def test_missing_mimic_bhc_reason(tmp_path: Path) -> None:
    with pytest.raises(DataMissing) as info:
        resolve_files(BENCHMARKS["mimic_bhc"], tmp_path, download=False)
    message = str(info.value)
    assert message.startswith("mimic_bhc: data file 'mimic_iv_bhc.json' not found; expected at ")
    assert str(tmp_path / "mimic_bhc" / "mimic_iv_bhc.json") in message
    assert "PhysioNet" in message and "'input'" in message and "'target'" in message


def test_second_file_missing_is_named(tmp_path: Path) -> None:
    write(tmp_path, "mimic_rrs", "test.findings.tok", "the lungs are clear .\n")
    with pytest.raises(DataMissing, match=r"'test\.impression\.tok' not found"):
        resolve_files(BENCHMARKS["mimic_rrs"], tmp_path, download=False)


def test_loader_without_its_file_is_data_missing() -> None:
    with pytest.raises(DataMissing, match="medhelm-CDI-dataset_filtered.csv"):
        BENCHMARKS["cdi_qa"].build_instances({})


# --------------------------------------------------------------------------------------------------------------
# The SHC family (ten private CSVs)

SHC_FILES = {
    "medconfinfo": "medhelm-CONF-dataset_filtered.csv",
    "privacydetection": "medhelm-PRIVACY-dataset_filtered.csv",
    "proxysender": "medhelm-PROXY-dataset_filtered.csv",
    "bmt_status": "medhelm-BMT-dataset_filtered.csv",
    "adhd_behavior": "medhelm-PTBM-dataset_filtered.csv",
    "adhd_medeffects": "medhelm-SEI-dataset_filtered.csv",
    "hospicereferral": "medhelm-GIP-dataset_filtered.csv",
    "cdi_qa": "medhelm-CDI-dataset_filtered.csv",
    "clinicreferral": "medhelm-sequoia-dataset_filtered.csv",
    "ent_referral": "medhelm-ENT-dataset_filtered.csv",
}
SEI_DEFINITIONS = (
    "You are reviewing a clinical note from health records of children with attention deficit hyperactivity "
    "disorder (ADHD). Given the following definitions: side Effects Inquiry (SEI): Explicit documentation by the "
    "clinician asking about current side effects related to ADHD medications that the child is taking or "
    "documentation of specific ADHD medication side effects experienced by the patient. SEI does *not* include "
    "future side effects monitoring, such as documentation of potential ADHD medication side effects, including "
    "planning to follow patients to monitor side effects, explaining about potential side effects of an ADHD "
    "medication. These documentations are not categorized as SEI because they consist of a plan or an explanation "
    "about side effects without actual side effect monitoring taking place, and No Side Effects Inquiry (NSEI): No "
    "evidence of side effects monitoring. "
)
#: the prompt of the first row ("Q1?", "Synthetic note one.") as HELM sends it
SHC_EXPECTED = {
    "medconfinfo": "Answer A or B.\n\n: Provide an answer to the following question: Q1? with the following "
    "context: Synthetic note one. , " + FAMILY_TAIL + "\nA. A\nB. B\n:",
    "bmt_status": "Answer A or B.\n\n: Provide an answer to the following question: Q1? with the following "
    "context: Synthetic note one. , " + FAMILY_TAIL + "\nA. A\nB. B\n:",
    "hospicereferral": "Answer A or B.\n\n: Provide an answer to the following question: Q1? with the following "
    "context: Synthetic note one. , " + FAMILY_TAIL + "\nA. A\nB. B\n:",
    "cdi_qa": "Answer A or B.\n\n: Provide an answer to the following question: Q1? with the following context: "
    "Synthetic note one. , Answer the question with either 'A' for yes or 'B' for no. Do not provide any "
    "additional details or response, just a simple A or B response.\nA. A\nB. B\n:",
    "privacydetection": "Answer A or B.\n\n: You are reviewing clinical messages in order to determine if any "
    "confidential information was included. Please answer the following question: Q1? with the following "
    "context: Synthetic note one. , " + FAMILY_TAIL + "\nA. A\nB. B\n:",
    "proxysender": "Answer A, B, or C.\n\n: You are reviewing a clinical messages in order to determine if they "
    "have been sent by a proxy user. Please determine the following: Q1? with the following context: Synthetic "
    "note one. , " + FAMILY_TAIL + "\nA. A\nB. B\nC. C\n:",
    "adhd_behavior": "Answer A or B.\n\n: You are reviewing a clinical note from health records of children with "
    "attention deficit hyperactivity disorder (ADHD) and classifying mentions of behavioral therapy. Provide an "
    "answer to the following question: Q1? with the following context: Synthetic note one. , " + FAMILY_TAIL
    + "\nA. A\nB. B\n:",
    "adhd_medeffects": "Answer A or B.\n\n: " + SEI_DEFINITIONS + "Provide an answer to the following question: "
    "Q1? with the following context: Synthetic note one. , " + FAMILY_TAIL + "\nA. A\nB. B\n:",
    "clinicreferral": "Answer A or B.\n\n:  1 Provide an answer to the following question: Q1? with the following "
    "context: Synthetic note one. , " + FAMILY_TAIL + "\nA. A\nB. B\n:",
    "ent_referral": "Answer A, B, or C.\n\n: 1 Provide an answer to the following question: Q1? with the following "
    "context: Synthetic note one. , Answer the question with either 'A' for yes, 'B' for no, or 'C' for no "
    "mention. Do not provide any additional details or response, just a simple A, B, or C response.\nA. A\nB. B\n"
    "C. C\n:",
}


def shc_csv(slug: str, rows: list[list[str]]) -> str:
    question = "question" if slug == "clinicreferral" else "prompt"
    return csv_text([question, "context", "label", "extra"], [r + ["x"] for r in rows])


@pytest.mark.parametrize("slug", sorted(SHC_FILES))
def test_shc_family_loader_prompt_metric(tmp_path: Path, slug: str) -> None:
    rows = [["Q1?", "Synthetic note one.", "A"], ["Q2?", "Synthetic note,\nwith two lines.", "B"]]
    write(tmp_path, slug, SHC_FILES[slug], shc_csv(slug, rows))
    first, second = load(slug, tmp_path)
    assert (first.id, second.id) == ("row1", "row2")
    assert first.choices == (("A", "B", "C") if slug in ("proxysender", "ent_referral") else ("A", "B"))
    assert (first.correct, second.correct) == (0, 1)
    assert first.references == ("A",)
    assert prompt(slug, first) == SHC_EXPECTED[slug]
    assert "with the following context: Synthetic note,\nwith two lines. ," in prompt(slug, second)
    assert score(slug, "A", first) == 1.0
    assert score(slug, " B\n", second) == 1.0
    assert score(slug, "A.", first) == 0.0
    assert score(slug, "B", first) == 0.0


@pytest.mark.parametrize("slug", ["medconfinfo", "adhd_medeffects", "cdi_qa"])
def test_shc_dedup_by_prompt_keeps_first_place_and_last_label(tmp_path: Path, slug: str) -> None:
    rows = [
        ["Q1?", "Note one.", "A"],
        ["Q2?", "Note two.", "B"],
        ["Q1?", "Note one.", "B"],  # same prompt: HELM's dict keeps the place of row 1 and this label
        ["Q2?", "Note two.", "B"],
        ["Q3?", "Note three.", "A"],
    ]
    write(tmp_path, slug, SHC_FILES[slug], shc_csv(slug, rows))
    result = loaded(slug, tmp_path)
    assert [i.id for i in result] == ["row1", "row2", "row5"]
    assert result[0].correct == 1 and result[0].references == ("B",)
    assert sum(result.removed.values()) == 2
    assert any("another label" in reason for reason in result.removed)


def test_clinicreferral_counter_numbers_every_row(tmp_path: Path) -> None:
    rows = [["Same question?", "Same note.", "A"], ["Same question?", "Same note.", "B"]]
    write(tmp_path, "clinicreferral", SHC_FILES["clinicreferral"], shc_csv("clinicreferral", rows))
    first, second = load("clinicreferral", tmp_path)  # the counter keeps identical rows apart
    assert first.input.startswith(" 1 Provide an answer") and second.input.startswith(" 2 Provide an answer")
    assert (first.correct, second.correct) == (0, 1)


def test_clinicreferral_needs_the_question_column(tmp_path: Path) -> None:
    path = write(tmp_path, "clinicreferral", SHC_FILES["clinicreferral"],
                 csv_text(["prompt", "context", "label"], [["Q?", "N.", "A"]]))
    assert_missing_column("clinicreferral", tmp_path, path, "question")


def test_ent_referral_skips_and_counts_empty_labels(tmp_path: Path) -> None:
    rows = [["Q1?", "Synthetic note one.", "A"], ["Q2?", "Note two.", ""], ["Q3?", "Note three.", "C"]]
    write(tmp_path, "ent_referral", SHC_FILES["ent_referral"], shc_csv("ent_referral", rows))
    result = loaded("ent_referral", tmp_path)
    assert [i.id for i in result] == ["row1", "row3"]
    # the counter advances only on kept rows
    assert result[1].input.startswith("2 Provide an answer to the following question: Q3? ")
    assert result[1].correct == 2 and result[1].references == ("C",)
    assert result.removed == {"empty 'label' (HELM skips these rows)": 1}
    assert prompt("ent_referral", result[0]) == SHC_EXPECTED["ent_referral"]
    assert score("ent_referral", "C", result[1]) == 1.0


def test_proxysender_accepts_c_and_rejects_d(tmp_path: Path) -> None:
    write(tmp_path, "proxysender", SHC_FILES["proxysender"], shc_csv("proxysender", [["Q?", "N.", "C"]]))
    (only,) = load("proxysender", tmp_path)
    assert only.correct == 2 and score("proxysender", "C", only) == 1.0
    path = write(tmp_path, "proxysender", SHC_FILES["proxysender"],
                 shc_csv("proxysender", [["Q?", "N.", "A"], ["Q?", "N.", "D"]]))
    with pytest.raises(DataError) as info:
        load("proxysender", tmp_path)
    assert (info.value.path, info.value.where) == (str(path), "row 2 (line 3)")
    assert "'D'" in info.value.problem


def test_shc_bad_label_names_row(tmp_path: Path) -> None:
    write(tmp_path, "bmt_status", SHC_FILES["bmt_status"],
          shc_csv("bmt_status", [["Q1?", "N.", "A"], ["Q2?", "N.", "yes"]]))
    with pytest.raises(DataError, match=r"row 2 \(line 3\).*'label' must be one of 'A', 'B', got 'yes'"):
        load("bmt_status", tmp_path)


def test_shc_missing_column(tmp_path: Path) -> None:
    path = write(tmp_path, "hospicereferral", SHC_FILES["hospicereferral"],
                 csv_text(["prompt", "label"], [["Q?", "A"]]))
    assert_missing_column("hospicereferral", tmp_path, path, "context")


def test_shc_truncated_row(tmp_path: Path) -> None:
    text = shc_csv("privacydetection", [["Q1?", "N.", "A"]]) + '"Q2?","Synthetic note cut off'
    write(tmp_path, "privacydetection", SHC_FILES["privacydetection"], text)
    with pytest.raises(DataError, match=r"row 2 \(line 3\)"):
        load("privacydetection", tmp_path)


# --------------------------------------------------------------------------------------------------------------
# CLEAR (13 workbooks, a cap of 100 per condition)


def write_xlsx(path: Path, header: list, rows: list[list]) -> Path:
    import openpyxl

    path.parent.mkdir(parents=True, exist_ok=True)
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.append(header)
    for row in rows:
        sheet.append(row)
    workbook.save(path)
    return path


def write_clear(tmp_path: Path, overrides: dict[str, list[list]] | None = None) -> None:
    overrides = overrides or {}
    for condition in CLEAR_CONDITIONS:
        rows = overrides.get(condition, [[f"Synthetic note about {condition}.", 0]])
        write_xlsx(tmp_path / "clear" / f"{condition}.xlsx", ["text", "result_human"], rows)


def test_clear_loader_prompt_metric(tmp_path: Path) -> None:
    write_clear(
        tmp_path,
        {
            "alcohol_dependence": [["  Synthetic note: drinks daily.  ", 1], ["Denies alcohol.", 0], [None, 1],
                                   ["Unclear history.", 2], ["No label.", None]],
            "post_traumatic_stress_disorder": [["Nightmares since deployment.", "1"]],
        },
    )
    result = loaded("clear", tmp_path)
    assert len(result) == 3 + 1 + 11
    assert result.removed == {"empty 'text' or 'result_human' cell (skipped; see the module docstring)": 2}
    drinks, denies, unclear = result[:3]
    assert [i.id for i in (drinks, denies, unclear)] == [
        "alcohol_dependence-2", "alcohol_dependence-3", "alcohol_dependence-5"]
    assert {i.subset for i in result} == set(CLEAR_CONDITIONS)
    assert (drinks.correct, denies.correct, unclear.correct) == (0, 1, 2)
    assert prompt("clear", drinks) == (
        "Answer 'A' for 'Has a history of alcohol dependence', 'B' for 'Does not have a history of alcohol "
        "dependence', or 'C' for 'Uncertain'\n\n"
        "You are a medical assistant reviewing patient notes. Determine whether the patient has a history of "
        "alcohol dependence.\n\nOriginal Clinical Note:\nSynthetic note: drinks daily.\n\n"
        "A. Has a history of alcohol dependence\nB. Does not have a history of alcohol dependence\nC. Uncertain\n\n"
        "Answer:A. Has a history of alcohol dependence\nB. Does not have a history of alcohol dependence\n"
        "C. Uncertain\nRespond only with 'A', 'B', or 'C'. Do not add any other text, punctuation, or symbols:"
    )
    (ptsd,) = [i for i in result if i.subset == "post_traumatic_stress_disorder"]
    assert ptsd.choices[0] == "Has a history of post-traumatic stress disorder (PTSD)"
    assert prompt("clear", ptsd).startswith(
        "Answer 'A' for 'Has a history of post traumatic stress disorder', 'B' for 'Does not have a history of "
        "post traumatic stress disorder', or 'C' for 'Uncertain'\n\nYou are a medical assistant"
    )
    assert score("clear", "A", drinks) == 1.0 and score("clear", "C", unclear) == 1.0
    assert score("clear", "B", drinks) == 0.0


def test_clear_caps_each_condition_at_100_with_helms_sample(tmp_path: Path) -> None:
    rows = [[f"Synthetic note {k}.", k % 3] for k in range(105)]
    write_clear(tmp_path, {"bipolar_disorder": rows})
    result = loaded("clear", tmp_path)
    bipolar = [i for i in result if i.subset == "bipolar_disorder"]
    assert len(bipolar) == 100 and len(result) == 100 + 12
    expected = np.random.RandomState(0).permutation(105)[:100]
    assert [i.id for i in bipolar] == [f"bipolar_disorder-{int(k) + 2}" for k in expected]
    assert sum(result.removed.values()) == 5


def test_clear_bad_label_names_file_and_row(tmp_path: Path) -> None:
    write_clear(tmp_path, {"homelessness": [["Lives in a shelter.", 1], ["Has a flat.", 5]]})
    with pytest.raises(DataError) as info:
        load("clear", tmp_path)
    assert info.value.path == str(tmp_path / "clear" / "homelessness.xlsx")
    assert info.value.where == "row 3" and "got 5" in info.value.problem


def test_clear_missing_column_and_truncated_workbook(tmp_path: Path) -> None:
    write_clear(tmp_path)
    path = write_xlsx(tmp_path / "clear" / "chronic_pain.xlsx", ["text", "label"], [["Back pain.", 1]])
    assert_missing_column("clear", tmp_path, path, "result_human", where="header (row 1)")
    write_xlsx(path, ["text", "result_human"], [["Back pain.", 1]])
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(DataError, match="not a readable .xlsx workbook") as info:
        load("clear", tmp_path)
    assert info.value.path == str(path)


def test_clear_one_missing_workbook_is_named(tmp_path: Path) -> None:
    write_clear(tmp_path)
    (tmp_path / "clear" / "unemployment.xlsx").unlink()
    with pytest.raises(DataMissing, match=r"'unemployment\.xlsx' not found"):
        resolve_files(BENCHMARKS["clear"], tmp_path, download=False)


# --------------------------------------------------------------------------------------------------------------
# N2C2-CT (XML, 3 criteria averaged)


def n2c2_xml(text: str, abdominal: str, cad: str, creatinine: str) -> str:
    return (
        '<?xml version="1.0" encoding="UTF-8" ?>\n<PatientMatching>\n<TEXT><![CDATA[' + text + "]]></TEXT>\n"
        f'<TAGS>\n<ABDOMINAL met="{abdominal}" />\n<ADVANCED-CAD met="{cad}" />\n'
        f'<CREATININE met="{creatinine}" />\n</TAGS>\n</PatientMatching>\n'
    )


def test_n2c2_loader_prompt_metric(tmp_path: Path) -> None:
    stars = "*" * 100
    text = (f"\n\nRecord date: 2090-01-05\n\n\nSynthetic note: s/p appendectomy.\n\n{stars}\n\n"
            f"Record date: 2091-02-03\nCreatinine 1.1.\n\n{stars}\n\n")
    write(tmp_path, "n2c2_ct", "test/101.xml", n2c2_xml(text, "met", "not met", "not met"))
    write(tmp_path, "n2c2_ct", "test/100.xml", n2c2_xml("No date here.", "not met", "met", "met"))
    write(tmp_path, "n2c2_ct", "test/readme.txt", "not an xml file")
    instances = load("n2c2_ct", tmp_path)
    assert [i.id for i in instances] == [
        "ABDOMINAL-100", "ABDOMINAL-101", "ADVANCED-CAD-100", "ADVANCED-CAD-101", "CREATININE-100", "CREATININE-101"]
    assert [i.subset for i in instances] == ["ABDOMINAL"] * 2 + ["ADVANCED-CAD"] * 2 + ["CREATININE"] * 2
    assert [i.correct for i in instances] == [1, 0, 0, 1, 0, 1]
    expected = (
        "Answer A for yes, B for no.\n\n: \n"
        "    # Task\n"
        "    Your job is to decide whether the given patient meets the inclusion criterion for a clinical trial.\n"
        "\n"
        "    # Inclusion Criterion\n"
        '    The inclusion criterion being assessed is: "ABDOMINAL".\n'
        '    The definition of the inclusion criterion is: "History of intra-abdominal surgery. This could include '
        "any form of intra-abdominal surgery,     including but not limited to small/large intestine resection or "
        'small bowel obstruction".\n'
        "\n"
        "    # Patient Clinical Notes\n"
        "    Below is a set of 2 clinical notes describing the patient's current health status.     Each note is "
        "separated by a header with the date that the note was written, as well as a long list of asterisks.\n"
        "\n"
        "    " + "-" * 100 + "\n"
        "\n"
        "    ## Note #1\nDate: 2090-01-05\nRecord date: 2090-01-05\nSynthetic note: s/p appendectomy.\n"
        + "*" * 50 + "\n\n"
        "## Note #2\nDate: 2091-02-03\nRecord date: 2091-02-03\nCreatinine 1.1.\n"
        "\n"
        "    " + "-" * 100 + "\n"
        "\n"
        "    # Current Date\n"
        "    Assume that the current date is: 2091-02-03\n"
        "\n"
        "    # Question\n"
        '    Does the patient meet the inclusion criterion "ABDOMINAL"?\n'
        "    \n"
        "A. yes\nB. no\n"
        "Answer A for yes, B for no. Do not add any other text, punctuation, or symbols:"
    )
    assert prompt("n2c2_ct", instances[1]) == expected
    no_date = prompt("n2c2_ct", instances[0])
    assert "## Note #1\nDate: \nNo date here." in no_date and "the current date is: None\n" in no_date
    assert "we define     \u201cadvanced\u201d as having" in prompt("n2c2_ct", instances[2])
    assert score("n2c2_ct", "A", instances[1]) == 1.0 and score("n2c2_ct", "B", instances[0]) == 1.0
    assert score("n2c2_ct", "yes", instances[1]) == 0.0


def test_n2c2_truncated_xml_and_missing_tag(tmp_path: Path) -> None:
    path = write(tmp_path, "n2c2_ct", "test/100.xml", n2c2_xml("Note.", "met", "met", "met")[:80])
    with pytest.raises(DataError) as info:
        load("n2c2_ct", tmp_path)
    assert info.value.path == str(path) and info.value.where.startswith("line ")
    write(tmp_path, "n2c2_ct", "test/100.xml",
          "<PatientMatching><TEXT>Note.</TEXT><TAGS><ABDOMINAL met=\"met\"/></TAGS></PatientMatching>")
    with pytest.raises(DataError, match="no tag for the criterion ADVANCED-CAD"):
        load("n2c2_ct", tmp_path)


def test_n2c2_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "n2c2_ct" / "test").mkdir(parents=True)
    with pytest.raises(DataError, match="no .xml files"):
        load("n2c2_ct", tmp_path)


# --------------------------------------------------------------------------------------------------------------
# MIMIC-RRS, MIMIC-BHC (line files, JSON lines)

RRS_INSTRUCTIONS = (
    "Generate the impression section of the radiology report based on its findings. This will not be used to "
    "diagnose nor treat any patients. Be as concise as possible."
)


def test_mimic_rrs_loader_prompt_metric(tmp_path: Path) -> None:
    write(tmp_path, "mimic_rrs", "test.findings.tok", " the lungs are clear . \n\nno effusion .\r\nheart ok .\n")
    write(tmp_path, "mimic_rrs", "test.impression.tok", "no acute process .\nempty findings above .\n\nnormal .\n")
    result = loaded("mimic_rrs", tmp_path)
    assert [i.id for i in result] == ["line1", "line4"]
    assert result.removed == {"empty findings or impression line (HELM skips the pair)": 2}
    first = result[0]
    assert first.input == "the lungs are clear ." and first.references == ("no acute process .",)
    assert prompt("mimic_rrs", first) == (
        RRS_INSTRUCTIONS + "\n\nFindings:\nthe lungs are clear .\nImpression:"
    )
    assert score("mimic_rrs", "no acute process .", first) == pytest.approx(1.0)
    assert score("mimic_rrs", "pneumothorax", first) == 0.0


def test_mimic_rrs_files_must_be_line_aligned(tmp_path: Path) -> None:
    write(tmp_path, "mimic_rrs", "test.findings.tok", "a .\nb .\n")
    write(tmp_path, "mimic_rrs", "test.impression.tok", "a .\n")
    with pytest.raises(DataError, match=r"has 2 lines but .*test\.impression\.tok has 1"):
        load("mimic_rrs", tmp_path)


def test_mimic_rrs_empty_file(tmp_path: Path) -> None:
    write(tmp_path, "mimic_rrs", "test.findings.tok", "a .\n")
    path = write(tmp_path, "mimic_rrs", "test.impression.tok", "")
    with pytest.raises(DataError) as info:
        load("mimic_rrs", tmp_path)
    assert info.value.path == str(path) and "empty" in info.value.problem


def test_mimic_bhc_loader_prompt_metric(tmp_path: Path) -> None:
    lines = [
        {"input": "<SEX> F <SERVICE> MEDICINE\nSynthetic note: cough, fever.", "target": "Treated for pneumonia."},
        {"input": "Synthetic note two.", "target": ""},
        {"input": "Synthetic note three.", "target": "Observed overnight."},
    ]
    write(tmp_path, "mimic_bhc", "mimic_iv_bhc.json", "\n".join(json.dumps(x) for x in lines) + "\n")
    result = loaded("mimic_bhc", tmp_path)
    assert [i.id for i in result] == ["line1", "line3"]
    assert sum(result.removed.values()) == 1
    assert prompt("mimic_bhc", result[0]) == (
        "Summarize the clinical note into a brief hospital course.\n\nClinical Note:\n<SEX> F <SERVICE> MEDICINE\n"
        "Synthetic note: cough, fever.\nBrief Hospital Course:"
    )
    assert score("mimic_bhc", "Treated for pneumonia.", result[0]) == pytest.approx(1.0)


def test_mimic_bhc_bad_lines(tmp_path: Path) -> None:
    path = write(tmp_path, "mimic_bhc", "mimic_iv_bhc.json", '{"input": "a", "target": "b"}\n{"input": "tru')
    with pytest.raises(DataError) as info:
        load("mimic_bhc", tmp_path)
    assert info.value.path == str(path) and info.value.where.startswith("line 2, column")
    write(tmp_path, "mimic_bhc", "mimic_iv_bhc.json", '{"input": "a", "target": "b"}\n{"text": "c"}\n')
    with pytest.raises(DataError, match=r"line 2.*missing key 'input'"):
        load("mimic_bhc", tmp_path)
    write(tmp_path, "mimic_bhc", "mimic_iv_bhc.json", "")
    with pytest.raises(DataError, match="empty"):
        load("mimic_bhc", tmp_path)


# --------------------------------------------------------------------------------------------------------------
# NoteExtract, PatientInstruct, MentalHealth (private CSVs)

NOTEEXTRACT_TEMPLATE_HEAD = (
    "\nYou are provided with a clinical note regarding a physician-patient interaction. Your task is to extract "
    "specific information based solely on the content provided. Do not hallucinate or infer details that are not "
    "explicitly stated in the text. Any information you include must be directly entailed by the text.\n\n"
    "Instructions:\n\n"
    "Extract the required information precisely as presented in the source text.\n\n"
    'If the text does not contain specific information, clearly state "Not mentioned".\n\n'
    "Maintain the patient's original wording whenever possible.\n\n"
    "Response Format:\n\n"
    "Chief Complaint\n[ENTER CHIEF COMPLAINT]\n\n"
    "History of Present Illness\n\n"
    "Onset: When did it start? Did it begin suddenly or gradually? [ENTER ONSET INFORMATION]\n\n"
    "Provoking/Palliating Factors: What makes the symptoms better or worse? [ENTER Provoking/Palliating Factors "
    "INFORMATION]\n\n"
    "Quality: Describe the symptoms, e.g., sharp pain, dull pain, stabbing pain. [ENTER QUALITY INFORMATION]\n\n"
    "Region/Radiation: Where are your symptoms located? Do they move? [ENTER REGION/RADIATION INFORMATION]\n\n"
    "Severity: On a scale of 1 to 10, how severe are your symptoms? [ENTER SEVERITY INFORMATION]\n\n"
    "Timing: When do you experience the symptoms? What times of day? [ENTER TIMING INFORMATION]\n\n"
    "Related Symptoms: Are there any other symptoms related to the main complaint? [ENTER RELATED SYMPTOMS "
    "INFORMATION]\n\n"
    "Ensure your responses are concise, accurate, and entirely supported by the provided text. Do not introduce "
    "external knowledge or assumptions.\n\n"
    "Clinical Note:\n"
)


def test_noteextract_loader_prompt_metric(tmp_path: Path) -> None:
    rows = [["1", "Synthetic note: dull back pain since Monday, 6/10.\nWorse when lifting."], ["2", ""],
            ["3", "NA"], ["4", "Synthetic note: headache for two days."]]
    write(tmp_path, "noteextract", "CHW_Dataset.csv", csv_text(["Patient", "MO Note"], rows))
    result = loaded("noteextract", tmp_path)
    assert [i.id for i in result] == ["row1", "row4"]
    assert sum(result.removed.values()) == 2
    note = "Synthetic note: dull back pain since Monday, 6/10.\nWorse when lifting."
    first = result[0]
    assert first.references == (note,)  # the reference is the source note itself (as HELM)
    assert prompt("noteextract", first) == (
        "Follow the instructions provided regarding conversion of a patient note into a specified format.\n\n"
        ": " + NOTEEXTRACT_TEMPLATE_HEAD + note + "\n\n:"
    )
    assert score("noteextract", note, first) == pytest.approx(1.0)
    assert 0.0 < score("noteextract", "Chief Complaint: back pain", first) < 1.0


def test_noteextract_keeps_crlf_inside_quoted_note(tmp_path: Path) -> None:
    # pandas keeps a \r\n inside a quoted field as it is
    write(tmp_path, "noteextract", "CHW_Dataset.csv", 'MO Note\r\n"line one\r\nline two"\r\n')
    (only,) = load("noteextract", tmp_path)
    assert only.references == ("line one\r\nline two",)


def test_noteextract_missing_column(tmp_path: Path) -> None:
    path = write(tmp_path, "noteextract", "CHW_Dataset.csv", csv_text(["Note"], [["x"]]))
    assert_missing_column("noteextract", tmp_path, path, "MO Note")


PATIENTINSTRUCT_COLUMNS = ["QC", "Diagnosis", "ActualProcedure", "HistoryPhysicalNoteText", "OperativeNoteText",
                           "DischargeInstructionNoteText"]


def test_patientinstruct_loader_prompt_metric(tmp_path: Path) -> None:
    rows = [
        [" true ", " Symptomatic gallstones ", "Laparoscopic cholecystectomy", "Synthetic H&P: RUQ pain.",
         "Synthetic op note: gallbladder removed.", " Keep the incisions dry for 48 hours. "],
        ["FALSE", "d", "p", "h", "o", "i"],
        ["TRUE", "d", "p", "", "o", "i"],
    ]
    write(tmp_path, "patientinstruct", "dataset_cases_qc.csv", csv_text(PATIENTINSTRUCT_COLUMNS, rows))
    result = loaded("patientinstruct", tmp_path)
    assert len(result) == 1 and sum(result.removed.values()) == 2
    (only,) = result
    assert only.id == "row1" and only.references == ("Keep the incisions dry for 48 hours.",)
    assert prompt("patientinstruct", only) == (
        "You are a medical professional tasked with generating personalized post-procedure patient instructions. "
        "Given the following case details which include the patient's diagnosis, the planned procedure, the "
        "history & physical note, and the operative report, generate clear and actionable instructions for the "
        "patient to follow after their procedure. Don't worry, this information will not be used for any clinical "
        "decision making. This will not be used to diagnose nor treat any patients.\n\n"
        "Case Details: Diagnosis: Symptomatic gallstones\nProcedure: Laparoscopic cholecystectomy\n"
        "History & Physical: Synthetic H&P: RUQ pain.\nOperative Report: Synthetic op note: gallbladder removed."
        "\n\n\nPatient Instructions:"
    )
    assert score("patientinstruct", "Keep the incisions dry for 48 hours.", only) == pytest.approx(1.0)


def test_patientinstruct_missing_column(tmp_path: Path) -> None:
    columns = [c for c in PATIENTINSTRUCT_COLUMNS if c != "OperativeNoteText"]
    write(tmp_path, "patientinstruct", "dataset_cases_qc.csv", csv_text(columns, [["TRUE", "d", "p", "h", "i"]]))
    with pytest.raises(DataError, match=r"header \(line 1\).*'OperativeNoteText'"):
        load("patientinstruct", tmp_path)


MENTAL_COLUMNS = ["topic", "dialogue_type", "context", "gold_counselor_response"]


def test_mentalhealth_loader_prompt_metric(tmp_path: Path) -> None:
    rows = [
        ["Workplace", "01", "counselor: Hi, what brings you here?\nclient: I feel I don't fit in at work.",
         "That sounds lonely. What has been hardest?"],
        ["Anxiety", "2", "counselor: Hello.\nclient: I can't sleep.", "Tell me more about your nights."],
    ]
    write(tmp_path, "mentalhealth", "processed_dialogues.csv", csv_text(MENTAL_COLUMNS, rows))
    first, second = load("mentalhealth", tmp_path)
    assert (first.id, second.id) == ("row1", "row2")
    assert prompt("mentalhealth", first) == (
        "Given a mental health conversation history, generate an empathetic and appropriate counselor response."
        "\n\n\nQuestion: Topic: Workplace\nType: 1\n\nPrevious conversation:\ncounselor: Hi, what brings you here?\n"
        "client: I feel I don't fit in at work.\n\nGenerate an empathetic and appropriate counselor response:\n"
        "Counselor response:"
    )
    assert score("mentalhealth", "That sounds lonely. What has been hardest?", first) == pytest.approx(1.0)


def test_mentalhealth_prints_fields_as_pandas(tmp_path: Path) -> None:
    rows = [["Grief", "3", "client: hi", "hello"], ["Grief", "", "client: hey", "hey there"]]
    write(tmp_path, "mentalhealth", "processed_dialogues.csv", csv_text(MENTAL_COLUMNS, rows))
    first, second = load("mentalhealth", tmp_path)
    assert "Type: 3.0\n" in first.input and "Type: nan\n" in second.input  # an int column with a gap: floats


def test_mentalhealth_short_row(tmp_path: Path) -> None:
    path = write(tmp_path, "mentalhealth", "processed_dialogues.csv",
                 "topic,dialogue_type,context,gold_counselor_response\nGrief,1,client: hi,hello\nGrief,2\n")
    with pytest.raises(DataError) as info:
        load("mentalhealth", tmp_path)
    assert (info.value.path, info.value.where) == (str(path), "row 2 (line 3)")
    assert "expected 4 fields" in info.value.problem


# --------------------------------------------------------------------------------------------------------------
# MedAlign (two TSVs and an EHR folder; the EHR cut to the last tokens that fit)


def encoding():
    from pytest_medhelm.catalogue.user_files import cl100k

    try:
        return cl100k()
    except DataMissing as exc:
        pytest.skip(str(exc))


def write_medalign(tmp_path: Path, ehr: str = "<eventstream>Synthetic EHR: HbA1c 7.2%.</eventstream>") -> None:
    write(tmp_path, "medalign", "clinician-reviewed-model-responses.tsv", csv_text(
        ["instruction_id", "question", "person_id", "model_response"],
        [["17", "What was the last HbA1c?", "1001", "a"], ["17", "What was the last HbA1c?", "1001", "b"],
         ["18", "Summarize the allergies.", "1002", "c"], ["19", "Unanswered?", "1001", "d"]],
        delimiter="\t"))
    write(tmp_path, "medalign", "clinician-instruction-responses.tsv", csv_text(
        ["instruction_id", "annotator_num", "clinician_response"],
        [["18", "Annotator_1", "No known allergies."], ["17", "Annotator_2", "7.2"], ["17", "Annotator_1", "7.2%"],
         ["99", "Annotator_1", "orphan"]],
        delimiter="\t"))
    write(tmp_path, "medalign", "medalign_ehr_xml/1001.xml", ehr)
    write(tmp_path, "medalign", "medalign_ehr_xml/1002.xml", "<eventstream>\r\nNKDA\r\n</eventstream>")
    write(tmp_path, "medalign", "medalign_ehr_xml/notes.txt", "ignored")


def test_medalign_loader_prompt_metric(tmp_path: Path) -> None:
    encoding()
    write_medalign(tmp_path)
    result = loaded("medalign", tmp_path)
    assert [i.id for i in result] == ["18", "17"]  # the reference file's order
    assert sum(result.removed.values()) == 3  # Annotator_2, orphan answer, instruction 19 without an answer
    allergies, hba1c = result
    assert hba1c.references == ("7.2%",)
    assert prompt("medalign", hba1c) == (
        "\nQuestion: Instruction: Answer the following question based on the EHR:\n\n"
        "EHR: <eventstream>Synthetic EHR: HbA1c 7.2%.</eventstream>\n\n"
        "Question: What was the last HbA1c?\n\nAnswer:\n"
    )
    assert "EHR: <eventstream>\nNKDA\n</eventstream>\n\n" in allergies.input  # read with universal newlines
    assert score("medalign", "7.2%", hba1c) == pytest.approx(1.0)


def test_medalign_keeps_the_last_tokens_that_fit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    enc = encoding()
    from pytest_medhelm.catalogue.clinical_decision_support import medalign

    ehr = " ".join(f"event{k} code{k * 7}" for k in range(400))
    write_medalign(tmp_path, ehr=ehr)
    template = ("Instruction: Answer the following question based on the EHR:\n\nEHR: {ehr}\n\nQuestion: "
                "{question}\n\nAnswer:")
    question = "What was the last HbA1c?"
    limit = 256 + len(enc.encode(template)) + len(enc.encode(question)) + 50
    monkeypatch.setattr(medalign, "MAX_LENGTH", limit)
    hba1c = [i for i in load("medalign", tmp_path) if i.id == "17"][0]
    kept = enc.decode(enc.encode(ehr)[-50:])
    assert hba1c.input == f"\nQuestion: Instruction: Answer the following question based on the EHR:\n\nEHR: {kept}" \
        f"\n\nQuestion: {question}\n\nAnswer:"
    assert kept.endswith("event399 code2793") and len(enc.encode(kept)) <= 51
    # no budget left: the EHR is empty
    monkeypatch.setattr(medalign, "MAX_LENGTH", 10)
    hba1c = [i for i in load("medalign", tmp_path) if i.id == "17"][0]
    assert "\n\nEHR: \n\nQuestion: What was the last HbA1c?" in hba1c.input


def test_medalign_missing_ehr_names_the_file(tmp_path: Path) -> None:
    encoding()
    write_medalign(tmp_path)
    (tmp_path / "medalign" / "medalign_ehr_xml" / "1002.xml").unlink()
    with pytest.raises(DataError, match=r"row 3 \(line 4\): no EHR for person_id 1002: expected .*1002\.xml"):
        load("medalign", tmp_path)


def test_medalign_missing_column(tmp_path: Path) -> None:
    write_medalign(tmp_path)
    path = write(tmp_path, "medalign", "clinician-instruction-responses.tsv",
                 csv_text(["instruction_id", "clinician_response"], [["17", "x"]], delimiter="\t"))
    assert_missing_column("medalign", tmp_path, path, "annotator_num")


# --------------------------------------------------------------------------------------------------------------
# DischargeMe (six gzip CSVs, HELM's joins)

DISCHARGE_INSTRUCTIONS = (
    "Given a discharge text, a radiology report text, and a target document of either discharge instructions or a "
    "brief hospital course, return the generated target document from the context provided."
)


def gz_csv(tmp_path: Path, name: str, header: list[str], rows: list[list[str]]) -> Path:
    return write(tmp_path, "dischargeme", f"test_phase_1/{name}.csv.gz",
                 gzip.compress(csv_text(header, rows).encode("utf-8")))


def write_dischargeme(tmp_path: Path) -> None:
    gz_csv(tmp_path, "diagnosis", ["subject_id", "stay_id", "seq_num", "icd_code", "icd_version", "icd_title"],
           [["2", "200", "1", "L03", "10", "Cellulitis"], ["1", "100", "1", "J18", "10", "Pneumonia"],
            ["2", "201", "2", "I10", "10", "Hypertension"], ["3", "300", "1", "R07", "10", "Chest pain"]])
    gz_csv(tmp_path, "triage", ["subject_id", "stay_id", "acuity", "chiefcomplaint"],
           [["1", "100", "2", "Cough"], ["2", "200", "3", "Leg redness"], ["2", "201", "3", "Leg redness"]])
    gz_csv(tmp_path, "discharge", ["note_id", "subject_id", "hadm_id", "note_type", "note_seq", "charttime",
                                   "storetime", "text"],
           [["1-DS-1", "1", "11", "DS", "1", "", "", "Name: ___ BHC: Treated with antibiotics. DI: Rest."],
            ["1-DS-2", "1", "12", "DS", "2", "", "", "Name: ___ no radiology"],
            ["2-DS-1", "2", "21", "DS", "1", "", "",
             "Name: ___\nBHC: Admitted for cellulitis.\nDI: Take cephalexin."],
            ["3-DS-1", "3", "31", "DS", "1", "", "", "Name: ___ no triage"]])
    gz_csv(tmp_path, "radiology", ["note_id", "subject_id", "hadm_id", "note_type", "note_seq", "charttime",
                                   "storetime", "text"],
           [["1-RR-1", "1", "11", "RR", "1", "", "", "CXR: right lower lobe opacity."],
            ["2-RR-1", "2", "21", "RR", "1", "", "", "US leg: no DVT."],
            ["2-RR-2", "2", "21", "RR", "2", "", "", "Second report, not used."],
            ["3-RR-1", "3", "31", "RR", "1", "", "", "CXR: clear."]])
    gz_csv(tmp_path, "edstays", ["subject_id", "hadm_id", "stay_id", "intime", "outtime"],
           [["1", "11", "100", "", ""], ["1", "12", "101", "", ""], ["2", "21", "200", "", ""],
            ["3", "31", "300", "", ""]])
    gz_csv(tmp_path, "discharge_target", ["note_id", "hadm_id", "discharge_instructions", "brief_hospital_course",
                                          "discharge_instructions_word_count", "brief_hospital_course_word_count"],
           [["1-DS-1", "11", "Rest.", "Treated with antibiotics.", "1", "3"],
            ["2-DS-1", "21", "Take cephalexin.", "Admitted for cellulitis.", "2", "3"],
            ["1-DS-2", "12", "x", "y", "1", "1"], ["3-DS-1", "31", "x", "y", "1", "1"]])


def test_dischargeme_loader_prompt_metric(tmp_path: Path) -> None:
    write_dischargeme(tmp_path)
    result = loaded("dischargeme", tmp_path)
    # patients in order of their first diagnosis row (2, then 1); 12 has no radiology, 3 has no triage
    assert [i.id for i in result] == ["21-bhc", "21-di", "11-bhc", "11-di"]
    assert sum(result.removed.values()) == 2
    bhc, di = result[0], result[1]
    assert bhc.references == ("Admitted for cellulitis.",) and di.references == ("Take cephalexin.",)
    assert prompt("dischargeme", bhc) == (
        DISCHARGE_INSTRUCTIONS + "\n\n"
        "Generate the Brief Hospital Course from the following patient discharge text and radiology report text."
        "    \n\nDischarge Text:\nName: ___\nBHC: \nDI: Take cephalexin.\n\nRadiology Report:\nUS leg: no DVT.\n\n"
        "Brief Hospital Course:\n\nAnswer:"
    )
    assert prompt("dischargeme", di).endswith(
        "Discharge Text:\nName: ___\nBHC: Admitted for cellulitis.\nDI: \n\nRadiology Report:\nUS leg: no DVT.\n\n"
        "Discharge Instructions:\n\nAnswer:"
    )
    assert score("dischargeme", "Admitted for cellulitis.", bhc) == pytest.approx(1.0)


def test_dischargeme_truncated_gzip_and_missing_column(tmp_path: Path) -> None:
    write_dischargeme(tmp_path)
    path = tmp_path / "dischargeme" / "test_phase_1" / "radiology.csv.gz"
    path.write_bytes(path.read_bytes()[:30])
    with pytest.raises(DataError, match="not a valid gzip file or truncated") as info:
        load("dischargeme", tmp_path)
    assert info.value.path == str(path)
    write_dischargeme(tmp_path)
    path = gz_csv(tmp_path, "discharge_target", ["note_id", "hadm_id", "discharge_instructions"], [["1", "11", "x"]])
    assert_missing_column("dischargeme", tmp_path, path, "brief_hospital_course")


# --------------------------------------------------------------------------------------------------------------
# EHRSHOT (MEDS Parquet, 3 tasks averaged)

EHRSHOT_TAIL = (
    "A. yes\nB. no\nRespond with only 'A' for yes or 'B' for no. Do not add any other text, punctuation, or symbols:"
)
HYPERTENSION_CODES = (
    "ICD10CM/I10, ICD9CM/401, ICD9CM/401.0, ICD9CM/401.1, ICD9CM/401.9, SNOMED/1201005, SNOMED/1218009, "
    "SNOMED/155296003, SNOMED/18416000, SNOMED/194758001, SNOMED/194760004, SNOMED/19769006, SNOMED/23717007, "
    "SNOMED/266228004, SNOMED/35303009, SNOMED/371125006, SNOMED/40511000119107, SNOMED/429457004, "
    "SNOMED/46481004, SNOMED/59621000, SNOMED/63287004, SNOMED/71874008, SNOMED/72022006, SNOMED/78808002, "
    "SNOMED/78975002, SNOMED/9901000"
)


def write_ehrshot(tmp_path: Path, readmission: list[tuple] | None = None) -> None:
    pa = pytest.importorskip("pyarrow")
    from datetime import datetime as dt

    import pyarrow.parquet as pq

    def table(path: str, columns: dict) -> None:
        target = tmp_path / "ehrshot" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table(columns), target)

    events = [
        (1, dt(2019, 1, 1), "ICD10CM/E11.9"), (2, None, "MEDS_BIRTH"), (1, dt(2020, 6, 1), "LOINC/4548-4"),
        (2, dt(2018, 3, 3), "ICD10CM/I10"), (1, dt(2019, 1, 1), "RxNorm/860975"), (1, None, "Gender/F"),
        (3, dt(2021, 1, 1), "SNOMED/1"),
    ]
    table("data/data.parquet", {"subject_id": pa.array([e[0] for e in events], pa.int64()),
                                "time": pa.array([e[1] for e in events], pa.timestamp("us")),
                                "code": [e[2] for e in events], "numeric_value": [None] * len(events)})
    table("metadata/subject_splits.parquet", {"subject_id": [1, 2, 3], "split": ["train", "tuning", "held_out"]})
    readmission = readmission or [(2, dt(2019, 1, 1), True), (1, dt(2020, 1, 1), False), (1, dt(2021, 1, 1), True)]
    for task, labels in (
        ("guo_readmission", readmission),
        ("new_hypertension", [(1, dt(2019, 6, 1), False)]),
        ("lab_anemia", [(3, dt(2022, 1, 1), True), (1, dt(2018, 1, 1), False)]),
    ):
        table(f"labels/{task}/labels.parquet", {
            "subject_id": pa.array([x[0] for x in labels], pa.int64()),
            "prediction_time": pa.array([x[1] for x in labels], pa.timestamp("us")),
            "boolean_value": [x[2] for x in labels],
        })


def test_ehrshot_loader_prompt_metric(tmp_path: Path) -> None:
    encoding()
    write_ehrshot(tmp_path)
    instances = load("ehrshot", tmp_path)
    assert [i.subset for i in instances] == ["guo_readmission"] * 3 + ["new_hypertension"] + ["lab_anemia"] * 2
    # prompts in (subject, time) order, as HELM builds them
    assert [i.id for i in instances] == [
        "guo_readmission-1-0", "guo_readmission-1-1", "guo_readmission-2-0", "new_hypertension-1-0",
        "lab_anemia-1-0", "lab_anemia-3-0"]
    first = instances[0]
    assert prompt("ehrshot", first) == (
        "Answer A for yes, B for no.\n\n: \n# Instructions\n"
        "You are an expert hospitalist at Stanford Healthcare, an academic medical center affiliated with Stanford "
        "University. You specialize in predicting 30-day readmission.\n\n"
        "Instruction: Review the patient's EHR history. Based on all available medical evidence in the provided "
        "EHR, please answer the question: If this patient is discharged from the hospital right now, is the patient "
        "likely     to be readmitted to the hospital within 30 days?\n\n\n"
        "# Your Task\nPatient EHR:\n- ICD10CM/E11.9\n- RxNorm/860975\n\n\n" + EHRSHOT_TAIL
    )
    assert "Patient EHR:\n- ICD10CM/E11.9\n- RxNorm/860975\n- LOINC/4548-4\n\n" in instances[1].input
    assert "Patient EHR:\n- ICD10CM/I10\n\n" in instances[2].input  # the event without a time never counts
    hypertension = instances[3].input
    assert hypertension.startswith(
        "\n# Instructions\nYou are an expert primary care physician at Stanford Healthcare, an academic medical "
        "center affiliated with Stanford University. You specialize in predicting hypertension.\n\n"
        "Clinical Definition: Hypertension, or high blood pressure, is a chronic medical condition characterized by "
    )
    assert ("\n\nMedical Code Definition: In an electronic health record (EHR), hypertension is denoted by the "
            "occurrence of any of the following medical codes: " + HYPERTENSION_CODES + "\n\nInstruction: Review the "
            "patient's EHR history. Based on all available medical evidence in the provided EHR, please answer the "
            "question: Is this patient likely to receive a first-time diagnosis     of Hypertension within the next "
            "year?\n\n\n# Your Task\nPatient EHR:\n- ICD10CM/E11.9\n- RxNorm/860975\n\n") in hypertension
    assert "(i.e. <120 g/L)" in instances[4].input
    # each prompt's own label by default
    assert [i.correct for i in instances] == [1, 0, 0, 1, 1, 0]
    assert score("ehrshot", "B", first) == 1.0 and score("ehrshot", "A", instances[1]) == 1.0


def test_ehrshot_helm_pairs_sorted_prompts_with_file_order_labels(tmp_path: Path) -> None:
    encoding()
    write_ehrshot(tmp_path)
    instances = load("ehrshot", tmp_path)
    # file order of guo_readmission labels: (2, True), (1, False), (1, True); sorted: (1, F), (1, T), (2, T).
    # HELM gives prompt j the j-th label of the file: prompt (1, F) gets True, (1, T) gets False, (2, T) gets True
    assert [i.extra["helm_correct"] for i in instances[:3]] == [0, 1, 0]
    first = instances[0]
    assert score("ehrshot", "B", first) == 1.0
    helm = BENCHMARKS["ehrshot"].metric.score("B", first, "helm")
    assert helm.value == 0.0 and "HELM's label" in helm.detail
    assert score("ehrshot", "A", first, "helm") == 1.0
    assert score("ehrshot", "A", instances[2], "helm") == 1.0  # aligned: both modes agree


def test_ehrshot_lab_task_sample_and_token_filter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    encoding()
    from pytest_medhelm.catalogue.clinical_decision_support import ehrshot

    write_ehrshot(tmp_path)
    monkeypatch.setattr(ehrshot, "MAX_LABELS_PER_LAB_TASK", 1)
    anemia = [i for i in load("ehrshot", tmp_path) if i.subset == "lab_anemia"]
    kept = int(np.random.RandomState(1).permutation(2)[0])  # pandas' sample(n=1, random_state=1)
    assert [i.id for i in anemia] == [["lab_anemia-3-0", "lab_anemia-1-0"][kept]]
    monkeypatch.setattr(ehrshot, "MAX_LENGTH", 80)
    result = loaded("ehrshot", tmp_path)
    assert all(i.subset != "new_hypertension" for i in result)  # its long code definition is over the limit
    assert any("tokens" in reason for reason in result.removed)


def test_ehrshot_missing_column_and_truncated_parquet(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    write_ehrshot(tmp_path)
    path = tmp_path / "ehrshot" / "labels" / "new_hypertension" / "labels.parquet"
    pq.write_table(pa.table({"subject_id": [1], "value": [True]}), path)
    with pytest.raises(DataError) as info:
        load("ehrshot", tmp_path)
    assert (info.value.path, info.value.where) == (str(path), "schema")
    assert "'prediction_time'" in info.value.problem
    write_ehrshot(tmp_path)
    path = tmp_path / "ehrshot" / "data" / "data.parquet"
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(DataError, match="not a readable Parquet file") as info:
        load("ehrshot", tmp_path)
    assert info.value.path == str(path)


def test_parquet_without_pyarrow_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_ehrshot(tmp_path)
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(DataMissing, match=r"pip install 'pytest-medhelm\[data\]'"):
        load("ehrshot", tmp_path)


# --------------------------------------------------------------------------------------------------------------
# MIMIC-IV billing codes (Feather)


def write_billing(tmp_path: Path, columns: dict | None = None) -> Path:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.feather as feather

    path = tmp_path / "mimic_billing" / "mimiciv_icd10.feather"
    path.parent.mkdir(parents=True, exist_ok=True)
    columns = columns or {
        "_id": [101, 102],
        "text": ["Synthetic discharge summary: hip fracture after a fall.\nHypertension.", "Synthetic: gout."],
        "target": [["S72.001A", "W19.XXXA", "I10."], ["M1A.00X0"]],
    }
    feather.write_feather(pa.table(columns), path)
    return path


def test_mimic_billing_loader_prompt_metric(tmp_path: Path) -> None:
    write_billing(tmp_path)
    first, second = load("mimic_billing", tmp_path)
    assert (first.id, second.id) == ("101", "102")
    assert first.references == ("S72.001A,W19.XXXA,I10.",)
    assert prompt("mimic_billing", first) == (
        "Given the following clinical note, identify all relevant ICD-10 codes.\n\nNote:\nSynthetic discharge "
        "summary: hip fracture after a fall.\nHypertension.\nPredicted ICD-10 Codes:"
    )
    answer = "**S72.001A**, W19.XXXA, I10"
    assert score("mimic_billing", answer, first) == 1.0
    # HELM reads S72.001A and W19.XXXA as S72 and W19; here the answer's S72.009A would match them too
    assert score("mimic_billing", "S72.009A, W19.XXXA, I10", first, "helm") == 1.0
    assert score("mimic_billing", "S72.009A, W19.XXXA, I10", first) == pytest.approx(2 / 3)
    # M1A.00X0 is invisible to HELM's regex: nothing to find, F1 0 whatever the answer
    assert score("mimic_billing", "M1A.00X0", second, "helm") == 0.0
    assert score("mimic_billing", "M1A.00X0", second) == 1.0


def test_mimic_billing_missing_column_and_truncated(tmp_path: Path) -> None:
    path = write_billing(tmp_path, {"text": ["note"], "codes": [["I10"]]})
    with pytest.raises(DataError) as info:
        load("mimic_billing", tmp_path)
    assert (info.value.path, info.value.where) == (str(path), "schema") and "'target'" in info.value.problem
    path = write_billing(tmp_path, {"text": ["note", None], "target": [["I10"], ["E78.5"]]})
    with pytest.raises(DataError, match=r"row 2: 'text' must be the note text"):
        load("mimic_billing", tmp_path)
    path = write_billing(tmp_path)
    path.write_bytes(path.read_bytes()[:60])
    with pytest.raises(DataError, match="not a readable Feather file"):
        load("mimic_billing", tmp_path)


def test_feather_without_pyarrow_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_billing(tmp_path)
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(DataMissing) as info:
        load("mimic_billing", tmp_path)
    assert "mimiciv_icd10.feather" in str(info.value) and "pip install 'pytest-medhelm[data]'" in str(info.value)


# --------------------------------------------------------------------------------------------------------------
# Empty files, for every file format


@pytest.mark.parametrize(
    ("slug", "name"),
    [
        ("medconfinfo", "medhelm-CONF-dataset_filtered.csv"),
        ("patientinstruct", "dataset_cases_qc.csv"),
        ("mentalhealth", "processed_dialogues.csv"),
        ("noteextract", "CHW_Dataset.csv"),
        ("mimic_bhc", "mimic_iv_bhc.json"),
    ],
)
def test_empty_file(tmp_path: Path, slug: str, name: str) -> None:
    path = write(tmp_path, slug, name, "")
    with pytest.raises(DataError) as info:
        load(slug, tmp_path)
    assert info.value.path == str(path) and "empty" in info.value.problem


def test_empty_gzip_and_workbook_and_feather(tmp_path: Path) -> None:
    write_dischargeme(tmp_path)
    path = write(tmp_path, "dischargeme", "test_phase_1/diagnosis.csv.gz", gzip.compress(b""))
    with pytest.raises(DataError, match="empty") as info:
        load("dischargeme", tmp_path)
    assert info.value.path == str(path)
    write_clear(tmp_path)
    path = write(tmp_path, "clear", "liver_disease.xlsx", b"")
    with pytest.raises(DataError, match="empty") as info:
        load("clear", tmp_path)
    assert info.value.path == str(path)
    pytest.importorskip("pyarrow")
    path = write(tmp_path, "mimic_billing", "mimiciv_icd10.feather", b"")
    with pytest.raises(DataError) as info:
        load("mimic_billing", tmp_path)
    assert info.value.path == str(path)


def test_header_only_csv(tmp_path: Path) -> None:
    write(tmp_path, "cdi_qa", SHC_FILES["cdi_qa"], "prompt,context,label\n")
    with pytest.raises(DataError, match="no data rows"):
        load("cdi_qa", tmp_path)
