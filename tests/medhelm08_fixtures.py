"""Synthetic files, in each upstream format, for the medhelm 0.8.0 benchmarks (SCT-Bench, MedXpertQA, HealthQA-BR
and the three synthetic privacy benchmarks), and independent renderings of their prompts from the spec
(../shared/reference/medhelm-0.8-additions.md), written out here, never computed with the package's code.

Row 0 of each file holds the inputs the fork rendered ../shared/reference/prompts/medhelm08_<name>.txt from, so
that its prompt can be compared byte for byte with the fork's."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

from pytester_runs import SHARED_DATA

PROMPTS = SHARED_DATA.parent / "reference" / "prompts"
TEMPLATE_SOURCE = SHARED_DATA / "medhelm08_templates" / "sct_bench_scenario.py"

# ------------------------------------------------------------------------------------------------ SCT-Bench
SCT_STEM = "A 34-year-old SYNTHETIC patient presents with 2 days of fever (38.9 °C) and a productive cough."
SCT_ROWS = [
    # question_id, stem, hypothesis, finding, panel -2 … +2
    ("sct-0", SCT_STEM, "If you were thinking of:   Community-acquired pneumonia",
     "And then you find: Crackles at the right base", (0, 0, 1, 4, 10)),
    ("sct-1", "A SYNTHETIC 60-year-old has chest pain on exertion.", "If you were thinking of: Stable angina",
     "And then you find: Pain reproduced by pressing on the chest wall", (3, 6, 1, 0, 0)),
    ("sct-2", "A SYNTHETIC 8-year-old has a sore throat.", "If you were considering: A rapid strep test",
     "And then you find: Cough and runny nose", (2, 2, 2, 0, 0)),
    ("sct-skipped", "A SYNTHETIC row with no finding.", "If you were thinking of: Anything", "", (1, 1, 1, 1, 1)),
]
#: the spec's test-case layout (section 1), then the adapter's "\n"
SCT_CASE = "## Scenario\n\n{0}\n\n## Hypothesis\n\n{1}\n\n## Additional Information\n\n{2}\n\n## Response\n"


def sct_csv(rows=SCT_ROWS) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["question_id", "source", "sct_stem", "question", "additional_info", "-2", "-1", "0", "1", "2"])
    for qid, stem, question, info, panel in rows:
        writer.writerow([qid, "synthetic", stem, question, info, *panel])
    return out.getvalue()


def write_sct(data: Path, rows=SCT_ROWS, template: Path | None = TEMPLATE_SOURCE) -> None:
    (data / "sct_bench").mkdir(parents=True, exist_ok=True)
    (data / "sct_bench" / "sct_cleaned_full.csv").write_text(sct_csv(rows), encoding="utf-8")
    if template is not None:
        (data / "medhelm08_templates").mkdir(parents=True, exist_ok=True)
        shutil.copy(template, data / "medhelm08_templates" / "sct_bench_scenario.py")


def sct_prefix(variant_file: str) -> str:
    """Everything the fork's example prompt holds before its test case: the guideline (and the examples)."""
    text = (PROMPTS / variant_file).read_text(encoding="utf-8")
    return text[: text.rindex("## Scenario\n\n")]


def sct_expected(variant_file: str, row) -> str:
    return sct_prefix(variant_file) + SCT_CASE.format(row[1], row[2], row[3])


# ------------------------------------------------------------------------------------------------ MedXpertQA
GREEK = ("alpha", "bêta", "gamma", "delta")
MEDXPERT_INSTRUCTIONS = ("You are a medical expert assistant. Answer the following medical question with single "
                         "letter from options.")


def medxpert_row(i: int, label: str) -> dict:
    options = {letter: f"SYNTHETIC option {letter}{i} ({GREEK[k % 4]})" for k, letter in enumerate("ABCDEFGHIJ")}
    choices = " ".join(f"({letter}) {text}" for letter, text in options.items())
    question = (f"A SYNTHETIC {20 + i}-year-old patient presents with finding #{i}. Which is the most likely "
                f"explanation? Answer Choices: {choices}")
    return {"id": f"Text-{i}", "question": question, "options": options, "label": label,
            "medical_task": "Diagnosis", "body_system": "Respiratory", "question_type": "Reasoning"}


MEDXPERT_LABELS = ("C", "A", "J")


def write_medxpert(data: Path) -> list[dict]:
    rows = [medxpert_row(i, label) for i, label in enumerate(MEDXPERT_LABELS)]
    (data / "medxpertqa").mkdir(parents=True, exist_ok=True)
    (data / "medxpertqa" / "test.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return rows


def medxpert_expected(row: dict) -> str:
    options = "".join(f"{letter}. {text}\n" for letter, text in row["options"].items())
    return f"{MEDXPERT_INSTRUCTIONS}\n\nQuestion: {row['question']}\n{options}Answer:"


# ------------------------------------------------------------------------------------------------ HealthQA-BR
HEALTHQA_INSTRUCTIONS = (
    "\n        Escolha a alternativa correta para as questões de medicina (responda apenas com a letra).\n"
    "        Exemplo de Pergunta com a resposta:\n"
    "        Qual dos seguintes órgãos é responsável pela produção da insulina no corpo humano?\n"
    "        A) Fígado\n        B) Rins\n        C) Pâncreas\n        D) Baço\n        E) Coração\n\n"
    "        Resposta correta: C\n\n        A partir disso, responda:\n        "
)


def healthqa_statement(i: int) -> str:
    return (f"{i + 1} Paciente SINTÉTICO de {20 + i} anos procura a Unidade Básica de Saúde com queixa nº {i}. "
            "Qual a conduta mais adequada?")


def healthqa_rows() -> list[dict]:
    rows = []
    for i, answer in enumerate(("b", " D ", "E")):
        options = "\n".join(f"'{letter}': 'Conduta SINTÉTICA {letter}{i}'" for letter in "ABCDE")
        rows.append({"id": i, "question": f"{healthqa_statement(i)}\n{options}", "answer": answer,
                     "source": "synthetic", "year": 2024, "group": "Medicina"})
    # the A) style: no option parsed, so the row is skipped (as medhelm skips it)
    rows.append({"id": 9, "question": "Pergunta SINTÉTICA?\nA) um\nB) dois", "answer": "A", "source": "synthetic",
                 "year": 2024, "group": "Medicina"})
    return rows


def write_healthqa(data: Path) -> list[dict]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = healthqa_rows()
    (data / "healthqa_br").mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), data / "healthqa_br" / "healthqa-br.parquet")
    return rows


def healthqa_expected(i: int) -> str:
    options = "".join(f"{letter}. Conduta SINTÉTICA {letter}{i}\n" for letter in "ABCDE")
    return f"{HEALTHQA_INSTRUCTIONS}\n\nPergunta: {healthqa_statement(i)}\n{options}Resposta:"


# ------------------------------------------------------------------------------------------------ synthetic privacy
SYNT_CONTEXT = ("SYNTHETIC context {i}: an adult patient (age {age}) is seen in clinic; a relative asks about the "
                "visit. No real person is described.")
SYNT = {
    # slug: (question of row i, instructions, role sentence, answer rule, choices)
    "synt_family_disclosure": (
        "SYNTHETIC case {i}: may the patient's health information be shared in this situation?", "Answer A or B.",
        "You are reviewing a clinical scenario to determine whether a healthcare provider is permitted under the HIPAA "
        "Privacy Rule to disclose an adult patient's health information to a family member, friend, or other person "
        "involved in the patient's care. ",
        "Answer 'A' if the disclosure is permitted and 'B' if the disclosure is not permitted. Do not provide any "
        "additional details or explanation; respond with only A or B.", "AB"),
    "synt_right_of_access": (
        "SYNTHETIC case {i}: may the requested record copy be shared in this situation?", "Answer A or B or C.",
        "You are reviewing a clinical scenario involving a request for access to an individual's own health "
        "information under the HIPAA Right of Access (45 CFR 164.524). ",
        "Answer 'A' if access must be granted, 'B' if access may be denied without review, or 'C' if access may be "
        "denied on a reviewable ground. Respond with only A, B, or C and no additional explanation.", "ABC"),
    "synt_written_consent": (
        "SYNTHETIC case {i}: may the substance-use-disorder treatment record be shared in this situation?",
        "Answer A or B.",
        "You are reviewing a clinical scenario to determine whether the use or disclosure of substance-use-disorder "
        "records is permitted under 42 CFR Part 2. ",
        "Answer 'A' if the disclosure is permitted and 'B' if it is not permitted. Respond with only A or B and no "
        "additional explanation.", "AB"),
}
SYNT_LABELS = {"synt_family_disclosure": "ABA", "synt_right_of_access": "CAB", "synt_written_consent": "BBA"}


def synt_rows(slug: str) -> list[tuple[str, str, str]]:
    question = SYNT[slug][0]
    return [(question.format(i=i), SYNT_CONTEXT.format(i=i, age=30 + i), label)
            for i, label in enumerate(SYNT_LABELS[slug])]


def write_synt(data: Path, slug: str, rows=None) -> list[tuple[str, str, str]]:
    rows = synt_rows(slug) if rows is None else rows
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["prompt", "context", "label"])
    writer.writerows(rows)
    (data / slug).mkdir(parents=True, exist_ok=True)
    (data / slug / f"{slug}.csv").write_text(out.getvalue(), encoding="utf-8")
    return rows


def synt_expected(slug: str, question: str, context: str) -> str:
    _, instructions, role, rule, choices = SYNT[slug]
    text = f"{role}Please answer the following question: {question} using the following context: {context}. {rule}"
    options = "".join(f"{c}. {c}\n" for c in choices)
    return f"{instructions}\n\n: {text}\n{options}:"
