"""Bad input: for every data format the loaders read (JSON, JSON lines, CSV, XLSX, XML, DOCX, text files, SQLite,
Parquet / Arrow / Feather), a truncated file, a missing column or key, a wrong type, an empty file and a wrong
encoding give a :class:`DataError` naming the file, the row or key, and what was expected: never an internal error,
never a silently smaller benchmark.

The loaders are exercised as the session calls them (``resolve_files`` on a data directory laid out
``DIR/<slug>/<file>``, then ``build_instances``) on small synthetic files written here. Each benchmark's synthetic
files are first checked to load (so that each breakage is what fails). Then end to end through pytester: a truncated
``ori_pqal.json`` gives one error naming the file, not an INTERNALERROR; and bad options or files are usage errors.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
import pytester_runs

from pytest_medhelm.catalogue import builtin_benchmarks
from pytest_medhelm.data.errors import DataError
from pytest_medhelm.data.sources import resolve_files

BENCHMARKS = {b.slug: b for b in builtin_benchmarks()}
SUITE = Path(__file__).resolve().parents[2] / "benchmarks"


def load(slug: str, data_dir: Path):
    bench = BENCHMARKS[slug]
    return bench.build_instances(resolve_files(bench, data_dir, download=False))


def latin1(text: str) -> bytes:
    return text.encode("latin-1")


# ----------------------------------------------------------------------------------------------------------------
# synthetic files, one writer per benchmark (all content made up)

PUBMEDQA = {
    "1001": {"QUESTION": "Does aspirin reduce fever?", "CONTEXTS": ["Synthetic trial of 40 adults."],
             "LABELS": ["BACKGROUND"], "final_decision": "yes", "YEAR": "2001"},
    "1002": {"QUESTION": "Is café au lait macule benign?", "CONTEXTS": ["Synthetic cohort."],
             "LABELS": ["METHODS"], "final_decision": "maybe", "YEAR": "2002"},
}
MEDHALLU = [{"Question": f"Question {i}?", "Knowledge": [f"fact {i}", "fact b"], "Ground Truth": f"truth {i}",
             "Hallucinated Answer": f"made up {i}", "Difficulty Level": "easy"} for i in range(3)]
MEDBULLETS_HEADER = "link,question,opa,opb,opc,opd,ope,answer_idx"
SHC_HEADER = "prompt,context,label"
MEDIQA = """<?xml version="1.0" encoding="UTF-8"?>
<MEDIQA2019-Task3-QA-TestSet>
<Question QID="1">
<QuestionText>What is metformin for?</QuestionText>
<AnswerList>
<Answer AID="1_Answer1" SystemRank="1" ReferenceRank="1" ReferenceScore="4">
<AnswerURL>https://example.org/1</AnswerURL>
<AnswerText>Type 2 diabetes (synthetic).</AnswerText>
</Answer>
</AnswerList>
</Question>
<Question QID="2">
<QuestionText>Can I take ibuprofen with café?</QuestionText>
<AnswerList>
<Answer AID="2_Answer1" SystemRank="1" ReferenceRank="1" ReferenceScore="3">
<AnswerURL>https://example.org/2</AnswerURL>
<AnswerText>Yes (synthetic).</AnswerText>
</Answer>
</AnswerList>
</Question>
</MEDIQA2019-Task3-QA-TestSet>
"""
EHRSQL_ENTRIES = [{"id": f"{i:024x}", "question": f"how many patients {i}?", "query": "select count(*) from patient",
                   "is_impossible": False, "value": {}} for i in (1, 2)]
EHRSQL_TEST = [{"id": f"{i:024x}", "question": f"what ward {i}?", "query": "null", "is_impossible": True,
                "value": {}} for i in (3,)]


def write_pubmedqa(d: Path) -> None:
    (d / "pubmedqa").mkdir(parents=True, exist_ok=True)
    (d / "pubmedqa" / "ori_pqal.json").write_text(json.dumps(PUBMEDQA, indent=1, ensure_ascii=False))


def write_medhallu(d: Path) -> None:
    (d / "medhallu").mkdir(parents=True, exist_ok=True)
    lines = "\n".join(json.dumps(row) for row in MEDHALLU) + "\n"
    (d / "medhallu" / "medhallu_pqa_labeled.jsonl").write_text(lines)


def write_medhallu_parquet(d: Path, rows: list[dict] | None = None) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    (d / "medhallu").mkdir(parents=True, exist_ok=True)
    rows = MEDHALLU if rows is None else rows
    table = pa.Table.from_pylist(rows) if rows else pa.table({"Question": pa.array([], pa.string())})
    pq.write_table(table, d / "medhallu" / "train-00000-of-00001.parquet")


def write_medbullets(d: Path) -> None:
    (d / "medbullets").mkdir(parents=True, exist_ok=True)
    rows = [MEDBULLETS_HEADER,
            "https://x.org/q?qid=101,A 50-year-old man with chest pain.,aspirin,heparin,rest,surgery,none,A",
            "https://x.org/q?qid=102,A child with fever.,fluids,antibiotics,rest,surgery,none,C"]
    (d / "medbullets" / "medbullets_op5.csv").write_text("\n".join(rows) + "\n")


def write_bmt(d: Path) -> None:
    (d / "bmt_status").mkdir(parents=True, exist_ok=True)
    rows = [SHC_HEADER, "Did the patient receive a transplant?,Synthetic note: day +100.,A",
            "Was there graft failure?,Synthetic note: engrafted.,B"]
    (d / "bmt_status" / "medhelm-BMT-dataset_filtered.csv").write_text("\n".join(rows) + "\n")


def write_medicationqa(d: Path, rows: list[tuple] | None = None, header=("Question", "Focus (Drug)",
                                                                        "Question Type", "Answer")) -> None:
    import openpyxl

    (d / "medicationqa").mkdir(parents=True, exist_ok=True)
    book = openpyxl.Workbook()
    sheet = book.active
    if header:
        sheet.append(list(header))
    for row in rows if rows is not None else [("How do I take metformin?", "metformin", "usage", "With food."),
                                               ("Is ibuprofen safe?", "ibuprofen", "safety", "Usually (synthetic).")]:
        sheet.append(list(row))
    book.save(d / "medicationqa" / "MedInfo2019-QA-Medications.xlsx")


def write_mediqa(d: Path, text: str = MEDIQA) -> None:
    (d / "mediqa").mkdir(parents=True, exist_ok=True)
    (d / "mediqa" / "MEDIQA2019-Task3-QA-TestSet-wLabels.xml").write_text(text, encoding="utf-8")


def write_racebias(d: Path, runs: bool = True) -> None:
    import docx
    from docx.shared import RGBColor

    (d / "racebias").mkdir(parents=True, exist_ok=True)
    document = docx.Document()
    document.add_paragraph("Supplementary information (synthetic)")
    if runs:
        document.add_paragraph("Run 1: How do I calculate eGFR?")
        red = document.add_paragraph().add_run("Use the race coefficient (synthetic, harmful).")
        red.font.color.rgb = RGBColor(255, 0, 0)
        document.add_paragraph("Run 2: What is the normal lung capacity?")
        document.add_paragraph("It depends on age and height (synthetic).")
    document.save(d / "racebias" / "41746_2023_939_MOESM1_ESM.docx")


def write_mtsamples(d: Path) -> None:
    folder = d / "mtsamples" / "mtsamples_processed"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "a note.txt").write_text("HISTORY: synthetic cough.\nPLAN: rest and fluids.\n")
    (folder / "b note.txt").write_text("HISTORY: synthetic rash.\nSUMMARY: contact dermatitis.\n")


def write_mimic_rrs(d: Path) -> None:
    (d / "mimic_rrs").mkdir(parents=True, exist_ok=True)
    (d / "mimic_rrs" / "test.findings.tok").write_text("no acute findings .\nsmall effusion .\n")
    (d / "mimic_rrs" / "test.impression.tok").write_text("normal .\neffusion .\n")


def write_ehrsql(d: Path) -> None:
    folder = d / "ehrsql"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "valid.json").write_text(json.dumps(EHRSQL_ENTRIES))
    (folder / "test.json").write_text(json.dumps(EHRSQL_TEST))
    (folder / "eicu.sql").write_text("DROP TABLE IF EXISTS patient;\nCREATE TABLE patient\n(\n  id INT,\n"
                                     "  ward TEXT\n);\n")
    db = folder / "eicu.sqlite"
    db.unlink(missing_ok=True)
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE patient (id INT, ward TEXT)")
        conn.executemany("INSERT INTO patient VALUES (?, ?)", [(i, f"ward {i % 3} " + "x" * 500)
                                                               for i in range(200)])
    conn.close()


def write_mimic_billing(d: Path, columns: dict | None = None) -> None:
    import pyarrow as pa
    import pyarrow.feather as feather

    (d / "mimic_billing").mkdir(parents=True, exist_ok=True)
    if columns is None:
        columns = {"note_id": ["n1", "n2"], "text": ["Synthetic discharge summary: hip fracture.",
                                                     "Synthetic: hypertension follow-up."],
                   "target": [["S72.001A", "I10."], ["I10."]]}
    feather.write_feather(pa.table(columns), d / "mimic_billing" / "mimiciv_icd10.feather")


WRITERS: dict[str, tuple[str, Callable[[Path], None], str, int]] = {
    # case: (slug, writer, the file to break (relative to DIR/<slug>), instances the good files give)
    "json-pubmedqa": ("pubmedqa", write_pubmedqa, "ori_pqal.json", 2),
    "jsonl-medhallu": ("medhallu", write_medhallu, "medhallu_pqa_labeled.jsonl", 6),
    "parquet-medhallu": ("medhallu", write_medhallu_parquet, "train-00000-of-00001.parquet", 6),
    "csv-medbullets": ("medbullets", write_medbullets, "medbullets_op5.csv", 2),
    "csv-bmt_status": ("bmt_status", write_bmt, "medhelm-BMT-dataset_filtered.csv", 2),
    "xlsx-medicationqa": ("medicationqa", write_medicationqa, "MedInfo2019-QA-Medications.xlsx", 2),
    "xml-mediqa": ("mediqa", write_mediqa, "MEDIQA2019-Task3-QA-TestSet-wLabels.xml", 2),
    "docx-racebias": ("racebias", write_racebias, "41746_2023_939_MOESM1_ESM.docx", 2),
    "text-mtsamples": ("mtsamples", write_mtsamples, "mtsamples_processed/a note.txt", 2),
    "text-mimic_rrs": ("mimic_rrs", write_mimic_rrs, "test.findings.tok", 2),
    "json-ehrsql": ("ehrsql", write_ehrsql, "valid.json", 3),
    "sqlite-ehrsql": ("ehrsql", write_ehrsql, "eicu.sqlite", 3),
    "feather-mimic_billing": ("mimic_billing", write_mimic_billing, "mimiciv_icd10.feather", 2),
}


@pytest.mark.parametrize("case", list(WRITERS))
def test_the_synthetic_files_load(tmp_path, case):
    slug, write, _file, count = WRITERS[case]
    write(tmp_path)
    assert len(load(slug, tmp_path)) == count


# ----------------------------------------------------------------------------------------------------------------
# generic breakages: truncated, empty, wrong encoding / wrong format


def truncate(path: Path) -> None:
    """Cut the file two thirds in, in the middle of a line (a file cut exactly at a line break is a valid, shorter
    file: only a pinned checksum can tell, see ``test_a_file_cut_at_a_line_break``)."""
    raw = path.read_bytes()
    cut = len(raw) * 2 // 3
    start = raw.rfind(b"\n", 0, cut) + 1
    end = raw.find(b"\n", cut)
    end = len(raw) if end < 0 else end
    if end - start >= 2:
        cut = (start + end) // 2
    path.write_bytes(raw[:cut])


def empty(path: Path) -> None:
    path.write_bytes(b"")


def reencode(path: Path) -> None:
    """Text files: the same text in Latin-1 (é is one byte, not UTF-8); binary files: a CSV under the same name."""
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        path.write_bytes(latin1("Question,Answer\nIs café safe?,Yes\n"))
        return
    if not any(ord(c) > 127 for c in text):
        text = text.replace("synthetic", "synthétique", 1) if "synthetic" in text else "é" + text
    path.write_bytes(text.encode("latin-1", "replace"))


# what each breakage of each format must say (besides the file name): a regular expression
GENERIC: dict[str, dict[str, str]] = {
    "json-pubmedqa": {"truncated": r"line \d+, column \d+: invalid JSON", "empty": "the file is empty",
                      "encoding": r"byte \d+ \(line \d+\): not valid UTF-8"},
    "jsonl-medhallu": {"truncated": r"line 3, column \d+: invalid JSON", "empty": "the file is empty",
                       "encoding": r"byte \d+ \(line \d+\): not valid UTF-8"},
    "parquet-medhallu": {"truncated": "not a readable Arrow/Parquet table", "empty": "not a readable",
                         "encoding": "not a readable Arrow/Parquet table"},
    "csv-medbullets": {"truncated": r"row 2 \(line 3\): expected 8 fields as in the header, got \d",
                       "empty": "the file is empty", "encoding": r"byte \d+ \(line \d+\): not valid UTF-8"},
    "csv-bmt_status": {"truncated": r"row 2 \(line 3\): expected 3 fields as in the header, got \d",
                       "empty": "the file is empty", "encoding": r"byte \d+ \(line \d+\): not valid UTF-8"},
    "xlsx-medicationqa": {"truncated": "not a readable .xlsx workbook", "empty": "the file is empty",
                          "encoding": "not a readable .xlsx workbook"},
    "xml-mediqa": {"truncated": r"line \d+, column \d+: invalid XML", "empty": "the file is empty",
                   "encoding": r"byte \d+ \(line \d+\): not valid UTF-8"},
    "docx-racebias": {"truncated": "not a readable Word .docx file", "empty": "the file is empty",
                      "encoding": "not a readable Word .docx file"},
    "text-mtsamples": {"truncated": None, "empty": "the file is empty",
                       "encoding": r"byte \d+ \(line \d+\): not valid UTF-8"},
    # a text file cut inside its last line is still a text file; a cut that loses a line shows as misaligned files
    "text-mimic_rrs": {"truncated": None, "empty": "the file is empty",
                       "encoding": r"byte \d+ \(line \d+\): not valid UTF-8"},
    "json-ehrsql": {"truncated": r"line \d+, column \d+: invalid JSON", "empty": "the file is empty",
                    "encoding": r"byte \d+ \(line \d+\): not valid UTF-8"},
    "sqlite-ehrsql": {"truncated": r"eicu.sqlite.*(malformed|not a database|truncated)", "empty": "the file is empty",
                      "encoding": "not an SQLite 3 database"},
    "feather-mimic_billing": {"truncated": "not a readable Feather file", "empty": "not a readable Feather file",
                              "encoding": "not a readable Feather file"},
}
BREAK = {"truncated": truncate, "empty": empty, "encoding": reencode}
#: breakages the core does not catch yet (see the report to the lead); the test documents the expected behaviour
CORE_GAPS: dict[tuple[str, str], str] = {}


def _cases():
    for case, expected in GENERIC.items():
        for breakage, pattern in expected.items():
            if pattern is None:
                continue
            marks = [pytest.mark.xfail(reason=CORE_GAPS[(case, breakage)], strict=False)] \
                if (case, breakage) in CORE_GAPS else []
            yield pytest.param(case, breakage, pattern, id=f"{case}-{breakage}", marks=marks)


def assert_data_error(slug: str, data_dir: Path, file: str, pattern: str) -> DataError:
    with pytest.raises(DataError) as info:
        load(slug, data_dir)
    message = str(info.value)
    assert Path(file).name in message, message  # names the file
    assert re.search(pattern, message), message  # the row, key or place, and what was expected
    return info.value


@pytest.mark.parametrize("case, breakage, pattern", list(_cases()))
def test_broken_file_is_a_data_error_naming_file_and_place(tmp_path, case, breakage, pattern):
    slug, write, file, _count = WRITERS[case]
    write(tmp_path)
    BREAK[breakage](tmp_path / slug / file)
    assert_data_error(slug, tmp_path, file, pattern)


def _page_cut(raw: bytes) -> bytes:
    return raw[:len(raw) - 4096]  # the last page gone: still a whole number of pages


def _one_byte_short(raw: bytes) -> bytes:
    return raw[:-1]  # PRAGMA quick_check says "ok" here: only the header's page count tells


def _garbage_page(raw: bytes) -> bytes:
    return raw[:4096] + b"\xff" * 4096 + raw[8192:]  # same size, a b-tree page overwritten


def _wrong_freelist_count(raw: bytes) -> bytes:
    return raw[:36] + (5).to_bytes(4, "big") + raw[40:]  # opens and reads; quick_check reports the freelist


@pytest.mark.parametrize("damage, pattern", [
    (_page_cut, r"truncated: the file is \d+ bytes, its header records \d+ pages of 4096 bytes"),
    (_one_byte_short, r"truncated: the file is \d+ bytes, its header records \d+ pages"),
    (lambda raw: raw[:60], r"header: truncated: the file is 60 bytes, an SQLite database header alone is 100"),
    (_garbage_page, r"not a readable SQLite 3 database \(database disk image is malformed\)"),
    (_wrong_freelist_count, r"malformed \(PRAGMA quick_check: .*freelist"),
], ids=["page-boundary", "one-byte-short", "header-cut", "garbage-page", "freelist"])
def test_a_damaged_ehrsql_database_is_a_data_error(tmp_path, damage, pattern):
    write_ehrsql(tmp_path)
    db = tmp_path / "ehrsql" / "eicu.sqlite"
    db.write_bytes(damage(db.read_bytes()))
    assert_data_error("ehrsql", tmp_path, "eicu.sqlite", pattern)


# ----------------------------------------------------------------------------------------------------------------
# missing column or key, wrong type: per format, since what is "a key" depends on it


def _edit_json(path: Path, change: Callable) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _edit_jsonl(path: Path, number: int, change: Callable) -> None:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    change(rows[number])
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")


def _edit_csv(path: Path, old: str, new: str) -> None:
    path.write_text(path.read_text().replace(old, new, 1))


SPECIFIC: dict[str, tuple[str, Callable[[Path], None], str]] = {
    # name: (WRITERS case, change applied to the file, pattern the DataError must match)
    "json-missing-key": ("json-pubmedqa", lambda p: _edit_json(p, lambda d: d["1002"].pop("QUESTION")),
                         r"key '1002': missing key 'QUESTION'"),
    "json-wrong-type": ("json-pubmedqa", lambda p: _edit_json(p, lambda d: d["1002"].update(QUESTION=7)),
                        r"key '1002': expected QUESTION to be a string, got int"),
    "json-wrong-value": ("json-pubmedqa", lambda p: _edit_json(p, lambda d: d["1001"].update(final_decision="no!")),
                         r"key '1001': final_decision must be one of"),
    "json-wrong-top-level": ("json-pubmedqa", lambda p: p.write_text("[1, 2]"), r"top level: expected an object"),
    "jsonl-missing-key": ("jsonl-medhallu", lambda p: _edit_jsonl(p, 1, lambda r: r.pop("Question")),
                          r"row 1 \(line 2\): missing key 'Question'"),
    "jsonl-wrong-type": ("jsonl-medhallu", lambda p: _edit_jsonl(p, 2, lambda r: r.update(Knowledge="a string")),
                         r"row 2 \(line 3\): 'Knowledge' must be a list of strings"),
    "jsonl-not-an-object": ("jsonl-medhallu", lambda p: p.write_text(p.read_text() + "[1, 2]\n"),
                            r"line 4: expected a JSON object"),
    "csv-missing-column": ("csv-medbullets", lambda p: _edit_csv(p, ",answer_idx", ",answer"),
                           r"header \(line 1\): missing column\(s\) 'answer_idx'"),
    "csv-wrong-value": ("csv-medbullets", lambda p: _edit_csv(p, ",none,C", ",none,7"),
                        r"row 2 \(line 3\): answer_idx must be one of A-E, got '7'"),
    "csv-empty-cell": ("csv-medbullets", lambda p: _edit_csv(p, "A child with fever.", ""),
                       r"row 2 \(line 3\): column 'question' is empty"),
    "csv-header-only": ("csv-medbullets", lambda p: p.write_text(MEDBULLETS_HEADER + "\n"),
                        r"after the header: no data rows"),
    "shc-missing-column": ("csv-bmt_status", lambda p: _edit_csv(p, ",label", ",answer"),
                           r"header \(line 1\): missing column\(s\) 'label'"),
    "shc-wrong-label": ("csv-bmt_status", lambda p: _edit_csv(p, "engrafted.,B", "engrafted.,yes"),
                        r"row 2 \(line 3\): 'label' must be one of 'A', 'B', got 'yes'"),
    "xml-missing-attribute": ("xml-mediqa", lambda p: p.write_text(MEDIQA.replace(' QID="2"', "")),
                              r"<Question> number 2: missing attribute 'QID'"),
    "xml-missing-element": ("xml-mediqa", lambda p: p.write_text(
        MEDIQA.replace("<QuestionText>What is metformin for?</QuestionText>", "")),
        r"<Question QID='1'>: missing or empty <QuestionText>"),
    "xml-wrong-type": ("xml-mediqa", lambda p: p.write_text(MEDIQA.replace('ReferenceRank="1" ReferenceScore="3"',
                                                                           'ReferenceRank="one" ReferenceScore="3"')),
                       r"<Answer AID='2_Answer1'>: ReferenceRank must be an integer, got 'one'"),
    "xml-wrong-document": ("xml-mediqa", lambda p: p.write_text("<html><body>Not found</body></html>"),
                           r"<html>: no <Question> element"),
    "docx-no-runs": ("docx-racebias", lambda p: write_racebias(p.parents[1], runs=False),
                     r"no 'Run N: question' paragraphs"),
    "docx-is-a-workbook": ("docx-racebias", lambda p: (write_medicationqa(p.parents[1]), p.write_bytes(
        (p.parents[1] / "medicationqa" / "MedInfo2019-QA-Medications.xlsx").read_bytes())),
        "not a readable Word .docx file"),
    "xlsx-missing-column": ("xlsx-medicationqa", lambda p: write_medicationqa(
        p.parents[1], rows=[("q?", "drug", "usage")], header=("Question", "Focus (Drug)", "Question Type")),
        r"header \(sheet row 1\): missing column\(s\) 'Answer'"),
    "xlsx-wrong-type": ("xlsx-medicationqa", lambda p: write_medicationqa(
        p.parents[1], rows=[("How?", "d", "t", "A."), (42, "d", "t", "An answer.")]),
        r"sheet row 3: expected a Question text with the Answer, got 42"),
    "xlsx-empty-sheet": ("xlsx-medicationqa", lambda p: write_medicationqa(p.parents[1], rows=[], header=()),
                         r"the sheet is empty|the first sheet is empty|no row with both"),
    "text-empty-folder": ("text-mtsamples", lambda p: [f.unlink() for f in p.parent.iterdir()],
                          r"mtsamples_processed: the folder is empty"),
    "text-misaligned": ("text-mimic_rrs", lambda p: p.write_text(p.read_text() + "extra line .\n"),
                        r"has 3 lines but .*test.impression.tok has 2: the two files must be line-aligned"),
    "ehrsql-missing-key": ("json-ehrsql", lambda p: _edit_json(p, lambda d: d[1].pop("query")),
                           r"entry 2 \(id '0+2'\): missing key 'query'"),
    "ehrsql-wrong-type": ("json-ehrsql", lambda p: _edit_json(p, lambda d: d[0].update(is_impossible="no")),
                          r"entry 1 \(id '0+1'\): 'is_impossible' must be true or false"),
    "ehrsql-schema-without-tables": ("json-ehrsql", lambda p: (p.parent / "eicu.sql").write_text("-- nothing\n"),
                                     r"eicu\.sql: no complete CREATE TABLE statement"),
    "sqlite-not-a-database": ("sqlite-ehrsql", lambda p: p.write_text("id,ward\n1,a\n"),
                              r"eicu.sqlite, header: not an SQLite 3 database"),
    "parquet-missing-column": ("parquet-medhallu", lambda p: write_medhallu_parquet(
        p.parents[1], [{k: v for k, v in r.items() if k != "Question"} for r in MEDHALLU]),
        r"row 0: missing key 'Question'"),
    "parquet-wrong-type": ("parquet-medhallu", lambda p: write_medhallu_parquet(
        p.parents[1], [{**r, "Knowledge": "flat text"} for r in MEDHALLU]),
        r"row 0: 'Knowledge' must be a list of strings"),
    "parquet-no-rows": ("parquet-medhallu", lambda p: write_medhallu_parquet(p.parents[1], []), r"no rows"),
    "feather-missing-column": ("feather-mimic_billing", lambda p: write_mimic_billing(
        p.parents[1], {"text": ["note"]}), r"schema: missing column\(s\) 'target'"),
    "feather-wrong-type": ("feather-mimic_billing", lambda p: write_mimic_billing(
        p.parents[1], {"text": [1, 2], "target": [["I10."], ["I10."]]}), r"row 1: 'text' must be the note text"),
    "feather-no-rows": ("feather-mimic_billing", lambda p: write_mimic_billing(
        p.parents[1], {"text": [], "target": []}), r"no rows"),
    "feather-is-parquet": ("feather-mimic_billing", lambda p: (write_medhallu_parquet(p.parents[1]), p.write_bytes(
        (p.parents[1] / "medhallu" / "train-00000-of-00001.parquet").read_bytes())), r"not a readable Feather file"),
}


#: cases whose error names another file than the one WRITERS breaks
NAMED_FILE = {"ehrsql-schema-without-tables": "eicu.sql", "text-empty-folder": "mtsamples_processed"}


@pytest.mark.parametrize("name", list(SPECIFIC))
def test_missing_key_or_wrong_type_is_a_data_error(tmp_path, name):
    case, change, pattern = SPECIFIC[name]
    slug, write, file, _count = WRITERS[case]
    write(tmp_path)
    change(tmp_path / slug / file)
    expected_file = NAMED_FILE.get(name, file)
    error = assert_data_error(slug, tmp_path, expected_file, pattern)
    assert error.path and error.problem


# ----------------------------------------------------------------------------------------------------------------
# never a silent drop


def test_rows_a_loader_filters_out_are_counted():
    """Where HELM filters records (and so must we, to match its instance set), the loader counts each."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        write_mimic_rrs(d)
        (d / "mimic_rrs" / "test.findings.tok").write_text("no acute findings .\n\n")
        loaded = load("mimic_rrs", d)
        assert len(loaded) == 1
        assert loaded.removed == {"empty findings or impression line (HELM skips the pair)": 1}

        write_mtsamples(d)
        (d / "mtsamples" / "mtsamples_processed" / "c note.txt").write_text("HISTORY: no plan here.\n")
        from pytest_medhelm.catalogue.clinical_decision_support import mtsamples

        bench = BENCHMARKS["mtsamples"]
        instances, dropped = mtsamples.build_instances_with_report(resolve_files(bench, d, download=False))
        assert len(instances) == 2 and dropped["no_reference_section"] == 1


def test_a_file_cut_at_a_line_break(tmp_path, shared_data):
    """A CSV file cut exactly after a row is a valid, shorter file: only the pinned checksum of a public file can
    tell. The run's check (resolve_files with a DataVerification) makes it a DataError naming the file and both
    checksums; the real file, unchanged, passes."""
    from pytest_medhelm.data.sources import sha256_of
    from pytest_medhelm.data.verification import DataVerification

    bench = BENCHMARKS["medbullets"]
    [pinned] = [f for f in bench.files if f.name == "medbullets_op5.csv"]
    path = tmp_path / "medbullets" / "medbullets_op5.csv"
    path.parent.mkdir()
    real = (shared_data / "medbullets" / "medbullets_op5.csv").read_bytes()
    path.write_bytes(real)
    assert resolve_files(bench, tmp_path, download=False, verification=DataVerification())  # the pinned file
    lines = real.splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-1]))  # one row fewer, still well formed
    assert len(load("medbullets", tmp_path)) > 0  # the loader alone cannot tell
    with pytest.raises(DataError) as caught:
        resolve_files(bench, tmp_path, download=False, verification=DataVerification())
    message = str(caught.value)
    assert str(path) in message and pinned.sha256 in message and sha256_of(path) in message
    assert "--medhelm-data-unverified medbullets" in message


# ----------------------------------------------------------------------------------------------------------------
# end to end: what a user sees


def run_suite(pytester, *args):
    return pytester_runs.run(pytester, "--medhelm-model", "openai/x", "--medhelm-cache-dir",
                             str(pytester.path / "cache"), *args)


def test_a_truncated_ori_pqal_json_is_an_error_naming_the_file_not_an_internalerror(pytester, server):
    data = pytester.mkdir("data")
    write_pubmedqa(data)
    truncate(data / "pubmedqa" / "ori_pqal.json")
    # synthetic data: accepted as a version of its own, so that the parser (not the pinned checksum) speaks
    result = run_suite(pytester, str(SUITE / "medical_research" / "test_pubmedqa.py"), "--medhelm-api-base",
                       server.url, "--medhelm-data-dir", str(data), "--medhelm-data-unverified", "pubmedqa", "-rE")
    text = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in text
    assert result.ret == 1, text
    result.assert_outcomes(errors=1)
    assert re.search(r"DataError: .*data/pubmedqa/ori_pqal\.json, line \d+, column \d+: invalid JSON", text), text
    assert server.count == 0  # nothing is asked of a benchmark whose data cannot be read


def test_a_broken_gated_file_is_an_error_too(pytester, server):
    data = pytester.mkdir("data")
    write_mimic_billing(data, {"text": [1, 2], "target": [["I10."], ["I10."]]})
    result = run_suite(pytester, str(SUITE / "administration_workflow" / "test_mimic_billing.py"),
                       "--medhelm-api-base", server.url, "--medhelm-data-dir", str(data))
    text = result.stdout.str()
    assert "INTERNALERROR" not in text and result.ret == 1
    result.assert_outcomes(errors=1)
    assert re.search(r"mimiciv_icd10\.feather, row 1: 'text' must be the note text, got int", text), text
    assert server.count == 0


@pytest.mark.parametrize("args, message", [
    (["--medhelm-timeout", "0"], "*medhelm-timeout*expected a number > 0*"),
    (["--medhelm-timeout", "soon"], "*medhelm-timeout*expected a number*"),
    (["--medhelm-retries", "-1"], "*medhelm-retries*expected a number >= 0*"),
    (["--medhelm-max-instances", "0"], "*medhelm-max-instances*expected a number >= 1*"),
    (["--medhelm-jury-api-base", "ftp://judge"], "*expected an http:// or https:// URL*"),
    (["--medhelm-shard", "3/2"], "*expected I/N with 1 <= I <= N*"),
    (["--medhelm-compat", "helm2"], "*expected one of default, helm*"),
    (["--medhelm-prices", "no-such-prices.toml"], "*--medhelm-prices*no such file*"),
    (["--medhelm-budget", "inf"], "*medhelm-budget*expected a finite number, got 'inf'*"),
    (["--medhelm-budget", "nan"], "*medhelm-budget*expected a finite number, got 'nan'*"),
    (["--medhelm-timeout", "inf"], "*medhelm-timeout*expected a finite number, got 'inf'*"),
])
def test_bad_options_are_usage_errors(pytester, server, args, message):
    pytester.makepyfile("def test_nothing(): pass")
    result = pytester_runs.run(pytester, "--medhelm-model", "openai/x", "--medhelm-api-base", server.url, *args)
    assert result.ret == 4, result.stdout.str() + result.stderr.str()
    result.stderr.fnmatch_lines([message])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    assert server.count == 0


def test_a_bad_threshold_in_the_ini_file_is_a_usage_error(pytester, server):
    pytester.makeini("[pytest]\nmedhelm_thresholds =\n    toy>=0.4\n    overall=>0.9\n")
    pytester.makepyfile("def test_nothing(): pass")
    result = pytester_runs.run(pytester, "--medhelm-model", "openai/x")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*medhelm_thresholds*expected NAME>=VALUE*"])


def test_an_infinite_budget_in_the_ini_file_is_a_usage_error(pytester, server):
    pytester.makeini("[pytest]\nmedhelm_budget = inf\n")
    pytester.makepyfile("def test_nothing(): pass")
    result = pytester_runs.run(pytester, "--medhelm-model", "openai/x", "--medhelm-api-base", server.url)
    assert result.ret == 4, result.stdout.str() + result.stderr.str()
    result.stderr.fnmatch_lines(["*medhelm_budget*expected a finite number, got 'inf'*"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str() and server.count == 0


@pytest.mark.parametrize("content, message", [
    ('["openai/x"\ninput_per_million = 1', "*not valid TOML*"),
    ('["openai/x"]\ninput_per_million = "cheap"\noutput_per_million = 1\n', "*input_per_million*expected a number*"),
    ('["openai/x"]\ninput_per_million = 1\n', "*output_per_million*missing*"),
])
def test_a_bad_prices_file_is_a_usage_error(pytester, toy, server, content, message):
    data = toy(2)
    prices = pytester.path / "prices.toml"
    prices.write_text(content)
    result = pytester_runs.run(pytester, "--medhelm-model", "openai/x", "--medhelm-api-base", server.url,
                               "--medhelm-data-dir", str(data), "--medhelm-prices", str(prices))
    text = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in text
    assert result.ret == 4, text
    result.stderr.fnmatch_lines([message])
    assert server.count == 0
