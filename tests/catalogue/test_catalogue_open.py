"""The open-ended public benchmarks (MTSamples, MTSamples Procedures, ACI-Bench, MedicationQA, MEDIQA, MedDialog)
and their interim metric, ROUGE-L: loaders, prompts, the metric, and errors on malformed files.

Real data is read from ``../shared/data`` beside the repository when it exists (skipped otherwise); everything
else runs on small synthetic files written to ``tmp_path`` in the upstream layout.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from catalogue_helpers import BENCHMARKS, load, real, write

from pytest_medhelm.catalogue.clinical_decision_support import mtsamples
from pytest_medhelm.catalogue.clinical_note_generation import mtsamples_procedures
from pytest_medhelm.catalogue.patient_communication import medicationqa
from pytest_medhelm.catalogue.sampling import helm_sample, helm_sample_by_subset
from pytest_medhelm.catalogue.taxonomy import CATEGORY_BY_SLUG
from pytest_medhelm.data.errors import DataError, DataMissing
from pytest_medhelm.data.sources import resolve_files
from pytest_medhelm.metrics.rouge import ROUGE_L, RougeL, remove_braces, rouge_scorer, rouge_scores
from pytest_medhelm.values import Instance

OPEN = ("mtsamples", "mtsamples_procedures", "aci_bench", "medicationqa", "mediqa", "meddialog")

SUBCATEGORIES = {
    "mtsamples": ("clinical_decision_support", "Planning Treatments"),
    "mtsamples_procedures": ("clinical_note_generation", "Recording Procedures"),
    "aci_bench": ("clinical_note_generation", "Documenting Patient Visits"),
    "medicationqa": ("patient_communication", "Providing Patient Education Resources"),
    "mediqa": ("patient_communication", "Enhancing Patient Understanding and Accessibility"),
    "meddialog": ("patient_communication", "Patient-Provider Messaging"),
}

#: HELM's generation settings (medhelm_run_specs.py): max_tokens, and stop_sequences=[] for all six
MAX_TOKENS = {
    "mtsamples": 512, "mtsamples_procedures": 512, "aci_bench": 768, "medicationqa": 512, "mediqa": 1024,
    "meddialog": 80,
}

#: HELM's instance counts on the pinned public data (see each module's docstring for the reasoning)
REAL_COUNTS = {"aci_bench": 120, "medicationqa": 689, "mediqa": 150, "mtsamples": 427, "mtsamples_procedures": 131}

ACI_INSTRUCTIONS = (
    "Summarize the conversation to generate a clinical note with four sections:\n"
    "1. HISTORY OF PRESENT ILLNESS\n2. PHYSICAL EXAM\n3. RESULTS\n4. ASSESSMENT AND PLAN\n\n"
    "The conversation is:"
)
ACI_FILES = ("clinicalnlp_taskB_test1_full.json", "clef_taskC_test3_full.json", "clinicalnlp_taskC_test2_full.json")
MEDIQA_FILE = "MEDIQA2019-Task3-QA-TestSet-wLabels.xml"


# --------------------------------------------------------------------------------------------------------------
# Definitions


@pytest.mark.parametrize("slug", OPEN)
def test_definition_metadata(slug: str) -> None:
    benchmark = BENCHMARKS[slug]
    category, subcategory = SUBCATEGORIES[slug]
    assert benchmark.category == category and category in CATEGORY_BY_SLUG
    assert benchmark.subcategory == subcategory
    assert (benchmark.access, benchmark.kind) == ("public", "open")
    assert benchmark.stop == ()
    assert benchmark.max_tokens == MAX_TOKENS[slug]
    # the LLM jury is the main score; ROUGE-L is recorded beside it
    assert benchmark.is_judged and benchmark.metric.name.endswith("_accuracy")
    assert (benchmark.metric.binary, benchmark.metric.pass_mark) == (False, 0.5)
    assert all(f.url.startswith("https://") for f in benchmark.files)


@pytest.mark.parametrize("slug", ["aci_bench", "medicationqa", "mediqa"])
def test_single_files_are_pinned(slug: str) -> None:
    for file in BENCHMARKS[slug].files:
        assert len(file.sha256) == 64 and not file.is_dir
        assert "/master/" not in file.url and "/main/" not in file.url


def test_folders_and_meddialog_files() -> None:
    (folder,) = BENCHMARKS["mtsamples"].files
    assert folder.is_dir and folder.name == "mtsamples_processed" and mtsamples.GIT_HASH in folder.url
    (folder,) = BENCHMARKS["mtsamples_procedures"].files
    assert folder.is_dir and folder.name == "mtsample_procedure" and mtsamples_procedures.GIT_HASH in folder.url
    names = [f.name for f in BENCHMARKS["meddialog"].files]
    assert names == ["healthcaremagic/test.json", "icliniq/test.json"]
    assert all("0x82f0c47f6d3e4462ae9ef8ea39eebe64" in f.url for f in BENCHMARKS["meddialog"].files)
    assert [f.name for f in BENCHMARKS["aci_bench"].files] == list(ACI_FILES)  # HELM's TEST_URLS order


def test_nothing_heavy_is_imported_with_the_catalogue() -> None:
    modules = ", ".join(f"pytest_medhelm.catalogue.{BENCHMARKS[slug].category}.{slug}" for slug in OPEN)
    code = (
        f"import sys, importlib; [importlib.import_module(m) for m in '{modules}'.split(', ')]; "
        "import pytest_medhelm.metrics.rouge; "
        "heavy = [m for m in ('rouge_score', 'nltk', 'openpyxl') if m in sys.modules]; "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[2])


# --------------------------------------------------------------------------------------------------------------
# (a) Real data: counts, order, ids, what the filters drop


@pytest.mark.parametrize("slug", sorted(REAL_COUNTS))
def test_real_data_counts(slug: str) -> None:
    instances = load(slug, real(slug))
    assert len(instances) == REAL_COUNTS[slug]
    ids = [instance.id for instance in instances]
    assert len(set(ids)) == len(ids) and all(i and " " not in i for i in ids)
    benchmark = BENCHMARKS[slug]
    for instance in instances[:5]:
        assert instance.references and instance.references[0].strip()
        prompt = benchmark.render_prompt(instance)
        # Instance.input is HELM's instance.input.text (what the jury sees), not the prompt
        assert prompt != instance.input and prompt.count(instance.input) >= 1
        assert prompt.startswith(benchmark.prompt.instructions + "\n\n")


def test_real_mtsamples_filter_report() -> None:
    folder = real("mtsamples") / "mtsamples" / "mtsamples_processed"
    instances, dropped = mtsamples.build_instances_with_report({"mtsamples_processed": folder})
    assert len(instances) == 427
    assert dropped == {
        "beyond_github_listing_limit": 269,
        "not_txt": 0,
        "url_fragment": 0,
        "section_case_mismatch": 1,
        "no_reference_section": 567,
        "empty_reference": 5,
    }
    assert 427 + sum(dropped.values()) == 1269
    sections = [i.extra["reference_section"] for i in instances]
    assert (sections.count("PLAN"), sections.count("FINDINGS"), sections.count("SUMMARY")) == (258, 154, 15)
    assert all("PLAN:" not in i.input for i in instances)
    # HELM's order: the listing sorted by the bytes of the names ("AC ..." before "Abdominal ...")
    names = [i.extra["file"] for i in instances]
    assert names == sorted(names, key=lambda n: n.encode())
    assert instances[0].id == "1-year-old_Exam_-_H_P"
    # Without the API's 1,000-entry limit the same rules keep 539 notes
    everything = mtsamples.select_notes(folder, "mtsamples", ("PLAN:",), listing_limit=None)
    assert len(everything) == 539 and everything.counts(mtsamples.DROP_REASONS)["beyond_github_listing_limit"] == 0
    # the same counts, as the plugin reports them (reason -> count, zeros left out)
    assert sum(instances.removed.values()) == 1269 - 427 and len(instances.removed) == 4


def test_real_mtsamples_procedures_filter_report() -> None:
    folder = real("mtsamples_procedures") / "mtsamples_procedures" / "mtsample_procedure"
    instances, dropped = mtsamples_procedures.build_instances_with_report({"mtsample_procedure": folder})
    assert len(instances) == 131
    assert dropped == {
        "beyond_github_listing_limit": 0,
        "not_txt": 0,
        "url_fragment": 0,
        "section_case_mismatch": 0,
        "no_reference_section": 298,
        "empty_reference": 0,
    }
    sections = [i.extra["reference_section"] for i in instances]
    assert (sections.count("FINDINGS"), sections.count("PLAN"), sections.count("SUMMARY")) == (98, 27, 6)
    assert not any(marker in i.input for i in instances for marker in ("PLAN:", "SUMMARY:", "FINDINGS:"))


def test_real_mtsamples_procedures_under_compat_helm_drops_the_names_with_a_hash() -> None:
    """HELM 0.5.16 yields 128: seven names contain '#', which its download URL takes as a fragment."""
    folder = real("mtsamples_procedures") / "mtsamples_procedures" / "mtsample_procedure"
    files = {"mtsample_procedure": folder}
    default = BENCHMARKS["mtsamples_procedures"].instance_builder("default")(files)
    helm = BENCHMARKS["mtsamples_procedures"].instance_builder("helm")(files)
    assert len(default) == 131 and len(helm) == 128
    assert helm.counts(mtsamples.DROP_REASONS)["url_fragment"] == 7
    lost = [i for i in default if "#" in i.extra["file"]]
    assert len(lost) == 3 and [i.id for i in helm] == [i.id for i in default if i not in lost]
    # MTSamples has no such name: both modes give the same 427
    notes = {"mtsamples_processed": real("mtsamples") / "mtsamples" / "mtsamples_processed"}
    assert BENCHMARKS["mtsamples"].instance_builder("helm")(notes) == BENCHMARKS["mtsamples"].build_instances(notes)


def test_real_aci_bench_order_and_input() -> None:
    instances = load("aci_bench", real("aci_bench"))
    assert [i.extra["source_file"] for i in instances] == [name for name in ACI_FILES for _ in range(40)]
    assert instances[0].id == "D2N088-virtassist" and instances[40].id == "D2N168-virtassist"
    assert all(i.input.startswith("Doctor-patient dialogue:\n\n") for i in instances)


def test_real_medicationqa_drops_the_n_a_answer_as_pandas_does() -> None:
    path = real("medicationqa") / "medicationqa" / medicationqa.FILE
    instances, dropped = medicationqa.build_instances_with_report({medicationqa.FILE: path})
    assert len(instances) == 689 and dropped == {"blank_row": 0, "no_answer": 1}
    assert instances.removed == {medicationqa.DROP_REASONS["no_answer"]: 1}  # what --medhelm-list and the JSON say
    ids = {i.id for i in instances}
    assert "row214" not in ids and {"row2", "row213", "row215", "row691"} <= ids
    assert instances[0].input == "how does rivatigmine and otc sleep medicine interact"


def test_real_mediqa_references_are_rank_one() -> None:
    instances = load("mediqa", real("mediqa"))
    ids = [i.id for i in instances]
    assert ids[:4] == ["1", "2", "3", "5"] and ids[-1] == "195"  # QIDs run 1-195 with gaps, in file order
    assert ids == sorted(ids, key=int)
    assert instances[0].input.startswith("abetalipoproteimemia hi, I would like to know")
    assert instances[0].references[0].startswith("Bassen-Kornzweig syndrome:")
    assert all(i.extra["answer_id"].startswith(f"{i.id}_Answer") for i in instances)


# --------------------------------------------------------------------------------------------------------------
# (b) Synthetic files: loaders and exact prompts


def write_notes(tmp_path: Path, slug: str, folder: str, notes: dict[str, str | bytes]) -> Path:
    for name, text in notes.items():
        write(tmp_path, slug, f"{folder}/{name}", text)
    return tmp_path / slug / folder


MTSAMPLES_NOTES = {
    "b.txt": "HISTORY: Knee pain.\r\nFINDINGS: Effusion.\r\nPLAN: Physical therapy.\r\nFollow up.\r\n",
    "A.txt": "  HISTORY: Cough.\nSUMMARY: Viral.\nFINDINGS: Clear lungs.\n",  # upper case sorts first
    "a.txt": "HISTORY: x.\nFindings: lower case only.\nPLAN: would be fine.\n",  # HELM's IndexError
    "c.txt": "A note without any reference section.\n",
    "d.txt": "HISTORY: y.\nPLAN:\nOn the next line.\nSUMMARY: Stable.\n",  # empty PLAN rest -> SUMMARY
    "e.txt": "HISTORY: z.\nPLAN:   \n",  # a marker with nothing after it
    "notes.md": "PLAN: not a .txt file\n",
    ".DS_Store": b"\x00\x01",  # not part of the upstream folder
}


def test_mtsamples_synthetic(tmp_path: Path) -> None:
    write_notes(tmp_path, "mtsamples", "mtsamples_processed", MTSAMPLES_NOTES)
    folder = tmp_path / "mtsamples" / "mtsamples_processed"
    instances, dropped = mtsamples.build_instances_with_report({"mtsamples_processed": folder})
    assert [i.id for i in instances] == ["A", "b", "d"]
    first, second, third = instances
    # reference: PLAN > SUMMARY > FINDINGS; input: cut at PLAN only, so A keeps its SUMMARY line
    assert first.references == ("Viral.",) and first.extra == {"file": "A.txt", "reference_section": "SUMMARY"}
    assert first.input == "HISTORY: Cough.\nSUMMARY: Viral.\nFINDINGS: Clear lungs."
    assert second.references == ("Physical therapy.",) and second.input == "HISTORY: Knee pain.\nFINDINGS: Effusion."
    assert third.references == ("Stable.",) and third.input == "HISTORY: y."
    assert dropped == {
        "beyond_github_listing_limit": 0,
        "not_txt": 1,
        "url_fragment": 0,
        "section_case_mismatch": 1,
        "no_reference_section": 1,
        "empty_reference": 1,
    }
    assert BENCHMARKS["mtsamples"].render_prompt(second) == (
        "Given various information about a patient, return a reasonable treatment plan for the patient.\n\n"
        "HISTORY: Knee pain.\nFINDINGS: Effusion.\nAnswer:"
    )
    assert load("mtsamples", tmp_path) == instances


def test_mtsamples_listing_limit(tmp_path: Path) -> None:
    folder = write_notes(tmp_path, "mtsamples", "mtsamples_processed", MTSAMPLES_NOTES)
    instances = mtsamples.select_notes(folder, "mtsamples", ("PLAN:",), listing_limit=3)
    dropped = instances.counts(mtsamples.DROP_REASONS)
    # the first 3 entries of the listing are A.txt, a.txt, b.txt
    assert [i.id for i in instances] == ["A", "b"]
    assert dropped["beyond_github_listing_limit"] == 4 and dropped["section_case_mismatch"] == 1


def test_mtsamples_ids_from_file_names() -> None:
    assert mtsamples.note_id("Chronic Kidney Disease - Followup.txt") == "Chronic_Kidney_Disease_-_Followup"
    assert mtsamples.note_id("Chronic Kidney Disease Followup.txt") == "Chronic_Kidney_Disease_Followup"
    assert mtsamples.note_id("Bell's Palsy.txt") == "Bell_s_Palsy"
    assert mtsamples.note_id("2-D Echocardiogram - 1.txt") == "2-D_Echocardiogram_-_1"


def test_mtsamples_duplicate_ids_are_an_error(tmp_path: Path) -> None:
    folder = write_notes(tmp_path, "mtsamples", "mtsamples_processed",
                         {"x y.txt": "PLAN: a\n", "x&y.txt": "PLAN: b\n"})
    with pytest.raises(DataError, match="instance id 'x_y'"):
        mtsamples.build_instances({"mtsamples_processed": folder})


def test_mtsamples_procedures_synthetic(tmp_path: Path) -> None:
    notes = {
        "p1.txt": "PROCEDURE: Repair.\nFINDINGS: Torn tendon.\nSUMMARY: Repaired.\nPLAN: Splint.\n",
        "p2.txt": "PROCEDURE: Scope.\nDESCRIPTION: Normal.\n",
        "p3.txt": "PROCEDURE: Biopsy.\nSUMMARY: Tolerated well.\nFINDINGS: Mass.\n",
    }
    write_notes(tmp_path, "mtsamples_procedures", "mtsample_procedure", notes)
    one, three = load("mtsamples_procedures", tmp_path)
    # cut successively at PLAN:, SUMMARY:, FINDINGS: -> no reference line stays in the input
    assert one.input == "PROCEDURE: Repair." and one.references == ("Splint.",)
    assert three.input == "PROCEDURE: Biopsy." and three.references == ("Tolerated well.",)
    assert BENCHMARKS["mtsamples_procedures"].render_prompt(one) == (
        "Here are information about a patient, return a reasonable treatment plan for the patient.\n\n"
        "Patient Notes: PROCEDURE: Repair.\nAnswer:"
    )


def aci_file(*records: dict) -> str:
    return json.dumps({"data": list(records)})


def test_aci_bench_synthetic(tmp_path: Path) -> None:
    write(tmp_path, "aci_bench", ACI_FILES[0], aci_file({"src": "[doctor] hi\n[patient] hello", "tgt": "NOTE 1",
                                                         "file": "D2N001-virtassist"}))
    write(tmp_path, "aci_bench", ACI_FILES[1], aci_file({"src": "s2", "tgt": "t2", "file": "D2N002-aci"},
                                                        {"src": "s3", "tgt": "t3"}))
    write(tmp_path, "aci_bench", ACI_FILES[2], aci_file({"src": "s4", "tgt": "t4", "file": "D2N004-aci"}))
    instances = load("aci_bench", tmp_path)
    assert [i.id for i in instances] == ["D2N001-virtassist", "D2N002-aci", "test2-1", "D2N004-aci"]
    first = instances[0]
    assert first.input == "Doctor-patient dialogue:\n\n[doctor] hi\n[patient] hello"
    assert first.references == ("NOTE 1",)
    assert BENCHMARKS["aci_bench"].render_prompt(first) == (
        ACI_INSTRUCTIONS + "\n\n"
        "Conversation: Doctor-patient dialogue:\n\n[doctor] hi\n[patient] hello\nClinical Note:"
    )


def write_xlsx(path: Path, rows: list[list]) -> Path:
    import openpyxl

    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.title = "DrugQA"
    for row in rows:
        sheet.append(row)
    path.parent.mkdir(parents=True, exist_ok=True)
    workbook.save(path)
    return path


MEDQA_HEADER = ["Question", "Focus (Drug)", "Question Type", "Answer", "Section Title", "URL"]


def test_medicationqa_synthetic(tmp_path: Path) -> None:
    path = write_xlsx(tmp_path / "medicationqa" / medicationqa.FILE, [
        MEDQA_HEADER,
        ["how much aspirin can I take?", "aspirin", "Dose", "Up to 4 g a day.", "Dosage", "https://x"],
        ["what is this?", "n/a", "not_drug_question", "n/a", "n/a", "n/a"],  # pandas reads "n/a" as null
        [None, None, None, None, None, None],  # a blank row
        ["is it safe?", "drug", "Usage", None, None, None],  # no answer
        ["how many pills?", "drug", "Dose", 2.0, None, None],  # a number, as pandas gives it
    ])
    instances, dropped = medicationqa.build_instances_with_report({medicationqa.FILE: path})
    assert [i.id for i in instances] == ["row2", "row6"]
    assert dropped == {"blank_row": 1, "no_answer": 2}
    first, second = instances
    assert first.input == "how much aspirin can I take?" and first.references == ("Up to 4 g a day.",)
    assert second.references == ("2",)
    assert BENCHMARKS["medicationqa"].render_prompt(first) == (
        "Please answer the following consumer health question.\n\n"
        "Question: how much aspirin can I take?\nAnswer:"
    )
    assert load("medicationqa", tmp_path) == instances


def mediqa_xml(*questions: str) -> str:
    return '<?xml version="1.0" encoding="UTF-8"?>\n<MEDIQA2019-Task3-QA-TestSet>\n' + "".join(questions) + \
        "</MEDIQA2019-Task3-QA-TestSet>\n"


def mediqa_question(qid: str, text: str, answers: list[tuple[str, str]]) -> str:
    body = "".join(
        f'<Answer AID="{qid}_Answer{k}" SystemRank="{k}" ReferenceRank="{rank}" ReferenceScore="3">'
        f"<AnswerURL>https://u/{k}</AnswerURL><AnswerText>{answer}</AnswerText></Answer>"
        for k, (rank, answer) in enumerate(answers, start=1)
    )
    return f'<Question QID="{qid}"><QuestionText>{text}</QuestionText><AnswerList>{body}</AnswerList></Question>\n'


def test_mediqa_synthetic(tmp_path: Path) -> None:
    xml = mediqa_xml(
        mediqa_question("7", "noonan syndrome. What&apos;s the risk? ", [("2", "second"), ("1", "best &amp; first"),
                                                                          ("1", "a later rank 1")]),
        mediqa_question("8", "Is X safe?", [("1", "Yes.")]),
    )
    write(tmp_path, "mediqa", MEDIQA_FILE, xml)
    first, second = load("mediqa", tmp_path)
    assert (first.id, second.id) == ("7", "8")
    # the question text exactly as ElementTree gives it (entities decoded, trailing space kept)
    assert first.input == "noonan syndrome. What's the risk? "
    assert first.references == ("best & first",) and first.extra["answer_id"] == "7_Answer2"
    assert BENCHMARKS["mediqa"].render_prompt(first) == (
        "Answer the following consumer health question.\n\n"
        "Question: noonan syndrome. What's the risk? \nAnswer:"
    )


def meddialog_files(tmp_path: Path, healthcaremagic: list[dict], icliniq: list[dict]) -> None:
    write(tmp_path, "meddialog", "healthcaremagic/test.json", json.dumps({"data": healthcaremagic}))
    write(tmp_path, "meddialog", "icliniq/test.json", json.dumps({"data": icliniq}))


def test_meddialog_synthetic(tmp_path: Path) -> None:
    meddialog_files(
        tmp_path,
        [{"src": "Patient: I have a cough. Doctor: Rest.", "tgt": "Cough advice?"}, {"src": "s1", "tgt": "t1"}],
        [{"src": "Patient: Knee pain. Doctor: See MRI.", "tgt": "Knee MRI?"}],
    )
    instances = load("meddialog", tmp_path)
    assert [(i.id, i.subset) for i in instances] == [
        ("healthcaremagic-0", "healthcaremagic"), ("healthcaremagic-1", "healthcaremagic"), ("icliniq-0", "icliniq")
    ]
    first = instances[0]
    assert first.input == "Patient: I have a cough. Doctor: Rest." and first.references == ("Cough advice?",)
    assert BENCHMARKS["meddialog"].render_prompt(first) == (
        "Generate a one sentence summary of this patient-doctor conversation.\n\n"
        "Patient-Doctor: Patient: I have a cough. Doctor: Rest.\nSummary:"
    )


def test_meddialog_sample_per_subset() -> None:
    def subset_instances(subset: str, n: int) -> list[Instance]:
        return [Instance(id=f"{subset}-{k}", input="x", references=("y",), subset=subset) for k in range(n)]

    hcm, icl = subset_instances("healthcaremagic", 30), subset_instances("icliniq", 12)
    sample = helm_sample_by_subset(hcm + icl, 5)
    # HELM's two runs: each subset sampled on its own, as np.random.seed(0); np.random.choice(n, 5)
    assert sample == helm_sample(hcm, 5) + helm_sample(icl, 5)
    assert helm_sample_by_subset(hcm + icl, None) == hcm + icl
    assert helm_sample_by_subset(icl, 50) == icl
    # one subset (every single-run benchmark): the same sample as helm_sample
    assert helm_sample_by_subset(hcm, 7) == helm_sample(hcm, 7)


def test_missing_data_names_file_and_source(tmp_path: Path) -> None:
    with pytest.raises(DataMissing) as info:
        resolve_files(BENCHMARKS["meddialog"], tmp_path, download=False)
    message = str(info.value)
    assert "healthcaremagic/test.json" in message and "worksheets.codalab.org" in message
    with pytest.raises(DataMissing, match=r"mtsamples_processed.*github\.com/raulista1997"):
        resolve_files(BENCHMARKS["mtsamples"], tmp_path, download=False)
    with pytest.raises(DataMissing, match="mtsamples_processed"):
        BENCHMARKS["mtsamples"].build_instances({})


# --------------------------------------------------------------------------------------------------------------
# (c) ROUGE by hand


def gen(*references: str) -> Instance:
    return Instance(id="g", input="?", references=references)


@pytest.mark.parametrize(
    ("reference", "answer", "rouge_1", "rouge_2", "rouge_l"),
    [
        ("the cat sat on the mat", "the cat sat on the mat", 1.0, 1.0, 1.0),
        # LCS 3 of 3 predicted and 6 reference tokens: P 1, R 1/2, F 2/3; bigrams 2 of 2 and 5: F 4/7
        ("the cat sat on the mat", "the cat sat", 2 / 3, 4 / 7, 2 / 3),
        # same words in reverse order: all unigrams match, no bigram, LCS 1: F 1/3
        ("the cat sat", "sat cat the", 1.0, 0.0, 1 / 3),
        ("The CAT, sat!", "the cat sat", 1.0, 1.0, 1.0),  # lowercase, punctuation is a separator
        ("running cats", "run cat", 1.0, 1.0, 1.0),  # Porter stemming
        ("the cat sat", "", 0.0, 0.0, 0.0),
        ("the cat sat", "   ", 0.0, 0.0, 0.0),
        ("{the cat sat}", "{the cat sat}", 1.0, 1.0, 1.0),
    ],
)
def test_rouge_hand_cases(reference: str, answer: str, rouge_1: float, rouge_2: float, rouge_l: float) -> None:
    score = RougeL().score(answer, gen(reference))
    assert score.value == pytest.approx(rouge_l) and score.raw == pytest.approx(rouge_l)
    assert score.extra == {"rouge_1": pytest.approx(rouge_1), "rouge_2": pytest.approx(rouge_2)}


def test_rouge_is_the_maximum_over_references() -> None:
    score = ROUGE_L.score("the cat sat", gen("a dog barked", "the cat sat", "cat"))
    assert score.value == 1.0
    # each ROUGE type takes its own maximum, possibly from different references
    scores = rouge_scores(["cat sat", "the cat"], "the cat sat")
    assert scores["rouge_l"] == pytest.approx(0.8) and scores["rouge_2"] == pytest.approx(2 / 3)


def test_rouge_compat_and_detail() -> None:
    instance = gen("Take ibuprofen 400 mg every 6 hours as needed.")
    default = ROUGE_L.score("Rest.", instance)
    assert ROUGE_L.score("Rest.", instance, compat="helm") == default
    assert default.value == 0.0 and default.value < ROUGE_L.pass_mark
    assert default.detail.startswith("ROUGE-L F 0.000 against the reference 'Take ibuprofen")
    assert default.detail.endswith("got 'Rest.'")


def test_rouge_needs_a_reference() -> None:
    with pytest.raises(ValueError, match="no reference"):
        ROUGE_L.score("x", Instance(id="n", input="?"))


def test_remove_braces_and_cached_scorer() -> None:
    assert remove_braces("{a}") == "a" and remove_braces("{{a}}") == "{a}" and remove_braces("}a{") == "}a{"
    assert rouge_scorer() is rouge_scorer()


# --------------------------------------------------------------------------------------------------------------
# (d) Malformed files: a DataError naming the file, the place and what was expected


def test_aci_truncated_json(tmp_path: Path) -> None:
    for name in ACI_FILES[1:]:
        write(tmp_path, "aci_bench", name, aci_file({"src": "s", "tgt": "t"}))
    path = write(tmp_path, "aci_bench", ACI_FILES[0], '{"data": [{"src": "[doctor] hi", "tg')
    with pytest.raises(DataError) as info:
        load("aci_bench", tmp_path)
    assert info.value.path == str(path) and info.value.where.startswith("line 1, column ")
    assert "invalid JSON" in info.value.problem


def test_aci_missing_key(tmp_path: Path) -> None:
    write(tmp_path, "aci_bench", ACI_FILES[0], aci_file({"src": "s", "tgt": "t"}))
    path = write(tmp_path, "aci_bench", ACI_FILES[1], aci_file({"src": "s", "tgt": "t"}, {"src": "s2"}))
    write(tmp_path, "aci_bench", ACI_FILES[2], aci_file({"src": "s", "tgt": "t"}))
    with pytest.raises(DataError) as info:
        load("aci_bench", tmp_path)
    assert (info.value.path, info.value.where) == (str(path), "data[1]")
    assert "missing key 'tgt'" in info.value.problem


def test_aci_wrong_shape(tmp_path: Path) -> None:
    for name in ACI_FILES:
        write(tmp_path, "aci_bench", name, json.dumps({"data": {"src": "s"}}))
    with pytest.raises(DataError, match="key 'data'.*expected a list"):
        load("aci_bench", tmp_path)
    for name in ACI_FILES:
        write(tmp_path, "aci_bench", name, json.dumps([{"src": "s", "tgt": "t"}]))
    with pytest.raises(DataError, match="top level.*'data'"):
        load("aci_bench", tmp_path)


def test_meddialog_bad_records(tmp_path: Path) -> None:
    meddialog_files(tmp_path, [{"src": "s", "tgt": "t"}], [{"src": "s"}, {"tgt": "t"}])
    with pytest.raises(DataError) as info:
        load("meddialog", tmp_path)
    assert info.value.path == str(tmp_path / "meddialog" / "icliniq" / "test.json")
    assert info.value.where == "data[0]" and "missing key 'tgt'" in info.value.problem
    meddialog_files(tmp_path, [{"src": ["not", "text"], "tgt": "t"}], [{"src": "s", "tgt": "t"}])
    with pytest.raises(DataError, match=r"data\[0\].*'src' to be a string"):
        load("meddialog", tmp_path)
    write(tmp_path, "meddialog", "healthcaremagic/test.json", '{"data": [{"src": "Patient: hel')
    with pytest.raises(DataError, match="healthcaremagic.*invalid JSON"):
        load("meddialog", tmp_path)


def test_mediqa_malformed(tmp_path: Path) -> None:
    path = write(tmp_path, "mediqa", MEDIQA_FILE,
                 mediqa_xml(mediqa_question("1", "Q?", [("1", "A")]))[:-40])  # truncated
    with pytest.raises(DataError) as info:
        load("mediqa", tmp_path)
    assert info.value.path == str(path) and info.value.where.startswith("line ")
    assert "invalid XML" in info.value.problem
    write(tmp_path, "mediqa", MEDIQA_FILE, mediqa_xml(mediqa_question("5", "Q?", [("2", "A"), ("3", "B")])))
    with pytest.raises(DataError, match=r"<Question QID='5'>.*ReferenceRank=\"1\""):
        load("mediqa", tmp_path)
    write(tmp_path, "mediqa", MEDIQA_FILE, mediqa_xml(mediqa_question("6", "Q?", [("first", "A")])))
    with pytest.raises(DataError, match=r"QID='6'.*AID='6_Answer1'.*ReferenceRank must be an integer"):
        load("mediqa", tmp_path)
    write(tmp_path, "mediqa", MEDIQA_FILE, mediqa_xml('<Question QID="9"><QuestionText>Q?</QuestionText></Question>'))
    with pytest.raises(DataError, match="QID='9'.*missing <AnswerList>"):
        load("mediqa", tmp_path)
    write(tmp_path, "mediqa", MEDIQA_FILE, "<root><Other/></root>")
    with pytest.raises(DataError, match="no <Question> element"):
        load("mediqa", tmp_path)


def test_medicationqa_malformed(tmp_path: Path) -> None:
    path = tmp_path / "medicationqa" / medicationqa.FILE
    write_xlsx(path, [["Question", "Focus (Drug)", "Reply"], ["q?", "d", "a"]])
    with pytest.raises(DataError) as info:
        load("medicationqa", tmp_path)
    assert (info.value.path, info.value.where) == (str(path), "header (sheet row 1)")
    assert "'Answer'" in info.value.problem and "'Reply'" in info.value.problem
    write_xlsx(path, [MEDQA_HEADER, ["q?", "d", "t", "a", "s", "u"], [None, "d", "t", "an answer", "s", "u"]])
    with pytest.raises(DataError, match=r"sheet row 3.*Question"):
        load("medicationqa", tmp_path)
    write(tmp_path, "medicationqa", medicationqa.FILE, "Question,Answer\nq,a\n")  # a CSV under the .xlsx name
    with pytest.raises(DataError, match=r"not a readable \.xlsx workbook"):
        load("medicationqa", tmp_path)
    write_xlsx(path, [MEDQA_HEADER, ["q?", "d", "t", None, "s", "u"]])
    with pytest.raises(DataError, match="no row with both"):
        load("medicationqa", tmp_path)


def test_mtsamples_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "mtsamples" / "mtsamples_processed").mkdir(parents=True)
    with pytest.raises(DataError, match="folder is empty"):
        load("mtsamples", tmp_path)


EMPTY_FILES = {
    "aci_bench": ACI_FILES[0],
    "mediqa": MEDIQA_FILE,
    "medicationqa": medicationqa.FILE,
    "meddialog": "healthcaremagic/test.json",
    "mtsamples": "mtsamples_processed/a.txt",
    "mtsamples_procedures": "mtsample_procedure/a.txt",
}


@pytest.mark.parametrize("slug", OPEN)
def test_empty_file(tmp_path: Path, slug: str) -> None:
    for file in BENCHMARKS[slug].files:  # every other file present and valid
        if slug == "aci_bench":
            write(tmp_path, slug, file.name, aci_file({"src": "s", "tgt": "t"}))
        elif slug == "meddialog":
            write(tmp_path, slug, file.name, json.dumps({"data": [{"src": "s", "tgt": "t"}]}))
    path = write(tmp_path, slug, EMPTY_FILES[slug], "")
    with pytest.raises(DataError) as info:
        load(slug, tmp_path)
    assert info.value.path == str(path) and "empty" in info.value.problem


@pytest.mark.parametrize(
    ("slug", "name", "text"),
    [
        ("mtsamples", "mtsamples_processed/Caf\u00e9.txt", "HISTORY: caf\u00e9.\nPLAN: rest.\n"),
        ("mediqa", MEDIQA_FILE, mediqa_xml(mediqa_question("1", "Caf\u00e9?", [("1", "A")]))),
        ("aci_bench", ACI_FILES[0], '{"data": [{"src": "caf\u00e9", "tgt": "t"}]}'),
    ],
)
def test_wrong_encoding_gives_byte_offset(tmp_path: Path, slug: str, name: str, text: str) -> None:
    for file in BENCHMARKS[slug].files[1:]:
        write(tmp_path, slug, file.name, aci_file({"src": "s", "tgt": "t"}))
    raw = text.encode("latin-1")
    path = write(tmp_path, slug, name, raw)
    with pytest.raises(DataError) as info:
        load(slug, tmp_path)
    offset = raw.index(b"\xe9")
    line = raw[:offset].count(b"\n") + 1
    assert info.value.path == str(path)
    assert info.value.where == f"byte {offset} (line {line})"
    assert "UTF-8" in info.value.problem
