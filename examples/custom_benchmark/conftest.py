"""A benchmark of your own, next to MedHELM's: yes/no triage questions about your clinic's messages.

The whole authoring API in one file: the data file, an instance builder, a prompt, a metric, and the registration
hook. Run it (the data folder is the benchmark's own ``data_dir``, so no --medhelm-data-dir is needed):

    pytest examples/custom_benchmark --medhelm-model local/smollm2

Register benchmarks here, in a conftest.py that pytest loads at start-up (the rootdir's, or that of a directory
named on the command line), or in a plugin: a conftest in a subfolder is loaded too late and is refused.
"""

from pytest_medhelm import Benchmark, DataFile, GenerationPrompt, Instance, Score, read_csv_rows


def build_instances(files):
    """One instance per row of triage.csv (columns id, note, question, answer; answer is yes or no)."""
    rows = read_csv_rows(files["triage.csv"], ["id", "note", "question", "answer"])
    return [Instance(id=row["id"], input=f"{row['note']}\nQuestion: {row['question']}", references=(row["answer"],))
            for row in rows]


class YesNoMatch:
    """1 when the answer's first word is the reference (yes/no), else 0."""

    name = "yes_no_match"
    binary = True  # a 0 is a miss
    pass_mark = 1.0

    def score(self, answer, instance, compat="default"):
        words = answer.strip().lower().split()
        said = words[0].strip(".,!") if words else ""
        return Score(float(said == instance.references[0]), detail=f"expected {instance.references[0]!r}, "
                                                                   f"got {answer.strip()[:40]!r}")


TRIAGE = Benchmark(
    slug="clinic_triage",
    name="Clinic triage (example)",
    category="administration_workflow",  # one of MedHELM's five categories (slug or display name)
    subcategory="Organizing Workflow Processes",
    access="private",  # public | gated | private: the markers, and what --medhelm-local-only protects
    kind="closed",  # closed | open (open-ended answers are judged by the jury)
    files=(DataFile("triage.csv", description="columns id, note, question, answer (yes or no)"),),
    data_dir="data/clinic_triage",  # relative to this file; --medhelm-data-dir DIR/clinic_triage/ wins if present
    build_instances=build_instances,
    prompt=GenerationPrompt(instructions="Answer yes or no.", input_noun="Message", output_noun="Answer"),
    metric=YesNoMatch(),
    max_tokens=3,
)


def pytest_medhelm_register_benchmarks(registry):
    registry.register(TRIAGE)
