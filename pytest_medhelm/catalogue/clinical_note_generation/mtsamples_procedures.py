"""MTSamples Procedures: write a plan from a transcribed procedure / operative report (HELM
``MTSamplesProceduresScenario``, ``mtsamples_procedures``).

**Source.** The folder ``mtsample_procedure/`` of ``raulista1997/benchmarkdata``: 429 plain-text reports. HELM
downloads the files at commit ``c4c25244…`` but takes the *list* of files from the GitHub contents API on the
default branch, unpinned; that folder is identical at the branch head checked (``52ba5528…``). Put the folder at
``<--medhelm-data-dir>/mtsamples_procedures/mtsample_procedure/``; it is never downloaded by the plugin.

**Instances.** The same rules as :mod:`~pytest_medhelm.catalogue.clinical_decision_support.mtsamples` (reference
= the rest of the line after ``PLAN:``, else ``SUMMARY:``, else ``FINDINGS:``; markers looked for
case-insensitively and cut case-sensitively), except the input: the note is cut successively
at ``PLAN:``, ``SUMMARY:`` and ``FINDINGS:``, so no reference line stays in the input here.

**Order and count.** The listing order is assumed to be git tree order (names sorted by UTF-8 bytes); with 429
files the contents API's 1,000-entry limit does not apply. On the pinned data:

===============================================  =====
files in the folder                                 429
no PLAN:/SUMMARY:/FINDINGS: anywhere                298
a marker, but nothing after it on its line            0
marker only in another case (HELM's IndexError)       0
**instances**                                     **131**
===============================================  =====

**HELM gets 128, not 131.** HELM builds each file's download URL from its name without quoting it; seven names
contain ``#`` (``Dental Surgery Sample Report #2.txt`` …), which the URL takes as the start of a fragment, so those
downloads fail and HELM skips the files (observed with crfm-helm 0.5.16). Three of them have a reference section.
By default the plugin reads all seven (its files are local); ``--medhelm-compat helm`` drops them as HELM does
(``Benchmark.build_instances_helm``, counted under ``url_fragment``).

The reference comes from FINDINGS for 98 instances, PLAN for 27 and SUMMARY for 6. The loader counts the files it
drops in ``Loaded.removed`` (by key: :func:`build_instances_with_report`). Ids are built from the file names as for
MTSamples.
"""

from __future__ import annotations

from pytest_medhelm.catalogue.clinical_decision_support.mtsamples import SECTIONS, loaders
from pytest_medhelm.catalogue.definition import Benchmark
from pytest_medhelm.data.sources import DataFile
from pytest_medhelm.metrics.jury import jury_metric
from pytest_medhelm.prompting import GenerationPrompt

SLUG = "mtsamples_procedures"
FOLDER = "mtsample_procedure"
GIT_HASH = "c4c252443fa9c52afb6960f53e51be278639bea2"

#: the input is cut at every marker, so no reference line stays in it
build_instances, build_instances_with_report, build_instances_helm = loaders(SLUG, FOLDER, SECTIONS)


BENCHMARK = Benchmark(
    slug=SLUG,
    name="MTSamples Procedures",
    subcategory="Recording Procedures",
    access="public",
    kind="open",
    files=(
        DataFile(
            name=FOLDER,
            url=f"https://github.com/raulista1997/benchmarkdata/tree/{GIT_HASH}/{FOLDER}",
            description=(
                "the folder of 429 MTSamples procedure .txt reports at that commit (no licence stated: copy the "
                "folder yourself, e.g. with a sparse git checkout of the commit)"
            ),
            is_dir=True,
        ),
    ),
    build_instances=build_instances,
    build_instances_helm=build_instances_helm,  # 128: without the 3 '#'-named reports HELM cannot download
    prompt=GenerationPrompt(
        instructions="Here are information about a patient, return a reasonable treatment plan for the patient.",
        input_noun="Patient Notes",
        output_noun="Answer",
    ),
    metric=jury_metric(SLUG),  # the LLM jury; ROUGE and BERTScore are recorded beside it
    max_tokens=512,
    description="Write a plan from a transcribed procedure report (scored by the LLM jury).",
    example=(
        "mtsample_procedure/Synthetic Knee Arthroscopy.txt: \"PROCEDURE: Synthetic arthroscopy of the left "
        "knee.\\nFINDINGS: Medial meniscus tear.\\nPLAN: Weight bearing as tolerated.\""
    ),
    instance_count=131,
    filters=("of the 429 files: 298 without a PLAN:/SUMMARY:/FINDINGS: section; under --medhelm-compat helm also the "
             "7 whose name has a '#' (HELM's download fails), 3 of them instances: 128"),
)
