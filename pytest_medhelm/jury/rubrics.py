"""Our own judge prompts: one rubric per open-ended MedHELM benchmark, the jury's fallback
instrument when HELM's judge prompts cannot be had (:mod:`pytest_medhelm.jury.instrument`; a run scored with them
says its open-ended scores are not comparable with MedHELM's).

The text is our own; what follows HELM is its structure, so that the jury measures the same thing:

* the axes: accuracy, completeness, clarity, except NoteExtract, whose second axis is *structure* (does the answer
  contain every part of the required format) and which has no gold answer;
* the tag that wraps the material the answer was written from, per benchmark (``<conversation>``,
  ``<patient_information>``, ``<user_request>``, ...), then ``<response>`` and, where there is one,
  ``<gold_response>``;
* a 1-5 scale (1 very poor, 5 excellent), a score and an explanation per criterion, and a reply that is one JSON
  object ``{"<criterion>": {"score": …, "explanation": …}, …}`` and nothing else.

Placeholders: ``{QUESTION}`` is ``instance.input`` (the scenario input only, never the adapter's instructions: what
HELM's judges see), ``{RESPONSE}`` the model's answer, ``{GOLD_RESPONSE}`` ``instance.references[0]``. They are
replaced in one pass, so an answer that happens to contain ``{GOLD_RESPONSE}`` is not expanded.

Changing the text of a rubric must bump its :attr:`Rubric.version`: the version is part of every judge request
(``ChatRequest.purpose = "judge:<slug>:<version>"``) and so of its cache key, and it is recorded with the scores.
(The prompt text is in the cache key too, so a forgotten bump never serves a stale judgement; the version is what
a person reads.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: the placeholders of a template
_PLACEHOLDER = re.compile(r"\{(QUESTION|RESPONSE|GOLD_RESPONSE)\}")

SCALE = "1 = very poor, 2 = poor, 3 = acceptable, 4 = good, 5 = excellent"


@dataclass(frozen=True)
class Rubric:
    slug: str
    #: bump when the text changes (goes into the judge request's purpose, and so into its cache key)
    version: str
    criteria: tuple[str, ...]
    #: False for NoteExtract: the judges grade without a reference answer
    has_gold: bool
    template: str

    @property
    def purpose(self) -> str:
        return f"judge:{self.slug}:{self.version}"

    def render(self, question: str, response: str, gold: str = "") -> str:
        values = {"QUESTION": question, "RESPONSE": response, "GOLD_RESPONSE": gold}
        return _PLACEHOLDER.sub(lambda m: values[m.group(1)], self.template)


@dataclass(frozen=True)
class _Spec:
    task: str  # "a clinical note written from a doctor-patient conversation"
    input_tag: str
    input_label: str
    criteria: tuple[tuple[str, str], ...]
    gold_label: str | None = (
        "A reference response written by a clinician (one good answer; a response that is correct and complete "
        "in other words deserves the same marks)"
    )


def _json_example(criteria: tuple[str, ...]) -> str:
    lines = [f'  "{name}": {{"score": <integer from 1 to 5>, "explanation": "<why this score>"}}' for name in criteria]
    return "{\n" + ",\n".join(lines) + "\n}"


def _template(spec: _Spec) -> str:
    names = tuple(name for name, _ in spec.criteria)
    parts = [
        f"You are an experienced physician reviewing {spec.task}. Grade the response below.",
        "",
        f"{spec.input_label}:",
        f"<{spec.input_tag}>",
        "{QUESTION}",
        f"</{spec.input_tag}>",
        "",
        "The response to grade:",
        "<response>",
        "{RESPONSE}",
        "</response>",
    ]
    if spec.gold_label is not None:
        parts += ["", f"{spec.gold_label}:", "<gold_response>", "{GOLD_RESPONSE}", "</gold_response>"]
    parts += [
        "",
        f"Rate the response on each of these {len(names)} criteria, on a scale from 1 to 5 ({SCALE}):",
    ]
    parts += [f"- {name}: {text}" for name, text in spec.criteria]
    parts += [
        "",
        "For each criterion give an integer score from 1 to 5 and a short explanation (one or two sentences) of "
        "the reason for it.",
        "Reply with a single valid JSON object and nothing else: no text before or after it and no code fence. "
        "Use exactly these keys:",
        _json_example(names),
    ]
    return "\n".join(parts) + "\n"


_SPECS: dict[str, _Spec] = {
    "mtsamples": _Spec(
        task="a treatment plan written from a patient's medical report",
        input_tag="patient_information",
        input_label="The patient's medical report the plan was written from",
        criteria=(
            ("accuracy", "Are the diagnoses, treatments and recommendations medically sound and consistent with "
                         "the patient information? Penalise errors and claims the information does not support."),
            ("completeness", "Does the plan cover the clinically important elements (treatment, tests, referrals, "
                             "follow-up) that the gold response contains or the patient's situation calls for?"),
            ("clarity", "Is the plan clearly worded, well organised and directly usable by a clinician?"),
        ),
    ),
    "mtsamples_procedures": _Spec(
        task="the plan or summary section written from a procedure report",
        input_tag="user_request",
        input_label="The procedure report the response was written from",
        criteria=(
            ("accuracy", "Is the content medically correct and supported by the procedure report, with nothing "
                         "invented or contradicted?"),
            ("completeness", "Does it include the key post-procedure plan or findings that the gold response "
                             "includes?"),
            ("clarity", "Is it clear, concise and easy for a clinician to act on?"),
        ),
    ),
    "aci_bench": _Spec(
        task="a clinical note written from a doctor-patient conversation",
        input_tag="conversation",
        input_label="The doctor-patient conversation the note was written from",
        criteria=(
            ("accuracy", "Is every clinical fact in the note (history, examination, results, assessment, plan) "
                         "supported by the conversation, with nothing invented or contradicted?"),
            ("completeness", "Does the note capture the clinically relevant information of the conversation, as a "
                             "note like the gold response does?"),
            ("clarity", "Is the note clearly written, organised in the expected sections and easy for a clinician "
                        "to read?"),
        ),
    ),
    "medicationqa": _Spec(
        task="an answer to a consumer's question about a medication",
        input_tag="medication_question",
        input_label="The consumer's question about a medication",
        criteria=(
            ("accuracy", "Is the drug information (uses, dosing, interactions, side effects, precautions) correct "
                         "and consistent with current medical knowledge?"),
            ("completeness", "Does the answer address every part of the question and give the key facts that the "
                             "gold response gives?"),
            ("clarity", "Can a patient without medical training understand the answer and act on it?"),
        ),
    ),
    "mediqa": _Spec(
        task="an answer to a consumer's health question",
        input_tag="question",
        input_label="The consumer's health question",
        criteria=(
            ("accuracy", "Is the medical information correct, evidence-based and free of unsafe advice?"),
            ("completeness", "Does the answer address all parts of the question and cover the important points of "
                             "the gold response?"),
            ("clarity", "Is it written in plain language a consumer can follow, without unexplained jargon?"),
        ),
    ),
    "meddialog": _Spec(
        task="a summary of a patient-doctor conversation",
        input_tag="conversation",
        input_label="The patient-doctor conversation that was summarised",
        criteria=(
            ("accuracy", "Does the summary state the patient's problem and the doctor's advice correctly, with "
                         "nothing invented?"),
            ("completeness", "Does it capture the main medical issue and the key advice, as the gold summary "
                             "does?"),
            ("clarity", "Is the summary concise, clear and easy to read?"),
        ),
    ),
    "medalign": _Spec(
        task="a response to a clinician's request about a patient's electronic health record (EHR)",
        input_tag="user_request",
        input_label="The clinician's request, with the patient's EHR",
        criteria=(
            ("accuracy", "Is the response correct according to the EHR, with no invented or misread patient "
                         "data?"),
            ("completeness", "Does it give all the information the request asks for, as the gold response does?"),
            ("clarity", "Is it clear, precise and easy for a clinician to use?"),
        ),
    ),
    "dischargeme": _Spec(
        task="a section of a discharge document (brief hospital course or discharge instructions) written from "
             "a discharge note and a radiology report",
        input_tag="patient_information",
        input_label="The patient's discharge note and radiology report",
        criteria=(
            ("accuracy", "Are the events, diagnoses, treatments and instructions correct and supported by the "
                         "patient information?"),
            ("completeness", "Does it include the important elements of the stay or of the instructions that the "
                             "gold response includes?"),
            ("clarity", "Is it clear and well organised for its reader (clinicians for a hospital course, the "
                        "patient for discharge instructions)?"),
        ),
    ),
    "mimic_rrs": _Spec(
        task="the impression section of a radiology report, written from the report's findings",
        input_tag="user_request",
        input_label="The findings of the radiology report",
        criteria=(
            ("accuracy", "Does the impression interpret the findings correctly, without adding findings that are "
                         "not in the report?"),
            ("completeness", "Does it mention the clinically significant findings that a correct impression "
                             "mentions?"),
            ("clarity", "Is it concise, unambiguous and worded as radiologists word an impression?"),
        ),
        gold_label="Possible correct impressions (a response can be right without matching them word for word)",
    ),
    "mimic_bhc": _Spec(
        task="a brief hospital course summarising a patient's clinical note",
        input_tag="user_request",
        input_label="The clinical note to summarise",
        criteria=(
            ("accuracy", "Are the diagnoses, treatments and course of the stay summarised correctly and supported "
                         "by the note?"),
            ("completeness", "Does it cover the key events of the hospital stay that a correct summary covers?"),
            ("clarity", "Is it clear, in a sensible order and easy for a clinician to read?"),
        ),
        gold_label="One possible correct response (others, worded differently, can be as good)",
    ),
    "noteextract": _Spec(
        task="an extraction of a free-text clinical note into a required format",
        input_tag="user_request",
        input_label="The request: extraction instructions, the required format and the clinical note",
        criteria=(
            ("accuracy", "Is every extracted item stated in the note, with nothing invented or inferred, and does "
                         "the response say \"Not mentioned\" where the note is silent?"),
            ("structure", "Does the response contain all the parts of the required format (the chief complaint and "
                          "each history-of-present-illness field), laid out as requested?"),
            ("clarity", "Is the response clear, concise and easy to read?"),
        ),
        gold_label=None,
    ),
    "patientinstruct": _Spec(
        task="post-procedure instructions for a patient, written from the case details",
        input_tag="case_details",
        input_label="The case details (diagnosis, procedure, history and physical, operative report)",
        criteria=(
            ("accuracy", "Are the instructions medically correct and consistent with the case (procedure, "
                         "diagnosis, medications)?"),
            ("completeness", "Do they cover what the patient needs (care of the site, medications, activity, warning "
                             "signs, follow-up), as the gold instructions do?"),
            ("clarity", "Can the patient understand and follow them?"),
        ),
    ),
    "mentalhealth": _Spec(
        task="a counselor's reply in a mental-health counseling conversation",
        input_tag="conversation",
        input_label="The counseling conversation so far",
        criteria=(
            ("accuracy", "Does the reply use an appropriate, safe, evidence-based therapeutic technique for what "
                         "the client said?"),
            ("completeness", "Does it address the client's main concerns and feelings, as the gold counselor reply "
                             "does?"),
            ("clarity", "Is it empathetic, warm and clearly worded for the client?"),
        ),
    ),
}

#: bump a slug's entry when its rubric text changes
_VERSIONS: dict[str, str] = dict.fromkeys(_SPECS, "1")

RUBRICS: dict[str, Rubric] = {
    slug: Rubric(slug=slug, version=_VERSIONS[slug], criteria=tuple(name for name, _ in spec.criteria),
                 has_gold=spec.gold_label is not None, template=_template(spec))
    for slug, spec in _SPECS.items()
}


def rubric_for(slug: str) -> Rubric | None:
    """The rubric of an open-ended benchmark, ``None`` for any other slug."""
    return RUBRICS.get(slug)
