"""MEDIQA-QA: answer a consumer health question (HELM ``MediQAScenario``, ``medi_qa``).

HELM loads the ``test`` split of the Hugging Face dataset ``bigbio/mediqa_qa`` (revision ``9288641f…``), whose
loading script parses ``MEDIQA2019-Task3-QA-TestSet-wLabels.xml`` of ``abachaa/MEDIQA2019`` with ElementTree
(newer HELM parses the same XML itself). This loader reads that XML directly and builds the same 150 instances:

* one instance per ``<Question QID="…">``, in file order; the id is the ``QID`` (``1`` to ``195``, with gaps);
* input = the ``<QuestionText>`` text exactly as ElementTree gives it (entities decoded, nothing stripped);
* reference = the ``<AnswerText>`` of the first ``<Answer>`` whose ``ReferenceRank`` is 1 (the answer the
  organisers ranked best; ``Task3_README.txt``: "ReferenceRank: corresponds to the correct rank").

HELM's code falls back to an empty reference when no answer has rank 1; every question of the published file has
one, so such a file is treated as damaged here (a :class:`~pytest_medhelm.data.errors.DataError` naming the
question), as is a question without text or an answer list. Licence: none stated upstream.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pytest_medhelm.catalogue.definition import Benchmark
from pytest_medhelm.data.errors import DataError
from pytest_medhelm.data.readers import data_file, read_text
from pytest_medhelm.data.sources import DataFile
from pytest_medhelm.metrics.jury import jury_metric
from pytest_medhelm.prompting import GenerationPrompt
from pytest_medhelm.values import Instance

SLUG = "mediqa"
FILE = "MEDIQA2019-Task3-QA-TestSet-wLabels.xml"
COMMIT = "ae5d3826d6c841923b9db831159fef0f1b893593"


def build_instances(files: Mapping[str, Path]) -> list[Instance]:
    import xml.etree.ElementTree as ET

    path = data_file(files, FILE)
    text = read_text(path)
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        line, column = exc.position
        raise DataError(path, f"line {line}, column {column + 1}", f"invalid XML ({exc}); is the file truncated?") \
            from None
    questions = root.findall("Question")
    if not questions:
        raise DataError(path, f"<{root.tag}>", "no <Question> element; expected the MEDIQA 2019 Task 3 XML")
    instances = []
    seen: set[str] = set()
    for number, question in enumerate(questions, start=1):
        qid = question.get("QID")
        where = f"<Question QID={qid!r}>" if qid else f"<Question> number {number}"
        if not qid or not qid.strip():
            raise DataError(path, where, "missing attribute 'QID'")
        if qid in seen:
            raise DataError(path, where, "duplicate QID")
        seen.add(qid)
        question_element = question.find("QuestionText")
        question_text = question_element.text if question_element is not None else None
        if question_text is None or not question_text.strip():
            raise DataError(path, where, "missing or empty <QuestionText>")
        answer_list = question.find("AnswerList")
        if answer_list is None:
            raise DataError(path, where, "missing <AnswerList>")
        best = None
        for answer in answer_list.findall("Answer"):
            rank = answer.get("ReferenceRank")
            answer_where = f"{where}, <Answer AID={answer.get('AID')!r}>"
            try:
                rank_value = int(rank) if rank is not None else None
            except ValueError:
                raise DataError(path, answer_where, f"ReferenceRank must be an integer, got {rank!r}") from None
            if rank_value is None:
                raise DataError(path, answer_where, "missing attribute 'ReferenceRank'")
            if rank_value == 1:
                best = answer
                break
        if best is None:
            raise DataError(path, where, "no <Answer> with ReferenceRank=\"1\" (the reference answer)")
        reference = best.findtext("AnswerText") or ""
        if not reference.strip():
            raise DataError(path, f"{where}, <Answer AID={best.get('AID')!r}>", "empty <AnswerText>")
        instances.append(
            Instance(
                id=qid.strip().replace(" ", "_"),
                input=question_text,
                references=(reference,),
                extra={"answer_id": best.get("AID", ""), "answer_url": best.findtext("AnswerURL") or ""},
                benchmark=SLUG,
            )
        )
    return instances


BENCHMARK = Benchmark(
    slug=SLUG,
    name="MEDIQA-QA",
    subcategory="Enhancing Patient Understanding and Accessibility",
    access="public",
    kind="open",
    files=(
        DataFile(
            name=FILE,
            url=f"https://raw.githubusercontent.com/abachaa/MEDIQA2019/{COMMIT}/MEDIQA_Task3_QA/{FILE}",
            sha256="df9bca894d252279f200ee78e85d871b57a94b224d75467b7fa38a4a0952cc1d",
            description="the MEDIQA 2019 Task 3 (QA) test set with labels: 150 <Question>s with ranked answers",
        ),
    ),
    build_instances=build_instances,
    prompt=GenerationPrompt(
        instructions="Answer the following consumer health question.",
        input_noun="Question",
        output_noun="Answer",
    ),
    metric=jury_metric(SLUG),  # the LLM jury; ROUGE and BERTScore are recorded beside it
    max_tokens=1024,
    description="Answer a consumer health question (scored by the LLM jury).",
    example=(
        "<QuestionsAnswers><Question QID=\"1\"><QuestionText>What is synthetic disease "
        "X?</QuestionText><AnswerList><Answer AID=\"1_Answer1\" SystemRank=\"1\" ReferenceRank=\"1\" "
        "ReferenceScore=\"4\"><AnswerURL>https://example.org</AnswerURL><AnswerText>Disease X is a synthetic condition "
        "...</AnswerText></Answer></AnswerList></Question></QuestionsAnswers>"
    ),
    instance_count=150,
)
