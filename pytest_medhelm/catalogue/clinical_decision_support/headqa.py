"""HEAD-QA (English): Spanish healthcare specialisation exam questions, four options (HELM ``HeadQAScenario``,
``head_qa``).

HELM's test split is the 2016 and 2017 exams (``HEAD_EN/test_HEAD_EN.json`` in the dataset's zip, the same as
Hugging Face ``dvilares/head_qa`` ``en`` split ``test``), exams in file order then questions in exam order, without
the questions that come with an image (counted in ``Loaded.removed``): 2,675 instances. The pinned source is the
full ``HEAD_EN.json`` (all exams, a plain file at a commit), whose 2016/2017 exams are exactly that test file in the
same order (the 2013-2015 exams are HELM's train and validation splits, never evaluated: skipped as a split, not
counted as removed); a ``test_HEAD_EN.json`` in the data directory is read instead when present.

HELM strips the question and option texts and matches the correct option by ``aid == ra`` as integers; so does
this loader. Instance ids are ``<exam>-<question number>``, e.g. ``2017_1_F-30``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_medhelm.catalogue.definition import Benchmark
from pytest_medhelm.data.errors import DataError
from pytest_medhelm.data.readers import data_file, read_json, require
from pytest_medhelm.data.sources import DataFile
from pytest_medhelm.metrics.exact_match import MULTIPLE_CHOICE_EXACT_MATCH
from pytest_medhelm.prompting import MultipleChoicePrompt
from pytest_medhelm.values import Instance, Loaded

SLUG = "headqa"
FULL_FILE = "HEAD_EN.json"
TEST_FILE = "test_HEAD_EN.json"
TEST_YEARS = ("2016", "2017")


def _integer(value: Any, path: Path, where: str, key: str) -> int:
    try:
        return int(str(value).strip())
    except ValueError:
        raise DataError(path, where, f"{key} must be an integer, got {value!r}") from None


def _exams(path: Path, data: Any) -> Mapping[str, Any]:
    exams = require(data, "exams", path, "top level")
    if not isinstance(exams, dict):
        raise DataError(path, "key 'exams'", f"expected an object of exams, got {type(exams).__name__}")
    return exams


def build_instances(files: Mapping[str, Path]) -> Loaded:
    if TEST_FILE in files:
        path, years = files[TEST_FILE], None  # already the test exams only
    else:
        path, years = data_file(files, FULL_FILE), TEST_YEARS
    instances = Loaded(slug=SLUG)
    seen: set[str] = set()
    for exam_key, exam in _exams(path, read_json(path)).items():
        where = f"exam {exam_key!r}"
        name = str(require(exam, "name", path, where)).strip()
        year = str(require(exam, "year", path, where)).strip()
        if years is not None and year not in years:
            continue
        category = str(require(exam, "category", path, where)).strip()
        questions = require(exam, "data", path, where)
        if not isinstance(questions, list):
            raise DataError(path, f"{where}, key 'data'", "expected a list of questions")
        for position, question in enumerate(questions, start=1):
            q_where = f"{where}, question {position}"
            image = question.get("image") if isinstance(question, dict) else None
            if str(image or "").strip():
                instances.note_removed("question with an image (HELM keeps the text-only questions)")
                continue
            qid = _integer(require(question, "qid", path, q_where), path, q_where, "qid")
            ra = _integer(require(question, "ra", path, q_where), path, q_where, "ra")
            answers = require(question, "answers", path, q_where)
            if not isinstance(answers, list) or not answers:
                raise DataError(path, q_where, "expected a non-empty list of answers")
            aids = [_integer(require(a, "aid", path, q_where), path, q_where, "aid") for a in answers]
            if ra not in aids:
                raise DataError(path, q_where, f"the right answer ra={ra} is not among the answer ids {aids}")
            instance_id = f"{name.removeprefix('Cuaderno_')}-{qid}"
            if instance_id in seen:
                raise DataError(path, q_where, f"duplicate question id {instance_id!r}")
            seen.add(instance_id)
            choices = tuple(str(require(a, "atext", path, q_where)).strip() for a in answers)
            correct = aids.index(ra)
            instances.append(
                Instance(
                    id=instance_id,
                    input=str(require(question, "qtext", path, q_where)).strip(),
                    references=(choices[correct],),
                    choices=choices,
                    correct=correct,
                    extra={"exam": name, "year": year, "category": category, "qid": qid},
                    benchmark=SLUG,
                )
            )
    if not instances:
        raise DataError(path, "key 'exams'", f"no text-only questions from the test exams ({', '.join(TEST_YEARS)})")
    return instances.done()


BENCHMARK = Benchmark(
    slug=SLUG,
    name="HeadQA",
    subcategory="Providing Clinical Knowledge Support",
    access="public",
    kind="closed",
    files=(
        DataFile(
            name=TEST_FILE,
            description="HELM's file: HEAD_EN/test_HEAD_EN.json from head-qa-es-en-pdfs.zip of dvilares/head_qa",
            optional=True,
            stands_in_for=FULL_FILE,
        ),
        DataFile(
            name=FULL_FILE,
            url=(
                "https://raw.githubusercontent.com/raulista1997/benchmarkdata/"
                "52ba5528fd1ff1c6ec4ad1d0850126836404e71f/HEAD_EN.json"
            ),
            sha256="b7b55188f708a0a78ca0c1711b96890af42c0f528ff4aa6b4a29be47ee3c21c0",
            description="the full English HEAD-QA v1.0 (all exams 2013-2017; MIT licence)",
        ),
    ),
    build_instances=build_instances,
    prompt=MultipleChoicePrompt(
        instructions=(
            "You are a highly knowledgeable AI assistant specializing in biomedical sciences. Your task is to answer "
            "multiple-choice questions accurately based on the options provided. Each question will relate to "
            "biomedical concepts, and you will be asked to choose the most appropriate answer.\n\n"
            "Select the correct answer by outputting only the letter corresponding to your choice (A, B, C, or D)."
        ),
        input_noun="Question",
        output_noun="Answer",
    ),
    metric=MULTIPLE_CHOICE_EXACT_MATCH,
    max_tokens=1,
    description="Answer a multiple-choice question from a Spanish healthcare specialisation exam (in English).",
    example=(
        "{\"exams\": {\"Cuaderno_2016_1_M\": {\"name\": \"Cuaderno_2016_1_M\", \"year\": \"2016\", \"category\": "
        "\"medicine\", \"data\": [{\"qid\": \"1\", \"qtext\": \"Which synthetic vitamin deficiency causes scurvy?\", "
        "\"ra\": \"3\", \"image\": \"\", \"answers\": [{\"aid\": 1, \"atext\": \"A\"}, {\"aid\": 2, \"atext\": "
        "\"B12\"}, {\"aid\": 3, \"atext\": \"C\"}, {\"aid\": 4, \"atext\": \"D\"}]}]}}}"
    ),
    instance_count=2675,
    filters="questions that come with an image (67 on the pinned data): HELM keeps the text-only questions",
)
