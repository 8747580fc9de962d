"""HealthQA-BR: Brazilian health-professional exam questions in Portuguese (medicine, nursing, dentistry,
psychology, pharmacy, …; medhelm 0.8.0 ``HEALTHQA_BR_Scenario``, run spec ``healthqa_br``).

**Data.** medhelm loads the Hugging Face dataset ``Larxel/healthqa-br`` (split ``train``) at no pinned revision; its
one file is ``healthqa-br.parquet``, read here as ``DIR/healthqa_br/healthqa-br.parquet`` (needs pyarrow), or the
same rows as JSON lines in ``healthqa-br.jsonl``. Neither a revision nor a sha256 is known to this project, so the
file is not verified (recorded as such under ``run.data_unverified``). Fields used: ``question``
and ``answer``.

**Parsing** (medhelm's): ``question`` holds the statement, then the options as lines ``'A': 'text'``. The statement
is everything before the first line matching ``'X': '…'`` (stripped); the options are every ``'X': 'text'`` after it
(a letter met twice keeps its last text; an apostrophe inside an option ends it, as in medhelm). The correct letter
is ``answer`` stripped and upper-cased. A row whose letter is not among its options is skipped, as medhelm skips it
(this includes questions written ``A) …``), and counted. Ids ``id0``, … over the kept rows. When two options carry
the correct option's text, either letter counts (HELM's reference texts).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from pytest_medhelm.catalogue.definition import Benchmark
from pytest_medhelm.data.errors import DataError, DataMissing
from pytest_medhelm.data.readers import read_jsonl, read_parquet_rows, require
from pytest_medhelm.data.sources import DataFile
from pytest_medhelm.metrics.exact_match import MULTIPLE_CHOICE_EXACT_MATCH
from pytest_medhelm.prompting import MultipleChoicePrompt
from pytest_medhelm.values import Instance, Loaded

SLUG = "healthqa_br"
PARQUET = "healthqa-br.parquet"
JSONL = "healthqa-br.jsonl"
SKIPPED = "a question whose answer letter is not among the options parsed from it (medhelm skips these rows)"
_FIRST_OPTION = re.compile(r"\n'[A-Z]':\s*'.+")
_OPTION = re.compile(r"'([A-Z])':\s*'([^']+)'")

#: the run spec's instructions: a triple-quoted block that keeps its first line break and its indentation
INSTRUCTIONS = (
    "\n        Escolha a alternativa correta para as questões de medicina (responda apenas com a letra).\n"
    "        Exemplo de Pergunta com a resposta:\n"
    "        Qual dos seguintes órgãos é responsável pela produção da insulina no corpo humano?\n"
    "        A) Fígado\n        B) Rins\n        C) Pâncreas\n        D) Baço\n        E) Coração\n\n"
    "        Resposta correta: C\n\n"
    "        A partir disso, responda:\n        "
)


def split_question(text: str) -> tuple[str, dict[str, str]]:
    """(statement, options by letter) as medhelm splits a ``question`` cell."""
    match = _FIRST_OPTION.search(text)
    if match is None:
        return text.strip(), {}
    return text[: match.start()].strip(), dict(_OPTION.findall(text[match.start():].strip()))


def _rows(files: Mapping[str, Path]):
    if JSONL in files:
        return files[JSONL], read_jsonl(files[JSONL])
    if PARQUET in files:
        return files[PARQUET], read_parquet_rows(files[PARQUET])
    raise DataMissing(f"{SLUG}: neither {PARQUET} nor {JSONL} was resolved")


def build_instances(files: Mapping[str, Path]) -> Loaded:
    path, rows = _rows(files)
    if not rows:
        raise DataError(path, "", "no rows")
    loaded = Loaded(slug=SLUG)
    for row in rows:
        where = f"row {row.number}"
        question = require(row, "question", path, where)
        answer = require(row, "answer", path, where)
        if not isinstance(question, str) or not isinstance(answer, str):
            raise DataError(path, where, "'question' and 'answer' must be strings, got "
                                         f"{type(question).__name__} and {type(answer).__name__}")
        statement, options = split_question(question)
        letter = answer.strip().upper()
        if letter not in options:
            loaded.note_removed(SKIPPED)
            continue
        choices = tuple(options.values())
        loaded.append(
            Instance(
                id=f"id{len(loaded)}",
                input=statement,
                references=(options[letter],),
                choices=choices,
                correct=list(options).index(letter),
                extra={"id": row.get("id")},
                benchmark=SLUG,
            )
        )
    return loaded.done()


BENCHMARK = Benchmark(
    slug=SLUG,
    name="HealthQA-BR",
    # medhelm 0.8.0 gives a category only; this subcategory of it is ours: exam knowledge questions, as HeadQA's
    subcategory="Providing Clinical Knowledge Support",
    access="public",
    kind="closed",
    files=(
        DataFile(name=JSONL, description="the same rows as JSON lines (question, answer, …)", optional=True,
                 stands_in_for=PARQUET),
        DataFile(
            name=PARQUET,
            url="https://huggingface.co/datasets/Larxel/healthqa-br/resolve/main/healthqa-br.parquet",
            sha256="",  # neither a Hub revision nor a sha256 is known to this project: not verified
            description=(
                "the Hugging Face dataset Larxel/healthqa-br (CC-BY-4.0; needs pyarrow): columns id, question "
                "(statement then lines 'A': 'text'), answer (the letter), source, year, group; or instead "
                f"{JSONL} (JSON lines)"
            ),
        ),
    ),
    build_instances=build_instances,
    prompt=MultipleChoicePrompt(instructions=INSTRUCTIONS, input_noun="Pergunta", output_noun="Resposta"),
    metric=MULTIPLE_CHOICE_EXACT_MATCH,
    max_tokens=1,
    description="Answer a Brazilian health-professional exam question in Portuguese (SUS context).",
    example=(
        "{\"id\": 1, \"question\": \"Paciente SINTÉTICO de 20 anos com febre. Qual a conduta?\\n'A': 'Conduta A'\\n"
        "'B': 'Conduta B'\\n'C': 'Conduta C'\\n'D': 'Conduta D'\\n'E': 'Conduta E'\", \"answer\": \"B\", "
        "\"source\": \"synthetic\", \"year\": 2024, \"group\": \"Medicina\"}"
    ),
    filters=SKIPPED,
)
