"""NoteExtract: restructure a community health worker's free-text care-plan note into a fixed format (Chief
Complaint; History of Present Illness: onset, provoking/palliating factors, quality, region/radiation, severity,
timing, related symptoms) without inventing anything. (HELM ``CHWCarePlanScenario``, ``chw_care_plan``; Stanford,
private.)

HELM reads one CSV with pandas (``data_path=…/CHW_Dataset.csv``) and uses the column ``MO Note``; a row whose note
is NaN (an empty cell, or a pandas NA string such as ``NA`` or ``null``) is skipped, counted here in
``Loaded.removed``. Input = HELM's extraction template (``create_prompt_text``, which starts with a newline) around
the note; ids ``row<N>`` (1-based data row).

**The reference is the source note itself** (HELM's scenario): there is no gold structured note, so HELM's
ROUGE / BERTScore compare the answer with the input note, and its jury (accuracy, *structure*, clarity) grades
without a gold response. The jury scores it here; ROUGE / BERTScore against the note (they would measure copying, not
quality) are recorded only under ``--medhelm-compat helm``, as HELM reports them.

Prompt (generation, nouns ``""``): ``Follow the instructions … into a specified format.⏎⏎: ⏎You are provided with
a clinical note …Clinical Note:⏎{note}⏎⏎:`` (the ``": "`` and the final ``":"`` are HELM's empty-noun quirk);
768 tokens.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pytest_medhelm.catalogue.definition import Benchmark
from pytest_medhelm.catalogue.user_files import is_pandas_na
from pytest_medhelm.data.readers import data_file, read_csv_rows
from pytest_medhelm.data.sources import DataFile
from pytest_medhelm.metrics.jury import jury_metric
from pytest_medhelm.prompting import GenerationPrompt
from pytest_medhelm.values import Instance, Loaded

SLUG = "noteextract"
FILE = "CHW_Dataset.csv"
COLUMN = "MO Note"


def create_prompt_text(clinical_note: str) -> str:
    """HELM's extraction template around ``clinical_note`` (byte for byte, leading newline included)."""
    return (
        "\n"
        "You are provided with a clinical note regarding a physician-patient interaction. Your task is to "
        "extract specific information based solely on the content provided. Do not hallucinate or infer details "
        "that are not explicitly stated in the text. Any information you include must be directly entailed by the "
        "text.\n"
        "\n"
        "Instructions:\n"
        "\n"
        "Extract the required information precisely as presented in the source text.\n"
        "\n"
        'If the text does not contain specific information, clearly state "Not mentioned".\n'
        "\n"
        "Maintain the patient's original wording whenever possible.\n"
        "\n"
        "Response Format:\n"
        "\n"
        "Chief Complaint\n"
        "[ENTER CHIEF COMPLAINT]\n"
        "\n"
        "History of Present Illness\n"
        "\n"
        "Onset: When did it start? Did it begin suddenly or gradually? [ENTER ONSET INFORMATION]\n"
        "\n"
        "Provoking/Palliating Factors: What makes the symptoms better or worse? [ENTER Provoking/Palliating "
        "Factors INFORMATION]\n"
        "\n"
        "Quality: Describe the symptoms, e.g., sharp pain, dull pain, stabbing pain. [ENTER QUALITY INFORMATION]\n"
        "\n"
        "Region/Radiation: Where are your symptoms located? Do they move? [ENTER REGION/RADIATION INFORMATION]\n"
        "\n"
        "Severity: On a scale of 1 to 10, how severe are your symptoms? [ENTER SEVERITY INFORMATION]\n"
        "\n"
        "Timing: When do you experience the symptoms? What times of day? [ENTER TIMING INFORMATION]\n"
        "\n"
        "Related Symptoms: Are there any other symptoms related to the main complaint? [ENTER RELATED SYMPTOMS "
        "INFORMATION]\n"
        "\n"
        "Ensure your responses are concise, accurate, and entirely supported by the provided text. "
        "Do not introduce external knowledge or assumptions.\n"
        "\n"
        "Clinical Note:\n"
        f"{clinical_note}\n"
    )


def build_instances(files: Mapping[str, Path]) -> Loaded:
    path = data_file(files, FILE)
    loaded = Loaded(slug=SLUG)
    for row in read_csv_rows(path, (COLUMN,), universal_newlines=False):  # pandas.read_csv
        note = row[COLUMN]
        if is_pandas_na(note):
            loaded.note_removed(f"empty or NA {COLUMN!r} (pandas reads NaN; HELM skips the row)")
            continue
        loaded.append(
            Instance(id=f"row{row.number}", input=create_prompt_text(note), references=(note,), benchmark=SLUG)
        )
    return loaded.done()


BENCHMARK = Benchmark(
    slug=SLUG,
    name="NoteExtract",
    subcategory="Documenting Care Plans",
    access="private",
    kind="open",
    files=(
        DataFile(
            name=FILE,
            description="CSV with a header line and a column 'MO Note' (the free-text note); other columns are ignored",
        ),
    ),
    build_instances=build_instances,
    prompt=GenerationPrompt(
        instructions="Follow the instructions provided regarding conversion of a patient note into a specified format.",
        input_noun="",
        output_noun="",
    ),
    metric=jury_metric(SLUG),  # the LLM jury; ROUGE and BERTScore are recorded beside it
    max_tokens=768,
    description="Extract a chief complaint and history of present illness from a free-text care-plan note.",
    data_help=(
        "private Stanford dataset, not distributed: use your institution's own file in this format (HELM's name "
        "for it is CHW_Dataset.csv). Synthetic example row: "
        "MO Note / \"Synthetic note: patient reports a dull low back pain since Monday, worse when lifting, "
        "better with rest, 6/10.\""
    ),
    filters="rows whose 'MO Note' is empty or a pandas NA string (NA, null, n/a, ...)",
)
