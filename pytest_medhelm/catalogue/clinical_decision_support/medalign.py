"""MedAlign: follow a clinician's instruction over a patient's longitudinal EHR (HELM ``MedalignScenario`` and
``medalign_scenario_helper.py``, ``medalign``; gated, Redivis; Fleming et al. 2023).

**Files** (HELM's ``data_path``, the MedAlign release): ``clinician-reviewed-model-responses.tsv`` (the
instructions: ``instruction_id``, ``question``, ``person_id``; many rows per instruction, one per reviewed model
response), ``clinician-instruction-responses.tsv`` (the clinicians' own answers: ``instruction_id``,
``annotator_num``, ``clinician_response``) and the folder ``medalign_ehr_xml/`` holding one XML EHR timeline per
patient, named ``<person_id>.xml``.

**Instances, as HELM HEAD builds them.**

1. Instructions: every row of the first TSV, keyed by ``instruction_id`` (a repeated id keeps its first place and
   its last row's question and patient, as HELM's dict).
2. Prompt per instruction: ``Instruction: Answer the following question based on the EHR:⏎⏎EHR: {ehr}⏎⏎Question:
   {question}⏎⏎Answer:``, where ``{ehr}`` is the whole XML file (read as text) cut to its **last**
   ``100000 − 256 − tok(template) − tok(question)`` cl100k tokens (GPT-4's tokenizer; ``tok(template)`` counts the
   template with its ``{ehr}`` / ``{question}`` placeholders), or empty when that budget is not positive. This is
   HEAD's behaviour (commit ``faaec36a6``): no BM25 retrieval and no instruction dropped (the paper-era code
   silently dropped every instruction whose EHR exceeded the budget).
3. References: the rows of the second TSV with ``annotator_num == 'Annotator_1'``, inner-joined on
   ``instruction_id`` *with the references on the left*: the instance order is the reference file's order.
   Reference rows of other annotators, reference rows without an instruction and instructions without an
   Annotator_1 answer are counted in ``Loaded.removed``.

Input (HELM's ``PassageQuestionInput`` with an empty passage) = ``⏎Question: `` + prompt; the run has no
instructions and no nouns, so the request is ``⏎Question: Instruction: …Answer:⏎``. 256 tokens. Ids: the
``instruction_id``. Scored by the LLM jury (``metrics/jury.py``), ROUGE-1/2/L and BERTScore beside it.

**Approximations.** The EHR is cut in one pass of the tokenizer (HELM encodes, keeps the last 2×budget tokens,
decodes, re-encodes and keeps the last budget tokens: the same tokens except in pathological cases); tiktoken is
told to treat special-token text such as ``<|endoftext|>`` as plain text where HELM would raise; files in
``medalign_ehr_xml/`` whose name does not start with a number are ignored (HELM crashes on them).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from pytest_medhelm.catalogue.definition import Benchmark
from pytest_medhelm.catalogue.user_files import cl100k, safe_id, unique_id
from pytest_medhelm.data.errors import DataError
from pytest_medhelm.data.readers import data_file, read_bytes, read_csv_rows, universal_newlines
from pytest_medhelm.data.sources import DataFile
from pytest_medhelm.metrics.jury import jury_metric
from pytest_medhelm.prompting import GenerationPrompt
from pytest_medhelm.values import Instance, Loaded

SLUG = "medalign"
INSTRUCTIONS = "clinician-reviewed-model-responses.tsv"
RESPONSES = "clinician-instruction-responses.tsv"
EHR_DIR = "medalign_ehr_xml"

TEMPLATE = (
    "Instruction: Answer the following question based on the EHR:\n\nEHR: {ehr}\n\nQuestion: {question}\n\nAnswer:"
)
#: HELM's ``max_length`` for the leaderboard runs (``medalign:max_length=100000``) and its generation budget
MAX_LENGTH = 100_000
GENERATION_LENGTH = 256


def _person(value: str, path: Path, where: str) -> int:
    try:
        return int(float(value))
    except ValueError:
        raise DataError(path, where, f"'person_id' must be a number, got {value!r}") from None


def _ehr_files(folder: Path) -> dict[int, Path]:
    found: dict[int, Path] = {}
    for name in sorted(os.listdir(folder)):
        try:
            found.setdefault(int(name.split(".")[0]), folder / name)
        except ValueError:
            continue
    return found


def _read_ehr(path: Path) -> str:
    raw = read_bytes(path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(path, f"byte {exc.start}", f"not valid UTF-8 ({exc.reason})") from None
    return universal_newlines(text)  # open(..., encoding="utf-8")


def truncated_prompt(question: str, ehr: str, max_length: int | None = None) -> str:
    """HELM HEAD's prompt: the template with the EHR cut to the tokens that fit (see the module docstring)."""
    encoding = cl100k()
    limit = MAX_LENGTH if max_length is None else max_length
    budget = (limit - GENERATION_LENGTH - len(encoding.encode(TEMPLATE, disallowed_special=()))
              - len(encoding.encode(question, disallowed_special=())))
    if budget <= 0:
        ehr = ""
    else:
        tokens = encoding.encode(ehr, disallowed_special=())
        if len(tokens) > budget:
            ehr = encoding.decode(tokens[-budget:])
    return TEMPLATE.format(ehr=ehr, question=question)


def build_instances(files: Mapping[str, Path]) -> Loaded:
    instructions_path = data_file(files, INSTRUCTIONS)
    responses_path = data_file(files, RESPONSES)
    ehr_dir = data_file(files, EHR_DIR)
    if not ehr_dir.is_dir():
        raise DataError(ehr_dir, "", "expected a folder of <person_id>.xml files")

    instructions: dict[str, tuple[str, int, Path, str]] = {}  # id -> (question, person, file, where)
    for row in read_csv_rows(instructions_path, ("instruction_id", "question", "person_id"), delimiter="\t",
                            universal_newlines=False):
        person = _person(row["person_id"], instructions_path, row.where)
        instructions[row["instruction_id"].strip()] = (row["question"], person, instructions_path, row.where)

    loaded = Loaded(slug=SLUG)
    responses = read_csv_rows(
        responses_path, ("instruction_id", "annotator_num", "clinician_response"), delimiter="\t",
        universal_newlines=False,
    )
    ehrs = _ehr_files(ehr_dir)
    prompts: dict[str, str] = {}
    answered: set[str] = set()
    seen: set[str] = set()
    for row in responses:
        if row["annotator_num"] != "Annotator_1":
            loaded.note_removed("answer of another annotator than Annotator_1 (HELM keeps Annotator_1)")
            continue
        instruction_id = row["instruction_id"].strip()
        if instruction_id not in instructions:
            loaded.note_removed(f"Annotator_1 answer whose instruction_id is not in {INSTRUCTIONS} (inner join)")
            continue
        answered.add(instruction_id)
        if instruction_id not in prompts:
            question, person, path, where = instructions[instruction_id]
            ehr_path = ehrs.get(person)
            if ehr_path is None:
                raise DataError(path, where, f"no EHR for person_id {person}: expected {ehr_dir / f'{person}.xml'}")
            prompts[instruction_id] = truncated_prompt(question, _read_ehr(ehr_path))
        loaded.append(
            Instance(
                id=unique_id(safe_id(instruction_id), seen),
                input="\nQuestion: " + prompts[instruction_id],
                references=(row["clinician_response"],),
                extra={"instruction_id": instruction_id},
                benchmark=SLUG,
            )
        )
    loaded.note_removed("instruction without an Annotator_1 answer (inner join)", len(set(instructions) - answered))
    return loaded.done()


BENCHMARK = Benchmark(
    slug=SLUG,
    name="MedAlign",
    subcategory="Providing Clinical Knowledge Support",
    access="gated",
    kind="open",
    files=(
        DataFile(
            name=INSTRUCTIONS,
            description=(
                "tab-separated, header line, columns 'instruction_id', 'question', 'person_id' (the instructions)"
            ),
        ),
        DataFile(
            name=RESPONSES,
            description=(
                "tab-separated, header line, columns 'instruction_id', 'annotator_num' ('Annotator_1' rows are "
                "used), 'clinician_response' (the reference answers)"
            ),
        ),
        DataFile(
            name=EHR_DIR,
            is_dir=True,
            description="a folder with one XML EHR timeline per patient, named <person_id>.xml",
        ),
    ),
    build_instances=build_instances,
    prompt=GenerationPrompt(instructions="", input_noun=None, output_noun=None),
    metric=jury_metric(SLUG),  # the LLM jury; ROUGE and BERTScore are recorded beside it
    max_tokens=256,
    description="Follow a clinician's instruction over a patient's longitudinal EHR.",
    data_help=(
        "gated: apply for the MedAlign dataset (Stanford, on Redivis: https://redivis.com) and copy its two TSV "
        "files and its EHR XML folder here. Synthetic example: clinician-reviewed-model-responses.tsv row "
        "'17<TAB>What was the last HbA1c value?<TAB>1001'; clinician-instruction-responses.tsv row "
        "'17<TAB>Annotator_1<TAB>7.2% on 2020-03-04'; medalign_ehr_xml/1001.xml '<eventstream><encounter "
        "start=\"03/04/20 9:00 AM\">...</encounter></eventstream>'"
    ),
    filters=(
        "reference answers of annotators other than Annotator_1; Annotator_1 answers whose instruction_id has no "
        "instruction; instructions without an Annotator_1 answer (HELM's inner join)"
    ),
)
