"""MedHallu (PQA-labeled): is this answer to a PubMed question factual ("0") or hallucinated ("1")? (HELM
``MedHalluScenario``, ``medhallu``).

HELM reads Hugging Face ``UTAustin-AIHealth/MedHallu``, config ``pqa_labeled``, split ``train`` (1,000 rows) at
revision ``51506045``, and makes two instances per row, in row order: the ground-truth answer (label ``"0"``), then
the hallucinated answer (label ``"1"``): 2,000 instances, nothing filtered. Instance ids are ``<row>-gt`` and
``<row>-hal`` (row numbers from 0, as in the dataset).

The prompt prints the knowledge the way HELM's f-string does: ``str()`` of the Python list of paragraphs
(``['...', '...']``, with Python's quoting and escapes); the question and answer are printed as they are (one
ground-truth answer contains U+2029, kept). The model answers freely (5 tokens, no stop sequence); the score is
exact match of the stripped answer with the label.

Files, any one of (in ``--medhelm-data-dir DIR/medhallu/``):

* ``medhallu_pqa_labeled.jsonl``: the 1,000 rows as JSON lines with the dataset's fields (``Question``,
  ``Knowledge`` (list of strings), ``Ground Truth``, ``Hallucinated Answer``, ...): read with the standard library,
  the format for offline use;
* ``MedHallu_pqa_labeled/``: the ``datasets.save_to_disk`` folder (``train/data-00000-of-00001.arrow``), read with
  ``pyarrow`` when installed;
* ``train-00000-of-00001.parquet``: the Hub's own file at the pinned revision (downloaded when nothing else is
  there; read with ``pyarrow``). Its sha256 is not recorded (not known to this project), so it is not verified.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_medhelm.catalogue.definition import Benchmark
from pytest_medhelm.data.errors import DataError, DataMissing
from pytest_medhelm.data.readers import read_jsonl, require
from pytest_medhelm.data.sources import DataFile
from pytest_medhelm.metrics.exact_match import GENERATION_EXACT_MATCH
from pytest_medhelm.prompting import GenerationPrompt
from pytest_medhelm.values import Instance

SLUG = "medhallu"
JSONL_FILE = "medhallu_pqa_labeled.jsonl"
ARROW_DIR = "MedHallu_pqa_labeled"
ARROW_MEMBER = "train/data-00000-of-00001.arrow"
PARQUET_FILE = "train-00000-of-00001.parquet"
REVISION = "515060458a945c633debc6fd5baac7764416b724"
LABELS = (("Ground Truth", "0", "gt"), ("Hallucinated Answer", "1", "hal"))
FIELDS = ("Question", "Knowledge", "Ground Truth", "Hallucinated Answer")


def instance_text(knowledge: list[str], question: str, answer: str) -> str:
    # HELM: f"World Knowledge: {knowledge}\n\nQuestion: {question}\n\nAnswer: {answer}\n" with knowledge a list
    return f"World Knowledge: {knowledge}\n\nQuestion: {question}\n\nAnswer: {answer}\n"


def _pyarrow(path: Path) -> Any:
    try:
        import pyarrow
    except ImportError:
        raise DataMissing(
            f"{SLUG}: reading {path} needs pyarrow (pip install pyarrow), or put {JSONL_FILE} "
            f"(the same rows as JSON lines) in the data directory instead"
        ) from None
    return pyarrow


def _arrow_rows(path: Path) -> list[tuple[str, Mapping[str, Any]]]:
    """Rows of an Arrow IPC stream (``save_to_disk``) or a parquet file, each with where it is for errors."""
    pa = _pyarrow(path)
    try:
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            table = pq.read_table(path)
        else:
            with pa.memory_map(str(path)) as source:
                table = pa.ipc.open_stream(source).read_all()
    except (OSError, pa.ArrowException) as exc:
        raise DataError(path, "", f"not a readable Arrow/Parquet table ({exc})") from None
    return [(f"row {k}", row) for k, row in enumerate(table.to_pylist())]


def _rows(files: Mapping[str, Path]) -> tuple[Path, list[tuple[str, Mapping[str, Any]]]]:
    if JSONL_FILE in files:
        path = files[JSONL_FILE]
        return path, [(f"row {k} (line {r.line})", r.values) for k, r in enumerate(read_jsonl(path))]
    if ARROW_DIR in files:
        path = files[ARROW_DIR] / ARROW_MEMBER
        if not path.is_file():
            raise DataError(files[ARROW_DIR], "", f"the dataset folder has no {ARROW_MEMBER}")
        return path, _arrow_rows(path)
    if PARQUET_FILE in files:
        return files[PARQUET_FILE], _arrow_rows(files[PARQUET_FILE])
    raise DataMissing(f"{SLUG}: none of {JSONL_FILE}, {ARROW_DIR}/ or {PARQUET_FILE} was resolved")


def build_instances(files: Mapping[str, Path]) -> list[Instance]:
    path, rows = _rows(files)
    if not rows:
        raise DataError(path, "", "no rows")
    instances: list[Instance] = []
    for number, (where, row) in enumerate(rows):
        values = {key: require(row, key, path, where) for key in FIELDS}
        knowledge = values["Knowledge"]
        if not isinstance(knowledge, list) or not all(isinstance(p, str) for p in knowledge):
            raise DataError(path, where, f"'Knowledge' must be a list of strings, got {knowledge!r:.80}")
        for key in ("Question", "Ground Truth", "Hallucinated Answer"):
            if not isinstance(values[key], str):
                raise DataError(path, where, f"{key!r} must be a string, got {type(values[key]).__name__}")
        for answer_key, label, suffix in LABELS:
            instances.append(
                Instance(
                    id=f"{number}-{suffix}",
                    input=instance_text(knowledge, values["Question"], values[answer_key]),
                    references=(label,),
                    extra={
                        "row": number,
                        "difficulty": row.get("Difficulty Level"),
                        "hallucination_category": row.get("Category of Hallucination") if label == "1" else None,
                    },
                    benchmark=SLUG,
                )
            )
    return instances


_JUDGE = "Return just an integer value, '0' if the answer is factual and '1' if the answer is hallucinated."

BENCHMARK = Benchmark(
    slug=SLUG,
    name="MedHallu",
    subcategory="Ensuring Clinical Research Quality",
    access="public",
    kind="closed",
    files=(
        DataFile(
            name=JSONL_FILE,
            description="the 1,000 PQA-labeled rows as JSON lines (fields as in the dataset)",
            optional=True,
            stands_in_for=PARQUET_FILE,
        ),
        DataFile(
            name=ARROW_DIR,
            description="datasets.save_to_disk() folder of the pqa_labeled config (needs pyarrow)",
            is_dir=True,
            optional=True,
            stands_in_for=PARQUET_FILE,
        ),
        DataFile(
            name=PARQUET_FILE,
            url=(
                f"https://huggingface.co/datasets/UTAustin-AIHealth/MedHallu/resolve/{REVISION}/"
                f"pqa_labeled/{PARQUET_FILE}"
            ),
            sha256="",  # not known to this project: the download is not verified
            description=(
                f"HF UTAustin-AIHealth/MedHallu pqa_labeled (MIT licence; needs pyarrow), or instead "
                f"{JSONL_FILE} (JSON lines) or the {ARROW_DIR}/ folder"
            ),
        ),
    ),
    build_instances=build_instances,
    prompt=GenerationPrompt(
        instructions=(
            "You are an AI assistant with extensive knowledge in the field of medicine. I want you act as an answer "
            "judge. Given a question and an answer, your objective is to determine if the provided answer contains "
            "non-factual or hallucinated information. You SHOULD give your judgement based on the following "
            "hallucination types and the world knowledge.\n\n"
            "You are trying to determine if there is a factual contradiction between the answer and the world "
            "knowledge. Some information in the answer might be fabricated. Answer '0' if the answer is factual and "
            "'1' if the answer is hallucinated. You can categorize the answer as hallucinated if it falls in either "
            "of the category:\n"
            "Type: Misinterpretation of #Question#: These are hallucinated answers that misunderstands the question, "
            "leading to an off-topic or irrelevant response.\n"
            "Type: Incomplete Information: These are hallucinated answers that Point out what is not true without "
            "providing correct information.\n"
            "Type: Mechanism and Pathway Misattribution - These are hallucinated answer that falsely attribution of "
            "biological mechanisms, molecular pathways, or disease processes that contradicts established medical "
            "knowledge\n"
            "Type: Methodological and Evidence Fabrication - Inventing false research methods, statistical data, or "
            "specific clinical outcomes\n\n"
            "Do not return anything else, just the answer.\n"
            f"{_JUDGE} No letter or word, just the integer value."
        ),
        input_noun=None,
        output_noun=f"{_JUDGE}\nNo letter or word, just the integer value.\n\nYour Judgment",
    ),
    metric=GENERATION_EXACT_MATCH,
    max_tokens=5,
    description="Judge whether an answer to a PubMed research question is factual (0) or hallucinated (1).",
    example=(
        "{\"Question\": \"Does synthetic drug X reduce fever?\", \"Knowledge\": [\"A synthetic trial of drug X in 50 "
        "adults.\"], \"Ground Truth\": \"Yes, it reduced fever.\", \"Hallucinated Answer\": \"No, it raised blood "
        "pressure.\", \"Difficulty Level\": \"easy\", \"Category of Hallucination\": \"Misinterpretation of "
        "#Question#\"}"
    ),
    instance_count=2000,
)
