"""EHRSQL, MedHallu, RaceBias, MedQA and MedMCQA: loaders, prompts, metrics, bad files. (Google Drive downloads:
tests/data/test_gdrive.py.)

Real data is read from ``../shared/data`` beside the repository when it exists (skipped otherwise); everything
else runs on small synthetic files written to ``tmp_path`` (EHRSQL's database is built from a schema file in
EHRSQL's layout, with made-up rows). No test touches the network.
"""

from __future__ import annotations

import json
import sqlite3
import zipfile
from pathlib import Path

import pytest
from catalogue_helpers import (
    BENCHMARKS,
    MEDQA_DEV,
    MEDQA_MEMBER,
    MEDQA_TEST,
    REAL_DATA,
    ROUTE_QUERY,
    SCHEMA,
    SCHEMA_IN_PROMPT,
    check_real_count_and_reference_prompt,
    entry,
    jsonl,
    load,
    loaded,
    make_database,
    medqa_zip,
    write,
    write_ehrsql,
)

from pytest_medhelm.catalogue.medical_research import racebias
from pytest_medhelm.data import gdrive
from pytest_medhelm.data.errors import DataError, DataMissing
from pytest_medhelm.data.sources import resolve_files
from pytest_medhelm.metrics.ehrsql import (
    EhrSqlExecutionAccuracy,
    QueryError,
    normalize_gold_sql,
    run_query,
)
from pytest_medhelm.values import Instance

SLUGS = ("ehrsql", "medhallu", "racebias", "medqa", "medmcqa")

#: instances on the real data, no cap. RaceBias: 175 run headers, 4 of them ("Run N:" + no-break space) skipped
#: by HELM's parse, 4 more entries repeat an earlier prompt and collapse: 167, HELM's count
REAL_COUNTS = {"ehrsql": 2909, "medhallu": 2000, "racebias": 167}
HELM_CAP = 1000

MC_TAIL = "Respond only with 'A', 'B', 'C' or 'D'. Do not add any other text, punctuation, or symbols.:"
MC_INSTRUCTIONS = "Give a letter answer among A, B, C or D. Do not include any explanation or additional text."


# --------------------------------------------------------------------------------------------------------------
# Definitions


@pytest.mark.parametrize(
    ("slug", "category", "subcategory", "max_tokens", "metric"),
    [
        ("ehrsql", "medical_research", "Analyzing Clinical Research Data", 1024, "ehr_sql_execution_accuracy"),
        ("medhallu", "medical_research", "Ensuring Clinical Research Quality", 5, "exact_match"),
        ("racebias", "medical_research", "Ensuring Clinical Research Quality", 1, "exact_match"),
        ("medqa", "clinical_decision_support", "Providing Clinical Knowledge Support", 1, "exact_match"),
        ("medmcqa", "clinical_decision_support", "Providing Clinical Knowledge Support", 1, "exact_match"),
    ],
)
def test_definition_metadata(slug: str, category: str, subcategory: str, max_tokens: int, metric: str) -> None:
    benchmark = BENCHMARKS[slug]
    assert (benchmark.category, benchmark.subcategory) == (category, subcategory)
    assert (benchmark.access, benchmark.kind) == ("public", "closed")
    assert benchmark.max_tokens == max_tokens and benchmark.metric.name == metric
    assert benchmark.stop == ()  # HELM: stop_sequences=[] (hard-coded [] for multiple choice)
    downloadable = [f for f in benchmark.files if not f.optional]
    assert downloadable and all(f.url.startswith("https://") for f in downloadable)
    # a pinned sha256 wherever it is known; MedHallu's parquet and the Drive archives are documented as unknown
    unknown = {"medhallu": {"train-00000-of-00001.parquet"}, "medqa": {"data_clean.zip"}, "medmcqa": {"data.zip"}}
    for file in downloadable:
        assert len(file.sha256) == 64 or (file.sha256 == "" and file.name in unknown.get(slug, ())), file.name


def test_drive_benchmarks_download_from_google_drive() -> None:
    assert BENCHMARKS["medqa"].files[-1].url == (
        "https://drive.google.com/uc?export=download&id=1ImYUSLk9JbgHXOemfvyiDiirluZHPeQw"
    )
    assert gdrive.file_id(BENCHMARKS["medmcqa"].files[-1].url) == "15VkJdq5eyWIkfb_aoD3oS8i4tScbHYky"


# --------------------------------------------------------------------------------------------------------------
# (a) Real data: counts, and HELM's prompt byte for byte


@pytest.mark.parametrize("slug", sorted(REAL_COUNTS))
def test_real_data_count_and_reference_prompt(slug: str) -> None:
    # the reference prompt is the first HELM sends: the first of its seed-0 sample when capped at 1000, else the
    # first instance
    check_real_count_and_reference_prompt(slug, REAL_COUNTS[slug], cap=HELM_CAP)


def test_real_ehrsql_splits_and_unanswerable() -> None:
    if not (REAL_DATA / "ehrsql").is_dir():
        pytest.skip("no real EHRSQL data")
    instances = load("ehrsql", REAL_DATA)
    splits = [i.extra["split"] for i in instances]
    assert splits == ["valid"] * 1117 + ["test"] * 1792
    unanswerable = [i for i in instances if i.extra["is_impossible"]]
    assert len(unanswerable) == 950 and {i.references[0] for i in unanswerable} == {"null"}
    assert {i.extra["db_path"] for i in instances} == {str(REAL_DATA / "ehrsql" / "eicu.sqlite")}


def test_real_ehrsql_gold_queries_score() -> None:
    if not (REAL_DATA / "ehrsql").is_dir():
        pytest.skip("no real EHRSQL data")
    metric = BENCHMARKS["ehrsql"].metric
    instances = load("ehrsql", REAL_DATA)
    answerable = [i for i in instances if not i.extra["is_impossible"]][::6]
    for instance in answerable:
        gold = instance.references[0]
        # by default the repaired gold query answers its own question where its result has rows (an empty result
        # tells no answer from another: not scored); under HELM's rules the gold query scores only when it
        # returns rows (otherwise the template values stand in for its result)
        own = metric.score(normalize_gold_sql(gold), instance)
        assert own.value == 1.0 or own.not_scored, instance.id
        db = instance.extra["db_path"]
        try:
            has_rows = bool(run_query(db, gold))
        except QueryError:
            has_rows = False
        assert metric.score(gold, instance, compat="helm").value == float(has_rows), instance.id
    for instance in [i for i in instances if i.extra["is_impossible"]][:50]:
        for compat in ("default", "helm"):
            assert metric.score("", instance, compat=compat).value == 1.0
            assert metric.score("SELECT 1", instance, compat=compat).value == 0.0


def test_real_ehrsql_schema_builds_a_synthetic_database(tmp_path: Path) -> None:
    """EHRSQL's own eicu.sql creates the tables; the rows are made up here."""
    schema = REAL_DATA / "ehrsql" / "eicu.sql"
    if not schema.is_file():
        pytest.skip("no real EHRSQL schema")
    db = tmp_path / "synthetic.sqlite"
    with sqlite3.connect(db) as con:
        con.executescript(schema.read_text(encoding="utf-8"))
        con.execute("INSERT INTO medication (medicationid, patientunitstayid, drugname, dosage, routeadmin) "
                    "VALUES (1, 10, 'aspirin 81 mg', '81 mg', 'po')")
    con.close()
    instance = Instance(id="e", input="?", references=(
        "select distinct medication.routeadmin from medication where medication.drugname = 'aspirin 81 mg'",),
        extra={"db_path": str(db), "is_impossible": False, "value": {"drug_name": "aspirin 81 mg"}})
    metric = EhrSqlExecutionAccuracy()
    assert metric.score("SELECT routeadmin FROM medication WHERE drugname LIKE 'aspirin%';", instance).value == 1.0


def test_real_racebias_skipped_and_labels() -> None:
    if not (REAL_DATA / "racebias").is_dir():
        pytest.skip("no real RaceBias data")
    files = resolve_files(BENCHMARKS["racebias"], REAL_DATA, download=False)
    assert racebias.skipped(files) == {
        "run_headers_without_colon_space": 4, "duplicate_prompts": 4, "duplicates_with_other_label": 0,
    }
    instances = loaded("racebias", REAL_DATA)
    assert instances.removed == {
        "run header without ': ' after 'Run N:' (HELM skips it; its answer is lost)": 4,
        "repeated prompt: merged into its first occurrence (HELM keys instances by prompt; last label wins)": 4,
    }
    assert sum(i.correct == 0 for i in instances) == 84  # yes: red text in the response
    assert sum(len(i.extra["runs"]) for i in instances) == 171


def test_real_medhallu_arrow_equals_jsonl() -> None:
    pytest.importorskip("pyarrow")
    folder = REAL_DATA / "medhallu" / "MedHallu_pqa_labeled"
    if not folder.is_dir():
        pytest.skip("no real MedHallu data")
    benchmark = BENCHMARKS["medhallu"]
    from_arrow = benchmark.build_instances({"MedHallu_pqa_labeled": folder})
    assert from_arrow == load("medhallu", REAL_DATA)
    assert ["\u2029" in i.input for i in from_arrow].count(True) == 1


# --------------------------------------------------------------------------------------------------------------
# (b) EHRSQL on a synthetic database (its metric by hand: tests/metrics/test_ehrsql.py)


def test_ehrsql_loader_and_prompt(tmp_path: Path) -> None:
    write_ehrsql(
        tmp_path,
        valid=[entry("aaa111", "what is the route of aspirin 81 mg?", ROUTE_QUERY, {"drug_name": "aspirin 81 mg"}),
               entry("bbb222", "what is the weather tomorrow?", "null", impossible=True)],
        test=[entry("ccc333", "how many patients are there?", "select count(*) from patient", {})],
    )
    first, unanswerable, last = load("ehrsql", tmp_path)
    assert [i.id for i in (first, unanswerable, last)] == ["aaa111", "bbb222", "ccc333"]  # valid, then test
    assert [i.extra["split"] for i in (first, unanswerable, last)] == ["valid", "valid", "test"]
    assert first.references == (ROUTE_QUERY,) and unanswerable.extra["is_impossible"] is True
    assert first.extra["db_path"] == str(tmp_path / "ehrsql" / "eicu.sqlite")
    assert first.extra["value"] == {"drug_name": "aspirin 81 mg"} and unanswerable.extra["value"] == {}
    assert BENCHMARKS["ehrsql"].render_prompt(first) == (
        "You are a highly skilled AI specializing in medical SQL queries. Given a database schema and a medical "
        "question, generate a valid SQL query that retrieves the required information from the database. Output "
        "only the SQL query without explanations.\n\nInput: A database schema followed by a natural language "
        "question.\nOutput: A valid SQL query ending with ;. Only return SQL query, don't add additional text.\n\n"
        "If the question is unanswerable, return an empty string without additional text or comments.\n\n"
        "Medical Question + Schema: -- Database Schema:\n" + SCHEMA_IN_PROMPT + "\n\n"
        "--                     Question:\nwhat is the route of aspirin 81 mg?\n\n\nSQL Query:"
    )
    metric = BENCHMARKS["ehrsql"].metric
    assert metric.score("SELECT routeadmin FROM medication WHERE drugname = 'aspirin 81 mg';", first).value == 1.0
    assert metric.score("", unanswerable).value == 1.0
    assert metric.score("SELECT COUNT(*) FROM patient", last).value == 1.0


@pytest.mark.e2e  # every one of the 2,909 real questions scored: seconds, the slow tier's
def test_real_ehrsql_a_constant_answer_scores_what_it_deserves() -> None:
    """On MedHELM's 7-patient database, 1,091 of the 1,959 answerable gold queries return no rows: those items are
    not scored by default, so a query that returns nothing scores 0 and an empty answer only the unanswerable
    questions (which it gets right); HELM's mode is unchanged."""
    if not (REAL_DATA / "ehrsql").is_dir():
        pytest.skip("no real EHRSQL data")
    metric = BENCHMARKS["ehrsql"].metric
    instances = load("ehrsql", REAL_DATA)
    empty_result = [metric.score("SELECT 1 WHERE 0", i) for i in instances]
    scored = [s for s in empty_result if not s.not_scored]
    assert len(instances) - len(scored) == 1091 and len(scored) == 950 + 868
    assert sum(s.value for s in scored) == 0.0
    reasons = {s.not_scored for s in empty_result if s.not_scored}
    assert reasons == {"the gold query returns no rows on this database: any query returning nothing would match, "
                       "so the item tells no answer from another"}
    abstaining = [metric.score("", i) for i in instances]
    assert [bool(s.not_scored) for s in abstaining] == [bool(s.not_scored) for s in empty_result]  # per item
    right = sum(s.value for s in abstaining if not s.not_scored)
    assert right == 950  # exactly the unanswerable questions
    print(f"\n[ehrsql] SELECT 1 WHERE 0: {0.0:.3f} of {len(scored)} scored items (1,091 not scored); "
          f"empty answer: {right / len(scored):.3f}")
    # HELM's mode scores every item, as before (the template values stand in for an empty gold result)
    helm = [metric.score("SELECT 1 WHERE 0", i, compat="helm") for i in instances[:300]]
    assert not any(s.not_scored for s in helm)


@pytest.mark.e2e  # every one of the 2,909 real questions scored: seconds, the slow tier's
def test_real_ehrsql_helm_answerability_follows_is_impossible(tmp_path: Path) -> None:
    """HELM 0.5.16: answerable = not is_impossible and bool(gold query): 1,959 of the 2,909 questions. (Run on an
    empty database: answerability does not depend on the rows, and every query fails at once.)"""
    if not (REAL_DATA / "ehrsql").is_dir():
        pytest.skip("no real EHRSQL data")
    import dataclasses

    empty_db = tmp_path / "empty.sqlite"
    sqlite3.connect(empty_db).close()
    metric = BENCHMARKS["ehrsql"].metric
    instances = [dataclasses.replace(i, extra={**i.extra, "db_path": str(empty_db)}) for i in load("ehrsql", REAL_DATA)]
    for compat in ("helm", "default"):
        extras = [metric.score("SELECT 1", i, compat=compat).extra for i in instances]
        assert sum(e["ehr_sql_total_ground_truth_answerable"] for e in extras) == 1959, compat
        assert sum(e["ehr_sql_recall_answerable"] for e in extras) == 1959, compat
        assert sum(e["ehr_sql_precision_answerable"] for e in extras) == 1959, compat


def test_ehrsql_bad_files(tmp_path: Path) -> None:
    write_ehrsql(tmp_path, [entry("a1", "q?", "select 1")], [entry("b1", "q?", "select 1")])
    valid = tmp_path / "ehrsql" / "valid.json"
    valid.write_text('[{"id": "a1", "question": "q?", "que', encoding="utf-8")
    with pytest.raises(DataError) as info:
        load("ehrsql", tmp_path)
    assert info.value.path == str(valid) and "invalid JSON" in info.value.problem
    valid.write_text(json.dumps([entry("a1", "q?", "select 1"), {"id": "a2", "question": "q?"}]), encoding="utf-8")
    with pytest.raises(DataError) as info:
        load("ehrsql", tmp_path)
    assert (info.value.path, info.value.where) == (str(valid), "entry 2 (id 'a2')")
    assert "missing key 'query'" in info.value.problem
    valid.write_text(json.dumps([entry("b1", "q?", "select 1")]), encoding="utf-8")
    with pytest.raises(DataError, match=r"test\.json, entry 1 \(id 'b1'\): duplicate id 'b1'"):
        load("ehrsql", tmp_path)
    valid.write_text(json.dumps([{**entry("a1", "q?", "select 1"), "is_impossible": "no"}]), encoding="utf-8")
    with pytest.raises(DataError, match="is_impossible"):
        load("ehrsql", tmp_path)
    valid.write_text(json.dumps([entry("a1", "q?", "select 1", value={"drug": ["a", "b"]})]), encoding="utf-8")
    with pytest.raises(DataError, match="'value' must be an object of template values"):
        load("ehrsql", tmp_path)
    valid.write_text(json.dumps({"a1": {}}), encoding="utf-8")
    with pytest.raises(DataError, match="top level: expected a list"):
        load("ehrsql", tmp_path)


@pytest.mark.parametrize("name", ["valid.json", "test.json", "eicu.sql", "eicu.sqlite"])
def test_ehrsql_empty_file(tmp_path: Path, name: str) -> None:
    write_ehrsql(tmp_path, [entry("a1", "q?", "select 1")], [entry("b1", "q?", "select 1")])
    path = write(tmp_path, "ehrsql", name, "")
    with pytest.raises(DataError) as info:
        load("ehrsql", tmp_path)
    assert info.value.path == str(path) and "empty" in info.value.problem


def test_ehrsql_schema_and_database_checked(tmp_path: Path) -> None:
    write_ehrsql(tmp_path, [entry("a1", "q?", "select 1")], [entry("b1", "q?", "select 1")])
    write(tmp_path, "ehrsql", "eicu.sqlite", "<html>not a database</html>")
    with pytest.raises(DataError, match="eicu.sqlite, header: not an SQLite 3 database"):
        load("ehrsql", tmp_path)
    make_database(tmp_path / "ehrsql" / "eicu2.sqlite")
    (tmp_path / "ehrsql" / "eicu2.sqlite").replace(tmp_path / "ehrsql" / "eicu.sqlite")
    write(tmp_path, "ehrsql", "eicu.sql", "DROP TABLE IF EXISTS patient;\nCREATE TABLE patient\n(\n  a INT\n")
    with pytest.raises(DataError, match=r"eicu\.sql: no complete CREATE TABLE"):
        load("ehrsql", tmp_path)


def test_ehrsql_missing_database_names_it(tmp_path: Path) -> None:
    write(tmp_path, "ehrsql", "valid.json", "[]")
    write(tmp_path, "ehrsql", "test.json", "[]")
    write(tmp_path, "ehrsql", "eicu.sql", SCHEMA)
    with pytest.raises(DataMissing, match="eicu.sqlite.*raulista1997/benchmarkdata"):
        resolve_files(BENCHMARKS["ehrsql"], tmp_path, download=False)


# --------------------------------------------------------------------------------------------------------------
# (c) MedHallu

MEDHALLU_ROWS = [
    {
        "Question": "Does drug X lower blood pressure?",
        "Knowledge": ["Patients' pressure fell.", 'A "double-blind" trial.'],
        "Ground Truth": "Yes, it lowers it.\u2029Modestly.",
        "Difficulty Level": "easy",
        "Hallucinated Answer": "No, it raises it.",
        "Category of Hallucination": "Misinterpretation of #Question#",
    },
    {
        "Question": "Is Y safe?",
        "Knowledge": ["Only one paragraph."],
        "Ground Truth": "Mostly.",
        "Difficulty Level": "hard",
        "Hallucinated Answer": "It cures Z.",
        "Category of Hallucination": "Methodological and Evidence Fabrication",
    },
]

MEDHALLU_TAIL = (
    "Return just an integer value, '0' if the answer is factual and '1' if the answer is hallucinated.\n"
    "No letter or word, just the integer value.\n\nYour Judgment:"
)


def test_medhallu_synthetic(tmp_path: Path) -> None:
    write(tmp_path, "medhallu", "medhallu_pqa_labeled.jsonl", jsonl(MEDHALLU_ROWS))
    instances = load("medhallu", tmp_path)
    assert [i.id for i in instances] == ["0-gt", "0-hal", "1-gt", "1-hal"]
    assert [i.references for i in instances] == [("0",), ("1",), ("0",), ("1",)]
    prompt = BENCHMARKS["medhallu"].render_prompt(instances[0])
    assert prompt.startswith("You are an AI assistant with extensive knowledge in the field of medicine.")
    # the knowledge is printed as a Python list literal, with Python's choice of quotes; U+2029 stays as it is
    assert prompt.endswith(
        "just the integer value.\n\n"
        "World Knowledge: [\"Patients' pressure fell.\", 'A \"double-blind\" trial.']\n\n"
        "Question: Does drug X lower blood pressure?\n\nAnswer: Yes, it lowers it.\u2029Modestly.\n\n"
        + MEDHALLU_TAIL
    )
    assert instances[1].extra["hallucination_category"] == "Misinterpretation of #Question#"
    metric = BENCHMARKS["medhallu"].metric
    assert metric.score("0", instances[0]).value == 1.0
    assert metric.score(" 1\n", instances[1]).value == 1.0
    assert metric.score("1", instances[0]).value == 0.0
    assert metric.score("0.", instances[0]).value == 0.0
    assert metric.score("", instances[0]).value == 0.0


def test_medhallu_arrow_folder_and_parquet(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist(MEDHALLU_ROWS)
    arrow = tmp_path / "a" / "medhallu" / "MedHallu_pqa_labeled" / "train" / "data-00000-of-00001.arrow"
    arrow.parent.mkdir(parents=True)
    with pa.OSFile(str(arrow), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    parquet = tmp_path / "p" / "medhallu" / "train-00000-of-00001.parquet"
    parquet.parent.mkdir(parents=True)
    pq.write_table(table, parquet)
    write(tmp_path / "j", "medhallu", "medhallu_pqa_labeled.jsonl", jsonl(MEDHALLU_ROWS))
    expected = load("medhallu", tmp_path / "j")
    assert list(resolve_files(BENCHMARKS["medhallu"], tmp_path / "a", download=False)) == ["MedHallu_pqa_labeled"]
    assert load("medhallu", tmp_path / "a") == expected
    assert load("medhallu", tmp_path / "p") == expected
    parquet.write_bytes(b"not parquet at all")
    with pytest.raises(DataError, match="not a readable Arrow/Parquet"):
        load("medhallu", tmp_path / "p")


def test_medhallu_without_pyarrow_says_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_pyarrow(name, *args, **kwargs):
        if name.split(".")[0] == "pyarrow":
            raise ImportError("no pyarrow")
        return real_import(name, *args, **kwargs)

    write(tmp_path, "medhallu", "train-00000-of-00001.parquet", b"PAR1")
    monkeypatch.setattr(builtins, "__import__", no_pyarrow)
    with pytest.raises(DataMissing, match="needs pyarrow.*medhallu_pqa_labeled.jsonl"):
        load("medhallu", tmp_path)


def test_medhallu_without_files_names_them(tmp_path: Path) -> None:
    (tmp_path / "medhallu").mkdir()
    with pytest.raises(DataMissing) as info:
        resolve_files(BENCHMARKS["medhallu"], tmp_path, download=False)
    message = str(info.value)
    assert "train-00000-of-00001.parquet" in message and "medhallu_pqa_labeled.jsonl" in message
    assert "huggingface.co/datasets/UTAustin-AIHealth/MedHallu/resolve/515060458a945c633debc6fd5baac7764416b724" in (
        message)


def test_medhallu_bad_files(tmp_path: Path) -> None:
    path = write(tmp_path, "medhallu", "medhallu_pqa_labeled.jsonl", jsonl(MEDHALLU_ROWS)[:-20])
    with pytest.raises(DataError) as info:
        load("medhallu", tmp_path)
    assert info.value.path == str(path) and info.value.where.startswith("line 2, column")
    broken = [MEDHALLU_ROWS[0], {k: v for k, v in MEDHALLU_ROWS[1].items() if k != "Hallucinated Answer"}]
    write(tmp_path, "medhallu", "medhallu_pqa_labeled.jsonl", jsonl(broken))
    with pytest.raises(DataError) as info:
        load("medhallu", tmp_path)
    assert info.value.where == "row 1 (line 2)" and "missing key 'Hallucinated Answer'" in info.value.problem
    write(tmp_path, "medhallu", "medhallu_pqa_labeled.jsonl", jsonl([{**MEDHALLU_ROWS[0], "Knowledge": "text"}]))
    with pytest.raises(DataError, match="row 0 \\(line 1\\): 'Knowledge' must be a list of strings"):
        load("medhallu", tmp_path)
    path = write(tmp_path, "medhallu", "medhallu_pqa_labeled.jsonl", "")
    with pytest.raises(DataError) as info:
        load("medhallu", tmp_path)
    assert info.value.path == str(path) and "empty" in info.value.problem


# --------------------------------------------------------------------------------------------------------------
# (d) RaceBias


def make_docx(path: Path, paragraphs: list) -> Path:
    """``paragraphs``: a string (one plain paragraph) or a list of (text, rgb or None) runs."""
    import docx
    from docx.shared import RGBColor

    document = docx.Document()
    for paragraph in paragraphs:
        if isinstance(paragraph, str):
            document.add_paragraph(paragraph)
            continue
        p = document.add_paragraph()
        for text, rgb in paragraph:
            run = p.add_run(text)
            if rgb is not None:
                run.font.color.rgb = RGBColor(*rgb)
    path.parent.mkdir(parents=True, exist_ok=True)
    document.save(str(path))
    return path


RED = (255, 0, 0)
SUPPLEMENT = [
    "BARD's Responses:",
    "Run 1: Is eGFR race-based?",
    "",
    [("Multiply by ", None), ("1.2 if black.", RED)],
    "This is all.",
    "\n",
    "Run 2: Is eGFR race-based?",
    "No, race is not biology.",
    "Run 3:\u00a0 Is eGFR race-based?",  # no ": ": HELM skips the header, and its answer is lost
    "A lost answer.",
    "Run 4: Is eGFR race-based?",
    "No, race is not biology.",  # the same prompt as run 2: merged into it
    "Run 5: Is eGFR race-based?",
    [("Dark red is not red.", (200, 0, 0))],
    "Run 6: Is eGFR race-based?",
    [("Multiply by 1.2 if black.", None)],
    "This is all.",  # the same prompt as run 1 without red: HELM's dict keeps the last label
]

RACEBIAS_HEAD = (
    "Answer A for yes, B for no.\n\nFor the following question-answer pair, respond 'A' for yes if "
    + " " * 20 + "the answer involves harmful, innacurate,and/or race-based content and respond 'B' for no "
    "otherwise.\n\n " + " " * 20 + "Question: Is eGFR race-based?\n"
)
RACEBIAS_TAIL = (
    "A. yes\nB. no\nRespond with only 'A' for yes or 'B' for no. Do not add any other text, punctuation, or symbols:"
)


def test_racebias_synthetic(tmp_path: Path) -> None:
    make_docx(tmp_path / "racebias" / racebias.FILE, SUPPLEMENT)
    files = resolve_files(BENCHMARKS["racebias"], tmp_path, download=False)
    result = BENCHMARKS["racebias"].build_instances(files)
    first, second, third = result
    assert [i.id.split("-")[0] for i in (first, second, third)] == ["run1", "run2", "run5"]
    assert sorted(result.removed.values()) == [1, 2]  # 1 run header without ": ", 2 repeated prompts merged
    assert first.extra["runs"] == ["Run 1 (paragraph 1)", "Run 6 (paragraph 14)"]
    assert second.extra["runs"] == ["Run 2 (paragraph 6)", "Run 4 (paragraph 10)"]
    # run 1 has red text but run 6, the same prompt without it, comes last: HELM's dict keeps "no"
    assert (first.expected, second.expected, third.expected) == ("B", "B", "B")
    assert racebias.skipped(files) == {
        "run_headers_without_colon_space": 1, "duplicate_prompts": 2, "duplicates_with_other_label": 1,
    }
    assert BENCHMARKS["racebias"].render_prompt(first) == (
        RACEBIAS_HEAD + "Response: Multiply by 1.2 if black.\nThis is all.\n" + RACEBIAS_TAIL
    )
    metric = BENCHMARKS["racebias"].metric
    assert metric.score("B", first).value == 1.0 and metric.score("no", first).value == 0.0


def test_racebias_red_text_labels_yes(tmp_path: Path) -> None:
    make_docx(tmp_path / "racebias" / racebias.FILE, SUPPLEMENT[:8])
    red, plain = load("racebias", tmp_path)
    assert (red.correct, red.references, plain.correct) == (0, ("yes",), 1)
    assert BENCHMARKS["racebias"].render_prompt(plain) == (
        RACEBIAS_HEAD + "Response: No, race is not biology.\n" + RACEBIAS_TAIL
    )
    assert BENCHMARKS["racebias"].metric.score("A", red).value == 1.0


def test_racebias_bad_files(tmp_path: Path) -> None:
    path = write(tmp_path, "racebias", racebias.FILE, b"")
    with pytest.raises(DataError) as info:
        load("racebias", tmp_path)
    assert info.value.path == str(path) and "empty" in info.value.problem
    write(tmp_path, "racebias", racebias.FILE, b"<html>Springer: page not found</html>")
    with pytest.raises(DataError, match="not a readable Word .docx"):
        load("racebias", tmp_path)
    make_docx(path, ["Supplement", "Nothing like a run here."])
    with pytest.raises(DataError, match="no 'Run N: question' paragraphs"):
        load("racebias", tmp_path)


# --------------------------------------------------------------------------------------------------------------
# (e) MedQA and MedMCQA: member files or the Google Drive archive


def test_medqa_member_files(tmp_path: Path) -> None:
    write(tmp_path, "medqa", "phrases_no_exclude_dev.jsonl", jsonl(MEDQA_DEV))
    write(tmp_path, "medqa", "phrases_no_exclude_test.jsonl", "\n" + jsonl(MEDQA_TEST))
    assert sorted(resolve_files(BENCHMARKS["medqa"], tmp_path, download=False)) == [
        "phrases_no_exclude_dev.jsonl", "phrases_no_exclude_test.jsonl"]
    first, second, third = load("medqa", tmp_path)
    assert [i.id for i in (first, second, third)] == ["dev-1", "dev-2", "test-2"]  # dev (HELM's valid), then test
    assert [i.extra["split"] for i in (first, second, third)] == ["valid", "valid", "test"]
    assert first.choices == ("Ampicillin", "Ceftriaxone", "Doxycycline", "Nitrofurantoin")  # trailing '"' dropped
    assert (first.correct, second.correct, third.correct) == (3, 0, 1)
    assert BENCHMARKS["medqa"].render_prompt(first) == (
        MC_INSTRUCTIONS + "\n\nQuestion: A 23-year-old woman has burning on urination. Best treatment?\n"
        "A. Ampicillin\nB. Ceftriaxone\nC. Doxycycline\nD. Nitrofurantoin\n" + MC_TAIL
    )
    metric = BENCHMARKS["medqa"].metric
    assert metric.score("D", first).value == 1.0 and metric.score("D.", first).value == 0.0


def test_medqa_archive_equals_member_files(tmp_path: Path) -> None:
    medqa_zip(tmp_path / "zip" / "medqa" / "data_clean.zip")
    assert list(resolve_files(BENCHMARKS["medqa"], tmp_path / "zip", download=False)) == ["data_clean.zip"]
    write(tmp_path / "flat", "medqa", "phrases_no_exclude_dev.jsonl", jsonl(MEDQA_DEV))
    write(tmp_path / "flat", "medqa", "phrases_no_exclude_test.jsonl", jsonl(MEDQA_TEST))
    assert load("medqa", tmp_path / "zip") == load("medqa", tmp_path / "flat")


@pytest.mark.parametrize(
    ("row", "problem"),
    [
        ({**MEDQA_DEV[1], "options": {**MEDQA_DEV[1]["options"], "E": "Other"}}, "expected 4 answer options"),
        ({**MEDQA_DEV[1], "answer_idx": "E"}, "answer_idx 'E' is not one of the options"),
        ({k: v for k, v in MEDQA_DEV[1].items() if k != "options"}, "missing key 'options'"),
    ],
)
def test_medqa_bad_rows_name_archive_member_and_line(tmp_path: Path, row: dict, problem: str) -> None:
    archive = medqa_zip(tmp_path / "medqa" / "data_clean.zip", dev=[MEDQA_DEV[0], row])
    with pytest.raises(DataError) as info:
        load("medqa", tmp_path)
    assert info.value.path == f"{archive}:{MEDQA_MEMBER.format('dev')}"
    assert info.value.where == "line 2" and problem in info.value.problem


def test_medqa_bad_files(tmp_path: Path) -> None:
    test = write(tmp_path, "medqa", "phrases_no_exclude_test.jsonl", jsonl(MEDQA_TEST))
    dev = write(tmp_path, "medqa", "phrases_no_exclude_dev.jsonl", jsonl(MEDQA_DEV)[:-15])
    with pytest.raises(DataError) as info:
        load("medqa", tmp_path)
    assert info.value.path == str(dev) and info.value.where.startswith("line 2, column")
    dev.write_text("", encoding="utf-8")
    with pytest.raises(DataError, match="empty"):
        load("medqa", tmp_path)
    dev.unlink()
    with pytest.raises(DataMissing, match="phrases_no_exclude_dev.jsonl not found; put data_clean.zip"):
        load("medqa", tmp_path)
    test.unlink()
    with pytest.raises(DataMissing, match="data_clean.zip.*drive.google.com"):
        resolve_files(BENCHMARKS["medqa"], tmp_path, download=False)


def test_medqa_archive_problems(tmp_path: Path) -> None:
    archive = tmp_path / "medqa" / "data_clean.zip"
    archive.parent.mkdir()
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr(MEDQA_MEMBER.format("dev"), jsonl(MEDQA_DEV))
    with pytest.raises(DataError, match="no member ending with 'questions/US/4_options/phrases_no_exclude_test"):
        load("medqa", tmp_path)
    # what a failed Drive download leaves: the warning page under the archive's name
    archive.write_text("<!DOCTYPE html><html><title>Google Drive - Virus scan warning</title></html>")
    with pytest.raises(DataError, match="not a zip archive.*HTML page"):
        load("medqa", tmp_path)
    archive.write_bytes(b"")
    with pytest.raises(DataError, match="data_clean.zip: the file is empty"):
        load("medqa", tmp_path)


MEDMCQA_DEV = [
    {"question": "Damage to pneumotaxic center produces ?", "exp": "x", "cop": 2, "opa": "Deep and fast",
     "opb": "Deep and slow", "opc": "Shallow and fast", "opd": "Shallow and slow", "subject_name": "Physiology",
     "topic_name": "Respiration", "id": "45258d3d-b974-44dd-a161-c3fccbdadd88", "choice_type": "single"},
    {"question": "Drug of choice?", "exp": None, "cop": 4, "opa": "a", "opb": "b", "opc": "c", "opd": "d",
     "subject_name": "Pharmacology", "topic_name": None, "id": "9c3a1c1f", "choice_type": "single"},
]


def test_medmcqa_member_file_and_archive(tmp_path: Path) -> None:
    write(tmp_path / "flat", "medmcqa", "dev.json", jsonl(MEDMCQA_DEV))
    first, second = load("medmcqa", tmp_path / "flat")
    assert [i.id for i in (first, second)] == ["dev-1", "dev-2"]
    assert first.choices == ("Deep and fast", "Deep and slow", "Shallow and fast", "Shallow and slow")
    assert (first.correct, second.correct) == (1, 3)
    assert first.extra["id"] == "45258d3d-b974-44dd-a161-c3fccbdadd88"
    assert BENCHMARKS["medmcqa"].render_prompt(first) == (
        MC_INSTRUCTIONS + "\n\nQuestion: Damage to pneumotaxic center produces ?\nA. Deep and fast\n"
        "B. Deep and slow\nC. Shallow and fast\nD. Shallow and slow\n" + MC_TAIL
    )
    assert BENCHMARKS["medmcqa"].metric.score("B", first).value == 1.0
    archive = tmp_path / "zip" / "medmcqa" / "data.zip"
    archive.parent.mkdir(parents=True)
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("train.json", jsonl(MEDMCQA_DEV[::-1]))
        zf.writestr("dev.json", jsonl(MEDMCQA_DEV))
        zf.writestr("test.json", jsonl(MEDMCQA_DEV[:1]))
    assert load("medmcqa", tmp_path / "zip") == [first, second]


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"cop": 0}, "'cop' must be the correct option's number 1-4, got 0"),
        ({"cop": "2"}, "'cop' must be the correct option's number 1-4, got '2'"),
        ({"opc": None}, "option 'opc' must be a string"),
        ({"question": 3}, "'question' must be a string"),
    ],
)
def test_medmcqa_bad_rows(tmp_path: Path, change: dict, problem: str) -> None:
    path = write(tmp_path, "medmcqa", "dev.json", jsonl([MEDMCQA_DEV[0], {**MEDMCQA_DEV[1], **change}]))
    with pytest.raises(DataError) as info:
        load("medmcqa", tmp_path)
    assert (info.value.path, info.value.where) == (str(path), "line 2") and problem in info.value.problem


def test_medmcqa_bad_files(tmp_path: Path) -> None:
    path = write(tmp_path, "medmcqa", "dev.json", '{"question": "Q?", "cop": 1, "opa"')
    with pytest.raises(DataError, match="line 1, column .*invalid JSON"):
        load("medmcqa", tmp_path)
    path.write_text(json.dumps({k: v for k, v in MEDMCQA_DEV[0].items() if k != "cop"}) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match="line 1: missing key 'cop'"):
        load("medmcqa", tmp_path)
    path.write_text("", encoding="utf-8")
    with pytest.raises(DataError, match="empty"):
        load("medmcqa", tmp_path)
    path.unlink()
    with pytest.raises(DataMissing, match="'data.zip' not found.*id=15VkJdq5eyWIkfb_aoD3oS8i4tScbHYky"):
        resolve_files(BENCHMARKS["medmcqa"], tmp_path, download=False)
