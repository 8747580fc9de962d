"""SCT-Bench: Script Concordance Tests: how a new finding changes the likelihood of a diagnostic or management
hypothesis, rated -2 … +2 and scored against an expert panel's answers (medhelm 0.8.0 ``SCTBenchScenario``,
run spec ``sct_bench(reason=False, few_shot=False)``; data from github.com/SCT-Bench/sctpublic, MIT).

**Data.** ``sct_cleaned_full.csv`` at the SCT-Bench commit medhelm pins (``c2843137``); its sha256 is not known to
this project, so the download is not verified (recorded as such under ``run.data_unverified``).
Read as medhelm reads it
(``csv.DictReader`` over a file opened with ``errors="ignore"``: bytes that are not UTF-8 vanish; universal
newlines). Columns used: ``question_id``, ``sct_stem``, ``question``, ``additional_info`` and the panel columns
``-2``, ``-1``, ``0``, ``1``, ``2`` (how many experts chose each rating).

**Template.** The script-concordance template (guideline, the five worked examples, the test case) is pinned data,
never copied into this package: the string constants of medhelm's ``sct_bench_scenario.py`` at its commit
``1becdd64`` (sha256-verified), read with :mod:`ast` from ``DIR/medhelm08_templates/`` or downloaded once into the
data cache. The prompt is built as medhelm builds it: the guideline (without " and a brief explanation for your
choice" unless ``reason``), then with ``few_shot`` the literal ``## Examples with Response Labels`` (no line break
after it) and the five examples -2 … +2, then the test case with ``{{ scenario }}``, ``{{ hypothesis }}`` and
``{{ additional information }}`` replaced by the row's values verbatim; the generation adapter adds ``"\\n"``.

**Variants** (``--medhelm-benchmark-args sct_bench:reason=true,few_shot=true``, ini ``medhelm_benchmark_args``):
``reason`` and ``few_shot``, false by default, as the run spec's. By default a value must be ``true`` or ``false``
(``1``/``0``, ``yes``/``no``); under ``--medhelm-compat helm`` or ``medhelm`` (for this benchmark both mean medhelm
0.8.0) a value is read as medhelm's run entries read it, a string: any non-empty value, ``reason=False`` included,
switches the option on. Each instance records medhelm's run name (``sct_bench:reason=True``) as ``helm_run``.

**Instances.** One per row; rows with an empty ``sct_stem``, ``question`` or ``additional_info`` are skipped (as
medhelm) and counted. Id = ``question_id`` (must be unique and non-empty here). Reference = the rating the panel
chose most (first maximum in the order -2 … +2; an all-zero panel gives ``-2``, as medhelm). A panel cell that is
not a non-negative number is a :class:`~pytest_medhelm.data.errors.DataError` naming the file, row and column.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pytest_medhelm.catalogue.definition import Benchmark
from pytest_medhelm.compat import reproduces_helm
from pytest_medhelm.data.errors import DataError
from pytest_medhelm.data.readers import data_file, read_csv_rows, read_python_strings
from pytest_medhelm.data.sources import DataFile
from pytest_medhelm.metrics.sct import PANEL_LABELS, SCT_SCORE
from pytest_medhelm.prompting import GenerationPrompt, fill_once
from pytest_medhelm.values import Instance, Loaded

SLUG = "sct_bench"
FILE = "sct_cleaned_full.csv"
SCT_COMMIT = "c2843137b36218eac3f47e76eaa559c9fe7973e9"
#: medhelm's scenario module, the template's pinned source
TEMPLATE_FILE = "sct_bench_scenario.py"
TEMPLATE_FOLDER = "medhelm08_templates"
MEDHELM_COMMIT = "1becdd64a28da8572b4a0adfe3f7f0104cb7900d"
TEMPLATE_SHA256 = "f3184b1d4f498832760d4aeef4a3a14602fa4042af375032c5ac0f9f2a4957d3"
#: the template's constants in medhelm's module: the guideline, the test case, the examples in rating order
GUIDELINE, TESTCASE = "GUIDELINE_TEMPLATE", "TESTCASE_TEMPLATE"
EXAMPLES = ("EXAMPLE_NEG2", "EXAMPLE_NEG1", "EXAMPLE_0", "EXAMPLE_POS1", "EXAMPLE_POS2")
#: the panel's columns in the file, in rating order -2 … +2
PANEL_COLUMNS = ("-2", "-1", "0", "1", "2")
TEXT_COLUMNS = ("sct_stem", "question", "additional_info")
SKIPPED = "a row with an empty sct_stem, question or additional_info (medhelm skips these rows)"
#: what medhelm removes from the guideline when the model is not asked for its reasons
REASON_PHRASE = " and a brief explanation for your choice"
EXAMPLES_HEADING = "## Examples with Response Labels"

_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


@dataclass(frozen=True)
class SctVariant:
    """Which of medhelm's SCT-Bench prompts: ask for a reason, show the five worked examples."""

    reason: bool = False
    few_shot: bool = False

    @property
    def helm_run(self) -> str:
        """medhelm's run name for this variant (``sct_bench``, ``sct_bench:reason=True,few_shot=True``)."""
        parts = [name + "=True" for name, on in (("reason", self.reason), ("few_shot", self.few_shot)) if on]
        return SLUG + (":" + ",".join(parts) if parts else "")


# medhelm's default run: no reason asked, no worked examples (frozen, so one shared default is safe)
DEFAULT_VARIANT = SctVariant()


def read_arguments(given: tuple[tuple[str, str], ...], compat: str) -> SctVariant:
    """The variant from ``--medhelm-benchmark-args sct_bench:…`` pairs (the last value of a name wins)."""
    values = dict(given)
    unknown = sorted(set(values) - {"reason", "few_shot"})
    if unknown:
        raise ValueError(f"sct_bench takes the arguments reason and few_shot, not {', '.join(unknown)}")
    medhelm = reproduces_helm(compat)  # for a benchmark only medhelm has, helm means medhelm

    def flag(name: str) -> bool:
        text = values.get(name, "")
        if medhelm:  # medhelm's run entries pass the text: any non-empty value is true ("False" too)
            return text != ""
        if text.strip().lower() in _TRUE:
            return True
        if text.strip().lower() in _FALSE + ("",):
            return False
        raise ValueError(f"sct_bench:{name}={text!r}: expected true or false")

    return SctVariant(reason=flag("reason"), few_shot=flag("few_shot"))


def template(constants: Mapping[str, str], variant: SctVariant) -> str:
    """medhelm's prompt template for ``variant``, from its module's constants."""
    guideline = constants[GUIDELINE]
    if not variant.reason:
        guideline = guideline.replace(REASON_PHRASE, "")
    shots = EXAMPLES_HEADING + "".join(constants[name] for name in EXAMPLES) if variant.few_shot else ""
    return guideline + shots + constants[TESTCASE]


def _panel(path: Path, row, column: str) -> float:
    text = row[column]
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise DataError(path, row.where, f"panel column {column!r} must be a non-negative number, got {text!r}")
    return value


def build_instances(files: Mapping[str, Path], arguments: SctVariant = DEFAULT_VARIANT) -> Loaded:
    path = data_file(files, FILE)
    constants = read_python_strings(data_file(files, TEMPLATE_FILE), (GUIDELINE, TESTCASE, *EXAMPLES))
    text = template(constants, arguments)
    rows = read_csv_rows(path, ("question_id", *TEXT_COLUMNS, *PANEL_COLUMNS), drop_undecodable=True)
    loaded = Loaded(slug=SLUG)
    seen: set[str] = set()
    for row in rows:
        if not all(row[column] for column in TEXT_COLUMNS):
            loaded.note_removed(SKIPPED)
            continue
        question_id = row["question_id"]
        if not question_id.strip() or question_id in seen:
            raise DataError(path, row.where, f"'question_id' must be unique and non-empty, got {question_id!r}")
        seen.add(question_id)
        panel = tuple(_panel(path, row, column) for column in PANEL_COLUMNS)
        prompt = fill_once(text, {"{{ scenario }}": row["sct_stem"], "{{ hypothesis }}": row["question"],
                                  "{{ additional information }}": row["additional_info"]})
        loaded.append(
            Instance(
                id=question_id,
                input=prompt,
                references=(PANEL_LABELS[panel.index(max(panel))],),
                extra={"expert_distribution": panel, "helm_run": arguments.helm_run},
                benchmark=SLUG,
            )
        )
    return loaded.done()


BENCHMARK = Benchmark(
    slug=SLUG,
    name="SCT-Bench",
    # medhelm 0.8.0 gives a category only; this subcategory of it is ours: how a finding changes a diagnostic hypothesis
    subcategory="Supporting Diagnostic Decisions",
    access="public",
    kind="closed",
    files=(
        DataFile(
            name=FILE,
            url=f"https://raw.githubusercontent.com/SCT-Bench/sctpublic/{SCT_COMMIT}/data/{FILE}",
            sha256="",  # not known to this project: the download is not verified
            description=(
                "SCT-Bench's public Script Concordance Tests (MIT licence): CSV with the columns question_id, "
                "sct_stem, question, additional_info and the expert panel's counts -2, -1, 0, 1, 2"
            ),
        ),
        DataFile(
            name=TEMPLATE_FILE,
            folder=TEMPLATE_FOLDER,
            url=(f"https://raw.githubusercontent.com/Pacific-AI-Corp/medhelm/{MEDHELM_COMMIT}/src/helm/benchmark/"
                 f"scenarios/{TEMPLATE_FILE}"),
            sha256=TEMPLATE_SHA256,
            description=(
                "medhelm 0.8.0's SCT-Bench scenario module (Apache-2.0), the pinned source of the script-concordance "
                "template: its string constants are read, the file is never imported"
            ),
        ),
    ),
    build_instances=build_instances,
    prompt=GenerationPrompt(),
    metric=SCT_SCORE,
    max_tokens=200,
    description="Rate how a new finding changes a clinical hypothesis (-2 … +2), scored against an expert panel.",
    example=(
        "question_id,sct_stem,question,additional_info,-2,-1,0,1,2 / q1,\"A synthetic 34-year-old has two days of "
        "fever and a productive cough.\",If you were thinking of:   Community-acquired pneumonia,And then you find: "
        "Crackles at the right base,0,0,1,4,10"
    ),
    filters=SKIPPED,
    arguments=(
        ("reason", "ask for a brief explanation after the rating (true/false; default false)"),
        ("few_shot", "show the five worked examples, one per rating (true/false; default false)"),
    ),
    read_arguments=read_arguments,
)
