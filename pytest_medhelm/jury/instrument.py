"""The jury's instrument: the judge prompts a run sends, HELM's own or, as a fallback, ours.

MedHELM's jury was validated against clinicians with HELM's judge prompts (ICC 0.47 with clinician ratings). HELM
keeps each open-ended benchmark's prompt as two module constants, ``PROMPT_TEMPLATE`` and ``ANNOTATION_CRITERIA``, in
``src/helm/benchmark/annotation/<scenario>_annotator.py``. Those 13 files are data here, like a benchmark's files:
pinned at HELM v0.5.16 (commit ``ef439fc``) with their sha256, read from ``<--medhelm-data-dir>/helm_jury/`` or
downloaded once into the data cache and verified (:func:`pytest_medhelm.data.sources.resolve_files`). The two
constants are read with :mod:`ast` as literal values: the files are never imported or executed, and their text is
not part of this package.

The prompt is rendered as HELM 0.5.16 renders it (``LLMAsJuryAnnotator._interpolate_prompt``): ``{QUESTION}``,
``{RESPONSE}`` and ``{GOLD_RESPONSE}`` become ``$QUESTION``, ``$RESPONSE``, ``$GOLD_RESPONSE`` and
:meth:`string.Template.substitute` fills them in one pass (a ``{RESPONSE}`` or ``$RESPONSE`` inside the answer is
not expanded). QUESTION is ``instance.input`` (the scenario input only), RESPONSE the completion as the model wrote
it (not stripped), GOLD_RESPONSE ``instance.references[0]`` verbatim. An empty or whitespace-only answer gets no
judge request. Each judge gets the same request: one user message, no system message, temperature 0, 4096 tokens.

A run builds its instrument once with :func:`load_jury_instrument` and passes it to whatever makes judge requests
(no module global). Without the files (offline, no ``--medhelm-data-dir``) the instrument is our own rubric
(:mod:`pytest_medhelm.jury.rubrics`) and the loader returns one warning line saying that the open-ended scores are
then not comparable with MedHELM's. :attr:`JuryInstrument.name` (``helm@ef439fc`` or ``pytest-medhelm@<version>``)
is recorded as ``run.jury_prompts`` in the results, and is part of every judge request's ``purpose`` and so of its
cache key.
"""

from __future__ import annotations

import ast
import functools
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_medhelm.data.sources import DataFile

if TYPE_CHECKING:  # pragma: no cover
    from pytest_medhelm.values import ChatRequest, Instance, ModelSpec


#: HELM's generation settings for a judge (``Request(..., temperature=0.0, max_tokens=4096)``)
JUDGE_MAX_TOKENS = 4096
JUDGE_TEMPERATURE = 0.0

#: HELM v0.5.16, the release the judge prompts are pinned at
HELM_COMMIT = "ef439fc94e58568fd1274d5c07ceb1b711360a55"
HELM_INSTRUMENT = f"helm@{HELM_COMMIT[:7]}"
#: the files live in ``<data dir>/helm_jury/`` like a benchmark's
FOLDER = "helm_jury"
_RAW_URL = "https://raw.githubusercontent.com/stanford-crfm/helm/{commit}/src/helm/benchmark/annotation/{name}"

#: our slug -> HELM's scenario name (its annotator file is ``<scenario>_annotator.py``, its main metric
#: ``<scenario>_accuracy``)
HELM_SCENARIOS: dict[str, str] = {
    "mtsamples": "mtsamples_replicate",
    "mtsamples_procedures": "mtsamples_procedures",
    "aci_bench": "aci_bench",
    "medicationqa": "medication_qa",
    "mediqa": "medi_qa",
    "meddialog": "med_dialog",
    "medalign": "medalign",
    "dischargeme": "dischargeme",
    "mimic_rrs": "mimic_rrs",
    "mimic_bhc": "mimic_bhc",
    "noteextract": "chw_care_plan",
    "patientinstruct": "starr_patient_instructions",
    "mentalhealth": "mental_health",
}

#: sha256 of each annotator file at HELM_COMMIT
_SHA256: dict[str, str] = {
    "aci_bench_annotator.py": "680cd7a9b8e3ff76efd3e0130ab16ee09bebb2a391139964629831b570041920",
    "chw_care_plan_annotator.py": "47a1dec61db44fa581051061c0b850bff210bd6ed9e793dff48601096c544da4",
    "dischargeme_annotator.py": "6e53fbe8183099b1c30c345d69a1b0b531dfba40af5d72cdef6be31a3fcb23f5",
    "med_dialog_annotator.py": "b86a7c77be161a038e89ec69a0a8f908c76be633af0277def992ca1921d3ea78",
    "medalign_annotator.py": "82500fa557487de6e6dfd1a1ac1637044da17687d50480575313d4dffaaa64ec",
    "medi_qa_annotator.py": "6cb5f15defa86cfbee775e6c3ebaa9f62fb04aad50aa0b823edfd425a5d1cff2",
    "medication_qa_annotator.py": "f7c5d4d95552a10f1794092e54a5a7341392efa5ff948be2abf03e9f2ae5a9cc",
    "mental_health_annotator.py": "d3c6ff5ea81f4a9221bad0d469a4a0551762641ea67ad01043f58717c536f9cd",
    "mimic_bhc_annotator.py": "6bd007305636b21578236a9551f2a73af6456e64232f9bcf2ac6f2b5305f5340",
    "mimic_rrs_annotator.py": "7aef6b6614405d56e8d23ec13fbbee00ac0692ec214c2bd546f27874f6dc4782",
    "mtsamples_procedures_annotator.py": "660255b4da5a6f706b32cd195c55ba2f408da751dca9f82fec51cfe2ba7114f8",
    "mtsamples_replicate_annotator.py": "56d1e21061592d4b1ddf39209d2a2d8b98ad6670cf80444c3d994e464129ee89",
    "starr_patient_instructions_annotator.py": "4def6b42171457e4f6238a01081cc89c0656eb9115de5bf42d72cf806ccb77c7",
}


def annotator_file(slug: str) -> str:
    """HELM's annotator file of an open-ended benchmark: ``aci_bench`` -> ``aci_bench_annotator.py``."""
    return f"{HELM_SCENARIOS[slug]}_annotator.py"


@dataclass(frozen=True)
class HelmJuryFiles:
    """HELM's 13 annotator files as a set of pinned data files (``<data dir>/helm_jury/<file>``)."""

    slug: str = FOLDER
    files: tuple[DataFile, ...] = tuple(
        DataFile(name=name, url=_RAW_URL.format(commit=HELM_COMMIT, name=name), sha256=sha,
                 description="HELM v0.5.16's judge prompt module (PROMPT_TEMPLATE, ANNOTATION_CRITERIA)")
        for name, sha in sorted(_SHA256.items()))
    data_help: str = ("the 13 files of src/helm/benchmark/annotation/ named above, from HELM's repository at that "
                      "commit (Apache-2.0)")


HELM_JURY_FILES = HelmJuryFiles()


class InstrumentError(ValueError):
    """An annotator file that does not hold what HELM's holds (names the file and what was expected)."""


def read_helm_constants(path: Path) -> tuple[str, dict[str, frozenset[str]]]:
    """(PROMPT_TEMPLATE, ANNOTATION_CRITERIA) of an annotator file, read as literals with :mod:`ast` (never run)."""
    try:
        tree = ast.parse(Path(path).read_bytes(), filename=str(path))
    except (OSError, SyntaxError, ValueError) as exc:
        raise InstrumentError(f"{path}: cannot be read as a Python module ({exc})") from None
    values: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id in ("PROMPT_TEMPLATE", "ANNOTATION_CRITERIA"):
            try:
                values[target.id] = ast.literal_eval(value)
            except ValueError:
                raise InstrumentError(f"{path}: {target.id} is not a literal value") from None
    template = values.get("PROMPT_TEMPLATE")
    criteria = values.get("ANNOTATION_CRITERIA")
    if not isinstance(template, str):
        raise InstrumentError(f"{path}: no module-level string PROMPT_TEMPLATE")
    if not (isinstance(criteria, dict) and criteria
            and all(isinstance(k, str) and isinstance(v, (set, frozenset)) for k, v in criteria.items())):
        raise InstrumentError(f"{path}: ANNOTATION_CRITERIA is not a dict of criterion -> set of sub-keys")
    return template, {key: frozenset(sub) for key, sub in criteria.items()}


def render_helm(template: str, question: str, response: str, gold: str) -> str:
    """HELM 0.5.16's ``_interpolate_prompt``: ``{X}`` -> ``$X``, then one :meth:`string.Template.substitute`."""
    dollar = (template.replace("{QUESTION}", "$QUESTION").replace("{RESPONSE}", "$RESPONSE")
              .replace("{GOLD_RESPONSE}", "$GOLD_RESPONSE"))
    return string.Template(dollar).substitute(QUESTION=question, RESPONSE=response, GOLD_RESPONSE=gold)


@dataclass(frozen=True)
class JudgePrompt:
    """One benchmark's judge prompt under an instrument."""

    slug: str
    template: str
    criteria: tuple[str, ...]
    #: ``judge:<slug>:<instrument or rubric version>``, part of each judge request's cache key
    purpose: str
    helm: bool

    def render(self, question: str, response: str, gold: str) -> str:
        if self.helm:
            return render_helm(self.template, question, response, gold)
        from pytest_medhelm.jury.rubrics import RUBRICS

        return RUBRICS[self.slug].render(question, response, gold)


@dataclass(frozen=True)
class JuryInstrument:
    """The judge prompts of a run. Build it once (:func:`load_jury_instrument`) and pass it along."""

    #: ``helm@ef439fc`` or ``pytest-medhelm@<version>`` (``run.jury_prompts`` in the results)
    name: str
    prompts: Mapping[str, JudgePrompt]

    @property
    def is_helm(self) -> bool:
        return self.name == HELM_INSTRUMENT

    def prompt_for(self, slug: str) -> JudgePrompt | None:
        return self.prompts.get(slug)

    def criteria(self, slug: str) -> tuple[str, ...]:
        """The criteria the judges grade (HELM's ``ANNOTATION_CRITERIA`` keys, in its order)."""
        prompt = self.prompts.get(slug)
        if prompt is None:
            raise ValueError(f"{slug!r} has no judge prompt (not an open-ended benchmark)")
        return prompt.criteria

    def judge_prompt(self, slug: str, instance: Instance, answer_text: str) -> str | None:
        """The text every judge gets for ``answer_text``; None for an empty answer or a closed benchmark."""
        if not answer_text.strip():
            return None
        return self._render(slug, instance, answer_text)

    def judge_prompt_without_answer(self, slug: str, instance: Instance) -> str | None:
        """The judges' prompt for ``instance`` with the answer left out (what a dry run counts, adding the answer
        at its longest); None for a closed benchmark."""
        return self._render(slug, instance, "")

    def _render(self, slug: str, instance: Instance, answer_text: str) -> str | None:
        prompt = self.prompts.get(slug)
        if prompt is None:
            return None
        return prompt.render(instance.input, answer_text, instance.references[0] if instance.references else "")

    def judge_requests(self, slug: str, instance: Instance, answer_text: str,
                       judges: Sequence[ModelSpec]) -> list[tuple[str, ChatRequest]]:
        """(judge name, request) per judge, all with the same prompt; none for an empty answer (HELM sends none)."""
        from pytest_medhelm.jury import llama_judges
        from pytest_medhelm.values import ChatRequest

        text = self.judge_prompt(slug, instance, answer_text)
        if text is None:
            return []
        purpose = self.prompts[slug].purpose
        criteria = self.criteria(slug)
        requests = []
        for judge in judges:
            if llama_judges.constrained(judge.name):  # a llama.cpp server we start: the schema, a small max_tokens
                request = ChatRequest.for_prompt(judge, text, llama_judges.max_tokens_for(criteria),
                                                 temperature=JUDGE_TEMPERATURE, purpose=purpose,
                                                 response_format=llama_judges.response_format(criteria))
            else:  # HELM's request: the same prompt for every judge
                request = ChatRequest.for_prompt(judge, text, JUDGE_MAX_TOKENS, temperature=JUDGE_TEMPERATURE,
                                                 purpose=purpose)
            requests.append((judge.name, request))
        return requests


def prompt_sha256(request: ChatRequest) -> str:
    """sha256 of a request's prompt text (UTF-8), as ``prompt_sha256`` and ``judge_prompt_sha256`` record it."""
    import hashlib  # (not at module level: this module is imported at pytest start, OpenSSL costs milliseconds)

    return hashlib.sha256(request.prompt_text.encode("utf-8")).hexdigest()


def own_rubric_instrument() -> JuryInstrument:
    """Our own rubric (:mod:`pytest_medhelm.jury.rubrics`): the fallback, not MedHELM's validated instrument."""
    from pytest_medhelm import __version__
    from pytest_medhelm.jury.rubrics import RUBRICS

    return JuryInstrument(
        name=f"pytest-medhelm@{__version__}",
        prompts={slug: JudgePrompt(slug=slug, template=r.template, criteria=r.criteria, purpose=r.purpose,
                                   helm=False) for slug, r in RUBRICS.items()})


def helm_instrument(paths: Mapping[str, Path]) -> JuryInstrument:
    """HELM's instrument from its annotator files (file name -> path); each file's sha256 must be the pinned one."""
    from pytest_medhelm.data.sources import sha256_of

    prompts = {}
    for slug in HELM_SCENARIOS:
        name = annotator_file(slug)
        path = paths.get(name)
        if path is None:
            raise InstrumentError(f"{name}: not found")
        actual = sha256_of(Path(path))
        if actual != _SHA256[name]:
            raise InstrumentError(f"{path} has sha256 {actual}, expected HELM v0.5.16's {_SHA256[name]}")
        template, criteria = read_helm_constants(path)
        prompts[slug] = JudgePrompt(slug=slug, template=template, criteria=tuple(criteria),
                                    purpose=f"judge:{slug}:{HELM_INSTRUMENT}", helm=True)
    return JuryInstrument(name=HELM_INSTRUMENT, prompts=prompts)


def not_comparable_warning(reason: str) -> str:
    return (f"pytest-medhelm: HELM's judge prompts are not available ({reason}); the jury uses pytest-medhelm's own "
            "rubric, so the open-ended scores are not comparable with MedHELM's")


def load_jury_instrument(data_dir: Path | None, download_allowed: bool = True) -> tuple[JuryInstrument, str | None]:
    """(instrument, warning line or None): HELM's prompts from ``<data_dir>/helm_jury/``, else from the data cache
    (downloaded once when ``download_allowed``), else our own rubric with a warning saying what was missing."""
    from pytest_medhelm.data.errors import DataMissing
    from pytest_medhelm.data.sources import resolve_files

    try:
        return helm_instrument(resolve_files(HELM_JURY_FILES, data_dir, download=download_allowed)), None
    except (DataMissing, InstrumentError, OSError) as exc:
        reason = "; ".join(str(exc).split("; ")[:2]) if isinstance(exc, DataMissing) else str(exc)
        return own_rubric_instrument(), not_comparable_warning(reason)


@functools.lru_cache(maxsize=1)
def default_instrument() -> JuryInstrument:
    """Our own rubric (a constant, built once): what :func:`pytest_medhelm.jury.judge_requests` and
    :func:`pytest_medhelm.jury.jury_score` use when no instrument is passed."""
    return own_rubric_instrument()
