"""MentalHealth: write the next counselor turn of a mental-health counseling conversation (HELM
``MentalHealthScenario``, ``mental_health``; Stanford, private; built from 7 dialogues).

HELM reads one CSV with pandas (``data_path=…/processed_dialogues.csv``) with the columns ``topic``,
``dialogue_type``, ``context`` (the conversation so far) and ``gold_counselor_response``; every row is a test
instance, in file order (ids ``row<N>``, the 1-based data row). The fields are printed as pandas holds them: a
column of integers prints ``1``, and once one of its cells is empty pandas makes it a float column (``1.0``) and
the empty cell prints ``nan`` (:func:`pytest_medhelm.catalogue.user_files.pandas_strings`). Input (HELM's
``PassageQuestionInput`` with an empty passage): ``⏎Question: Topic: {topic}⏎Type: {dialogue_type}⏎⏎Previous
conversation:⏎{context}⏎⏎Generate an empathetic and appropriate counselor response:``; reference: the gold
counselor response.

Prompt: ``Given a mental health conversation history, generate an empathetic and appropriate counselor
response.⏎⏎{input}⏎Counselor response:``; 512 tokens.
Scored by the LLM jury (``metrics/jury.py``), ROUGE-1/2/L and BERTScore beside it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pytest_medhelm.catalogue.definition import Benchmark
from pytest_medhelm.catalogue.user_files import pandas_strings
from pytest_medhelm.data.readers import data_file, read_csv_rows
from pytest_medhelm.data.sources import DataFile
from pytest_medhelm.metrics.jury import jury_metric
from pytest_medhelm.prompting import GenerationPrompt
from pytest_medhelm.values import Instance, Loaded

SLUG = "mentalhealth"
FILE = "processed_dialogues.csv"
COLUMNS = ("topic", "dialogue_type", "context", "gold_counselor_response")


def build_instances(files: Mapping[str, Path]) -> Loaded:
    path = data_file(files, FILE)
    rows = read_csv_rows(path, COLUMNS, universal_newlines=False)  # pandas.read_csv
    shown = {column: pandas_strings([row[column] for row in rows]) for column in COLUMNS}
    loaded = Loaded(slug=SLUG)
    for k, row in enumerate(rows):
        topic, dialogue_type, context, gold = (shown[column][k] for column in COLUMNS)
        question = (
            f"Topic: {topic}\n"
            f"Type: {dialogue_type}\n"
            f"\nPrevious conversation:\n{context}\n"
            f"\nGenerate an empathetic and appropriate counselor response:"
        )
        loaded.append(
            Instance(id=f"row{row.number}", input=f"\nQuestion: {question}", references=(gold,), benchmark=SLUG)
        )
    return loaded.done()


BENCHMARK = Benchmark(
    slug=SLUG,
    name="MentalHealth",
    subcategory="Facilitating Patient Engagement and Support",
    access="private",
    kind="open",
    files=(
        DataFile(
            name=FILE,
            description=(
                "CSV with a header line and the columns 'topic', 'dialogue_type' (a number), 'context' (the "
                "conversation so far, one 'counselor: …' / 'client: …' turn per line) and "
                "'gold_counselor_response'"
            ),
        ),
    ),
    build_instances=build_instances,
    prompt=GenerationPrompt(
        instructions=(
            "Given a mental health conversation history, generate an empathetic and appropriate counselor response."
        ),
        input_noun=None,
        output_noun="Counselor response",
    ),
    metric=jury_metric(SLUG),  # the LLM jury; ROUGE and BERTScore are recorded beside it
    max_tokens=512,
    description="Write the next counselor turn of a mental-health counseling conversation.",
    data_help=(
        "private Stanford dataset, not distributed: use your institution's own file in this format (HELM's name "
        "for it is processed_dialogues.csv). Synthetic example row: "
        "topic,dialogue_type,context,gold_counselor_response / Workplace,1,\"counselor: Hi, what brings you here "
        "today?\nclient: I feel I don't fit in at my new job.\",\"It sounds lonely to start somewhere new. What "
        "has been the hardest part?\""
    ),
)
