"""ACI-Bench: write the clinical note of a doctor-patient conversation (HELM ``ACIBenchScenario``, ``aci_bench``).

HELM's test split is the three challenge test files at the commit pinned here, read in HELM's order (task B test 1,
CLEF task C test 3, task C test 2), each in file order: 40 + 40 + 40 = 120 dialogues. The input is
``"Doctor-patient dialogue:\\n\\n" + src`` (what the jury sees), the reference the note ``tgt``. HELM also
downloads ``train_full.json`` as its train split, which zero-shot MedHELM never uses, so it is not needed here.
Instance ids are each record's ``file`` field (``D2N088-virtassist``). Licence: CC BY 4.0.
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

SLUG = "aci_bench"
COMMIT = "e75b383172195414a7a68843ec4876e83e5409f7"
BASE_URL = f"https://raw.githubusercontent.com/wyim/aci-bench/{COMMIT}/data/challenge_data_json"
#: HELM's TEST_URLS, in its order, with their sha256
TEST_FILES = (
    ("clinicalnlp_taskB_test1_full.json", "8ac8782e027b410a25d909f862124b2ed8827bfb64e62833bed9704c3d02dd69"),
    ("clef_taskC_test3_full.json", "e68472c6015566b35289c16ae30659d72180055f0e9432d8e357d74b204e8a19"),
    ("clinicalnlp_taskC_test2_full.json", "22eac3d9b12dd657c1034737473c426b7d8e0afe67397f5b40a2cd300b1a0e2c"),
)


def read_dialogues(path: Path) -> list[tuple[str, str, str]]:
    """(file id, src, tgt) of every record of one ACI-Bench JSON file, in file order."""
    data = read_json(path)
    records = require(data, "data", path, "top level")
    if not isinstance(records, list):
        raise DataError(path, "key 'data'", f"expected a list of records, got {type(records).__name__}")
    out = []
    for index, record in enumerate(records):
        where = f"data[{index}]"
        src = require(record, "src", path, where)
        tgt = require(record, "tgt", path, where)
        for key, value in (("src", src), ("tgt", tgt)):
            if not isinstance(value, str):
                raise DataError(path, where, f"expected {key!r} to be a string, got {type(value).__name__}")
        file_id = record.get("file")
        out.append((file_id if isinstance(file_id, str) and file_id.strip() else "", src, tgt))
    return out


def build_instances(files: Mapping[str, Path]) -> list[Instance]:
    instances: list[Instance] = []
    seen: set[str] = set()
    for number, (name, _sha) in enumerate(TEST_FILES, start=1):
        path = data_file(files, name)
        for index, (file_id, src, tgt) in enumerate(read_dialogues(path)):
            instance_id = file_id.strip().replace(" ", "_") or f"test{number}-{index}"
            if instance_id in seen:
                raise DataError(path, f"data[{index}]", f"duplicate dialogue id {instance_id!r} (field 'file')")
            seen.add(instance_id)
            instances.append(
                Instance(
                    id=instance_id,
                    input=f"Doctor-patient dialogue:\n\n{src}",
                    references=(tgt,),
                    extra={"source_file": name},
                    benchmark=SLUG,
                )
            )
    return instances


BENCHMARK = Benchmark(
    slug=SLUG,
    name="ACI-Bench",
    subcategory="Documenting Patient Visits",
    access="public",
    kind="open",
    files=tuple(
        DataFile(
            name=name,
            url=f"{BASE_URL}/{name}",
            sha256=sha,
            description="an ACI-Bench challenge test file: {\"data\": [{\"src\", \"tgt\", \"file\"}]} (CC BY 4.0)",
        )
        for name, sha in TEST_FILES
    ),
    build_instances=build_instances,
    prompt=GenerationPrompt(
        instructions=(
            "Summarize the conversation to generate a clinical note with four sections:\n"
            "1. HISTORY OF PRESENT ILLNESS\n"
            "2. PHYSICAL EXAM\n"
            "3. RESULTS\n"
            "4. ASSESSMENT AND PLAN\n\n"
            "The conversation is:"
        ),
        input_noun="Conversation",
        output_noun="Clinical Note",
    ),
    metric=jury_metric(SLUG),  # the LLM jury; ROUGE and BERTScore are recorded beside it
    max_tokens=768,
    description="Write the clinical note of a doctor-patient conversation (scored by the LLM jury).",
    example=(
        "{\"data\": [{\"src\": \"[doctor] hi , how are you today ? [patient] my synthetic knee hurts .\", \"tgt\": "
        "\"CHIEF COMPLAINT\\n\\nKnee pain.\\n\\nHISTORY OF PRESENT ILLNESS\\n...\", \"file\": \"D2N001-virtassist\"}]}"
    ),
    instance_count=120,
)
