"""MedDialog: summarise a patient-doctor conversation in one sentence (HELM ``MedDialogScenario``, ``med_dialog``).

**Source.** CodaLab bundle ``0x82f0c47f6d3e4462ae9ef8ea39eebe64`` (BioBART's preprocessing of MedDialog-EN), files
``healthcaremagic/test.json`` (22,642 dialogues) and ``icliniq/test.json`` (3,108), each ``{"data": [{"src": …,
"tgt": …}, …]}``. A CodaLab bundle never changes, so the URL is pinned; HELM publishes no sha256 for it and none
is recorded here yet. Put the files at ``<--medhelm-data-dir>/meddialog/healthcaremagic/test.json`` and
``…/meddialog/icliniq/test.json``. Licence: all copyrights belong to healthcaremagic.com and icliniq.com.

**Instances.** Input = ``src`` exactly (the conversation, ``"Patient: … Doctor: …"``), reference = ``tgt``, in file
order; ids ``healthcaremagic-0``, ``icliniq-0``, … (the subset and the 0-based position in its file).

**Two runs averaged.** HELM runs the subsets as two runs (``med_dialog,subset=healthcaremagic`` and
``…icliniq``) and its MedDialog score is the mean of the two run means. Every instance here names its subset in
:attr:`~pytest_medhelm.values.Instance.subset`, and the aggregator averages subset means, which
reproduces that. HELM's leaderboard caps *each* run at 1,000 instances (``np.random.seed(0)`` sample per subset):
with ``--medhelm-max-instances N`` the HELM-compatible sample is therefore N per subset, drawn within each subset
(:func:`~pytest_medhelm.catalogue.sampling.helm_sample_by_subset`, applied by the plugin to every benchmark), not N
drawn from the concatenated list.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pytest_medhelm.catalogue.definition import Benchmark
from pytest_medhelm.data.errors import DataError
from pytest_medhelm.data.readers import data_file, read_json, require
from pytest_medhelm.data.sources import DataFile
from pytest_medhelm.metrics.jury import jury_metric
from pytest_medhelm.prompting import GenerationPrompt
from pytest_medhelm.values import Instance

SLUG = "meddialog"
SUBSETS = ("healthcaremagic", "icliniq")
BUNDLE_URL = "https://worksheets.codalab.org/rest/bundles/0x82f0c47f6d3e4462ae9ef8ea39eebe64/contents/blob"
#: test-split sizes stated by HELM's scenario (BioBART's splits)
SUBSET_SIZES = {"healthcaremagic": 22642, "icliniq": 3108}


def subset_file(subset: str) -> str:
    return f"{subset}/test.json"


def read_subset(path: Path, subset: str) -> list[Instance]:
    data = read_json(path)
    records = require(data, "data", path, "top level")
    if not isinstance(records, list):
        raise DataError(path, "key 'data'", f"expected a list of dialogues, got {type(records).__name__}")
    instances = []
    for index, record in enumerate(records):
        where = f"data[{index}]"
        src = require(record, "src", path, where)
        tgt = require(record, "tgt", path, where)
        for key, value in (("src", src), ("tgt", tgt)):
            if not isinstance(value, str):
                raise DataError(path, where, f"expected {key!r} to be a string, got {type(value).__name__}")
        instances.append(
            Instance(id=f"{subset}-{index}", input=src, references=(tgt,), benchmark=SLUG, subset=subset)
        )
    if not instances:
        raise DataError(path, "key 'data'", "no dialogues")
    return instances


def build_instances(files: Mapping[str, Path]) -> list[Instance]:
    """Both subsets, healthcaremagic first, each in file order."""
    instances: list[Instance] = []
    for subset in SUBSETS:
        instances += read_subset(data_file(files, subset_file(subset)), subset)
    return instances


BENCHMARK = Benchmark(
    slug=SLUG,
    name="MedDialog",
    subcategory="Patient-Provider Messaging",
    access="public",
    kind="open",
    files=tuple(
        DataFile(
            name=subset_file(subset),
            url=f"{BUNDLE_URL}/{subset_file(subset)}",
            description=(
                f"the MedDialog-EN {subset} test split as preprocessed by BioBART ({SUBSET_SIZES[subset]:,} "
                "dialogues): {\"data\": [{\"src\": conversation, \"tgt\": one-sentence summary}]}"
            ),
        )
        for subset in SUBSETS
    ),
    build_instances=build_instances,
    prompt=GenerationPrompt(
        instructions="Generate a one sentence summary of this patient-doctor conversation.",
        input_noun="Patient-Doctor",
        output_noun="Summary",
    ),
    metric=jury_metric(SLUG),  # the LLM jury; ROUGE and BERTScore are recorded beside it
    max_tokens=80,
    description="Summarise a patient-doctor conversation in one sentence; two subsets (HealthCareMagic, iCliniq) "
    "averaged (scored by the LLM jury).",
    example=(
        "healthcaremagic/test.json: {\"data\": [{\"src\": \"Patient: I have had a synthetic headache for two days. "
        "Doctor: Take paracetamol and rest.\", \"tgt\": \"Synthetic two-day headache, advised paracetamol.\"}]}"
    ),
    instance_count=25750,
)
