"""MMLU clinical, African languages: MMLU's clinical_knowledge, college_medicine and virology questions translated
by people into Afrikaans and isiZulu, answered 5-shot (medhelm 0.8.0 ``MMLU_Clinical_Afr_Scenario``, run spec
``mmlu_clinical_afr(subject, lang)``, outside the fork's ``schema_medhelm.yaml``; data from the Institute for
Disease Modeling's "Bridging the Gap" release, github.com/InstituteforDiseaseModeling/
Bridging-the-Gap-Low-Resource-African-Languages).

**Six runs averaged.** medhelm runs one run per subject and language, ``mmlu_clinical_afr:subject={subject},lang=
{lang},method=multiple_choice_joint`` (run groups ``mmlu_clinical_afr_{subject}`` and
``mmlu_clinical_afr_{subject}_{lang}``). The fork's run spec takes 11 languages (af, zu, xh, am, bm, ig, nso, sn,
st, tn, ts); this benchmark runs the two of issue 31, Afrikaans (``af``) and isiZulu (``zu``), for the three
subjects. Every instance names its run in :attr:`Instance.subset` (``clinical_knowledge_af``, …), so the score is
the mean of the six run means and ``--medhelm-max-instances N`` samples N per run (HELM's per-run cap); its
``extra["helm_run"]`` is medhelm's run name.

**Data.** medhelm downloads ``data/evaluation_benchmarks_afr_release.zip`` from the repository's ``main`` branch (not
pinned) and reads ``mmlu_cm_ck_vir/{subject}_{split}_{lang}.csv`` under the archive's top folder, for the splits
``dev``, ``val`` and ``test``. The same folder is in the repository unzipped, ``data/evaluation_benchmarks_afr_release/
mmlu_cm_ck_vir/``: each file is downloaded from commit ``9af6ce2f5df8171a64d58ced2032761396bfb2ad`` and read as
``DIR/mmlu_clinical_afr/mmlu_cm_ck_vir/<file>`` (the archive's layout: unzip it and put its top folder's contents in
``DIR/mmlu_clinical_afr/``). The nine Afrikaans files carry the sha256 measured at that commit; the isiZulu files'
are not known to this project, so they are not verified (recorded under ``run.data_unverified``).
A CSV without a header line, six fields: the question, options A-D, the correct letter. A row with another number
of fields, or whose letter is not one of A-D, is a :class:`~pytest_medhelm.data.errors.DataError` naming the file
and row (medhelm would show the extra fields as options, or stop on the letter); a missing file is an error naming
it (medhelm skips a missing file with a log line, and its run then has no shots or no instances).

**Instances.** In each run, dev is the train split (the in-context pool, not evaluated), val and test are evaluated,
both, in that order and file order (the leaderboard reports test; a capped run samples both together, as HELM
does). Ids as medhelm numbers them within a run, over dev, val, then test: ``clinical_knowledge_af-id5`` is the
first val question of that run. Options in the row's order; a correct answer is the option's text, so when two
options carry it either letter counts.

**Prompt.** HELM's multiple-choice-joint adapter, instructions ``The following are multiple choice questions (with
answers) about {subject, "_" -> " "} in {Afrikaans|Zulu}.``, nouns ``Question`` / ``Answer``, then five in-context
examples drawn from the run's dev file by HELM's sampler (seed 0,
:func:`~pytest_medhelm.catalogue.sampling.helm_in_context_examples`), the same five before every question of the
run, each ending ``Answer: <letter>`` where the letter is the first option carrying the correct text. One output
token; ``exact_match``. The same prompt in every ``--medhelm-compat`` mode (HELM 0.5.16's run spec is the fork's).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from pytest_medhelm.catalogue.definition import Benchmark
from pytest_medhelm.catalogue.sampling import TooFewExamples, helm_in_context_examples
from pytest_medhelm.data.errors import DataError
from pytest_medhelm.data.readers import data_file, read_csv_rows
from pytest_medhelm.data.sources import DataFile
from pytest_medhelm.metrics.exact_match import MULTIPLE_CHOICE_EXACT_MATCH
from pytest_medhelm.prompting import MultipleChoicePrompt
from pytest_medhelm.values import Instance, Loaded

SLUG = "mmlu_clinical_afr"
#: the run spec's subjects, in its docstring's order
SUBJECTS = ("clinical_knowledge", "college_medicine", "virology")
#: the run spec's ``lang_map``: every language it takes, with the name its instructions use
LANGUAGE_NAMES = {"af": "Afrikaans", "zu": "Zulu", "xh": "Xhosa", "am": "Amharic", "bm": "Bambara", "ig": "Igbo",
                  "nso": "Sepedi", "sn": "Shona", "st": "Sesotho", "tn": "Setswana", "ts": "Tsonga"}
#: the languages this benchmark runs (issue 31: Afrikaans and isiZulu)
LANGUAGES = ("af", "zu")
#: the scenario's files per run: split in the file name -> HELM's split
SPLITS = (("dev", "train"), ("val", "valid"), ("test", "test"))
SHOTS = 5
METHOD = "multiple_choice_joint"
COLUMNS = ("question", "A", "B", "C", "D", "answer")
FOLDER = "mmlu_cm_ck_vir"
COMMIT = "9af6ce2f5df8171a64d58ced2032761396bfb2ad"
BASE_URL = ("https://raw.githubusercontent.com/InstituteforDiseaseModeling/Bridging-the-Gap-Low-Resource-African-"
            f"Languages/{COMMIT}/data/evaluation_benchmarks_afr_release/{FOLDER}/")
#: sha256 of the Afrikaans files at COMMIT (../shared/reference/medhelm-0.8-additions.md §6); isiZulu's: unknown
SHA256 = {
    "clinical_knowledge_dev_af.csv": "8a35596fe25b23942f0f700bd8f67c3b9bf17cf8ce218ff63f7e56d369c442b1",
    "clinical_knowledge_val_af.csv": "86df6bc4c711b4d49d96a63e2f0b272fa8cf0f7d12307221bd691344c9886501",
    "clinical_knowledge_test_af.csv": "c845c3897a2851167e828118049475b2547018db899478ab7eca551e0f0234a2",
    "college_medicine_dev_af.csv": "45f1f42976dc486cbe6eb07720d6c31b1ab897dcbc83fc09239cd30151b968bb",
    "college_medicine_val_af.csv": "cba6cc021c9c0ed4950d202984dca46d5c08de6e62f0114bfec65305d300ce98",
    "college_medicine_test_af.csv": "ca96998088d4d1fa153155c9d22a28cc2e1408664f4ddae7c46f2f904e5dd82b",
    "virology_dev_af.csv": "b3d07bcc08ed90d816250879a1b02290bb167620f25809460a6fa1670e482dcb",
    "virology_val_af.csv": "5bda704c59a69b0cacf0c5c7810ab29871a2d3dcfd7d24c2b4be754028e5c796",
    "virology_test_af.csv": "6a70358dc1aa301f49637c946cffdb9aae9e231a3593dde464334e7b08a50094",
}
#: rows per Afrikaans file at COMMIT: (dev, val, test)
AF_COUNTS = {"clinical_knowledge": (5, 29, 265), "college_medicine": (5, 22, 173), "virology": (5, 18, 166)}


def file_name(subject: str, split: str, lang: str) -> str:
    """The scenario's file name, ``{subject}_{split}_{lang}.csv``."""
    return f"{subject}_{split}_{lang}.csv"


def file_key(subject: str, split: str, lang: str) -> str:
    """The file as :attr:`DataFile.name`: under the archive's ``mmlu_cm_ck_vir/`` folder."""
    return f"{FOLDER}/{file_name(subject, split, lang)}"


def run_name(subject: str, lang: str) -> str:
    """medhelm's run name of one subject and language."""
    return f"{SLUG}:subject={subject},lang={lang},method={METHOD}"


def read_file(path: Path, subject: str, lang: str, first_id: int) -> list[Instance]:
    """One CSV's questions as instances (``correct`` = the row's letter), numbered from ``first_id``."""
    instances: list[Instance] = []
    for row in read_csv_rows(path, columns=COLUMNS):
        options = tuple(row[letter] for letter in "ABCD")
        letter = row["answer"]
        if letter not in ("A", "B", "C", "D"):
            raise DataError(path, row.where, f"the correct letter (6th field) must be one of A, B, C, D, got "
                                             f"{letter!r:.40}")
        instances.append(Instance(id=f"{subject}_{lang}-id{first_id + len(instances)}", input=row["question"],
                                  references=(options["ABCD".index(letter)],), choices=options,
                                  correct="ABCD".index(letter), benchmark=SLUG, subset=f"{subject}_{lang}"))
    return instances


def shown_answer(example: Instance) -> Instance:
    """An in-context example as HELM shows it: its answer is the first option carrying the correct text."""
    assert example.correct is not None
    first = example.choices.index(example.choices[example.correct])
    return example if first == example.correct else replace(example, correct=first)


def build_run(files: Mapping[str, Path], subject: str, lang: str) -> list[Instance]:
    """One run's eval instances (val, then test), each carrying the run's five in-context examples."""
    by_split: dict[str, list[Instance]] = {}
    number = 0
    for split, _helm_split in SPLITS:
        path = data_file(files, file_key(subject, split, lang))
        by_split[split] = read_file(path, subject, lang, number)
        number += len(by_split[split])
    dev_path = data_file(files, file_key(subject, "dev", lang))
    try:
        shots = helm_in_context_examples(by_split["dev"], SHOTS,
                                         lambda i: i.choices[i.correct] if i.correct is not None else None)
    except TooFewExamples as exc:
        raise DataError(dev_path, "", str(exc)) from None
    examples = tuple(shown_answer(shot) for shot in shots)
    return [
        replace(instance, extra={"in_context": examples, "helm_run": run_name(subject, lang), "split": helm_split,
                                 "subject": subject, "lang": lang})
        for split, helm_split in SPLITS[1:]
        for instance in by_split[split]
    ]


def build_instances(files: Mapping[str, Path]) -> Loaded:
    """Every run's instances: subject by subject, each in Afrikaans then isiZulu."""
    loaded = Loaded(slug=SLUG)
    for subject in SUBJECTS:
        for lang in LANGUAGES:
            loaded.extend(build_run(files, subject, lang))
    return loaded.done()


def instructions(subject: str, lang: str) -> str:
    return (f"The following are multiple choice questions (with answers) about {subject.replace('_', ' ')} "
            f"in {LANGUAGE_NAMES[lang]}.")


#: the adapter of each run
RUN_PROMPTS = {(subject, lang): MultipleChoicePrompt(instructions=instructions(subject, lang), input_noun="Question",
                                                     output_noun="Answer")
               for subject in SUBJECTS for lang in LANGUAGE_NAMES}


@dataclass(frozen=True)
class MmluAfrPrompt:
    """medhelm's prompt (a :class:`~pytest_medhelm.prompting.PromptTemplate`): the adapter of the instance's run,
    with the run's in-context examples (``extra["in_context"]``) before the question."""

    def render(self, instance: Instance) -> str:
        prompt = RUN_PROMPTS[instance.extra["subject"], instance.extra["lang"]]
        return prompt.render_with_examples(instance, instance.extra["in_context"])


BENCHMARK = Benchmark(
    slug=SLUG,
    name="MMLU clinical (Afrikaans, isiZulu)",
    # outside medhelm's schema (schema_mmlu_winogrande_afr.yaml gives no category); this subcategory, and so the
    # category, is ours: medical knowledge questions, as MedQA's and MMLU's own place in the paper's taxonomy would be
    subcategory="Providing Clinical Knowledge Support",
    access="public",
    kind="closed",
    files=tuple(
        DataFile(
            name=file_key(subject, split, lang),
            url=BASE_URL + file_name(subject, split, lang),
            sha256=SHA256.get(file_name(subject, split, lang), ""),  # isiZulu's: not known, not verified
            description=(
                f"MMLU {subject.replace('_', ' ')}, {split} split, in {LANGUAGE_NAMES[lang]}: CSV without a header, "
                "question, options A-D, correct letter"
                + (" (the 5-shot pool)" if split == "dev" else "")
            ),
        )
        for subject in SUBJECTS for lang in LANGUAGES for split, _ in SPLITS
    ),
    build_instances=build_instances,
    prompt=MmluAfrPrompt(),
    metric=MULTIPLE_CHOICE_EXACT_MATCH,
    max_tokens=1,
    description=(
        "Answer MMLU's clinical knowledge, college medicine and virology questions in Afrikaans and isiZulu, "
        "5-shot (6 runs averaged; medhelm 0.8.0's run spec outside its schema). Afrikaans at the pinned commit: "
        + ", ".join(f"{subject} {val} + {test}" for subject, (_dev, val, test) in AF_COUNTS.items())
        + " val + test questions."
    ),
    data_help=(
        "the repository's data/evaluation_benchmarks_afr_release.zip (what medhelm downloads) holds the folder "
        f"{FOLDER}/: unzip it and put that folder in DIR/{SLUG}/, or let each file be downloaded from commit "
        f"{COMMIT[:7]}."
    ),
    example="\"Synthetic question: which statement is correct?\",Option A text,Option B text,Option C text,"
            "Option D text,B",
)
