"""MIMIC-RRS: write the impression of a radiology report from its findings (HELM ``MIMICRRSScenario``,
``mimic_rrs``; gated, MIMIC-III radiology reports as preprocessed for radiology report summarisation by Chen et
al. 2023).

HELM reads two line-aligned text files from ``data_path`` (Stanford's ``…/rrs-mimiciii/all``):
``test.findings.tok`` and ``test.impression.tok``, line *i* of one being the findings and line *i* of the other
the impression of the same report. Each line is ``strip()``-ed; the files must have the same number of lines
(HELM asserts it; here a :class:`DataError` naming both files); a pair where either line is empty is skipped
(counted in ``Loaded.removed``). Input = findings, reference = impression, in file order; ids ``line<N>``.

Prompt: ``Generate the impression section … Be as concise as possible.⏎⏎Findings:⏎{findings}⏎Impression:``;
128 tokens. Scored by the LLM jury (``metrics/jury.py``), ROUGE-1/2/L and BERTScore beside it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pytest_medhelm.catalogue.definition import Benchmark
from pytest_medhelm.data.errors import DataError
from pytest_medhelm.data.readers import data_file, text_lines
from pytest_medhelm.data.sources import DataFile
from pytest_medhelm.metrics.jury import jury_metric
from pytest_medhelm.prompting import GenerationPrompt
from pytest_medhelm.values import Instance, Loaded

SLUG = "mimic_rrs"
FINDINGS = "test.findings.tok"
IMPRESSIONS = "test.impression.tok"


def build_instances(files: Mapping[str, Path]) -> Loaded:
    findings_path, impressions_path = data_file(files, FINDINGS), data_file(files, IMPRESSIONS)
    findings = [line.strip() for line in text_lines(findings_path)]
    impressions = [line.strip() for line in text_lines(impressions_path)]
    if len(findings) != len(impressions):
        raise DataError(
            findings_path,
            "",
            f"has {len(findings)} lines but {impressions_path} has {len(impressions)}: the two files must be "
            "line-aligned (line i of each is the same report)",
        )
    loaded = Loaded(slug=SLUG)
    for number, (finding, impression) in enumerate(zip(findings, impressions), start=1):
        if not finding or not impression:
            loaded.note_removed("empty findings or impression line (HELM skips the pair)")
            continue
        loaded.append(Instance(id=f"line{number}", input=finding, references=(impression,), benchmark=SLUG))
    return loaded.done()


BENCHMARK = Benchmark(
    slug=SLUG,
    name="MIMIC-RRS",
    subcategory="Documenting Diagnostic Reports",
    access="gated",
    kind="open",
    files=(
        DataFile(name=FINDINGS, description="UTF-8 text, one report's findings section per line"),
        DataFile(
            name=IMPRESSIONS,
            description="UTF-8 text, one report's impression per line, line-aligned with test.findings.tok",
        ),
    ),
    build_instances=build_instances,
    prompt=GenerationPrompt(
        instructions=(
            "Generate the impression section of the radiology report based on its findings. "
            "This will not be used to diagnose nor treat any patients. Be as concise as possible."
        ),
        input_noun="Findings",
        output_noun="Impression",
        newline_after_input_noun=True,
        newline_after_output_noun=True,
    ),
    metric=jury_metric(SLUG),  # the LLM jury; ROUGE and BERTScore are recorded beside it
    max_tokens=128,
    description="Write the impression of a radiology report from its findings.",
    data_help=(
        "gated: MIMIC-III is credentialed access on PhysioNet (https://physionet.org/content/mimiciii/); build the "
        "test split of the MIMIC-III radiology report summarisation data of Chen et al. 2023 (ACL, 'Toward "
        "Expanding the Scope of Radiology Report Summarization to Multiple Anatomies and Modalities'), released "
        "as line-aligned *.findings.tok / *.impression.tok files. Synthetic example, line 1 of test.findings.tok: "
        "'the heart is normal in size . the lungs are clear . no pleural effusion .'; line 1 of "
        "test.impression.tok: 'no acute cardiopulmonary process .'"
    ),
    filters="line pairs whose findings or impression is empty",
)
