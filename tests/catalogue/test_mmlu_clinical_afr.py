"""medhelm 0.8.0's ``mmlu_clinical_afr`` (MMLU clinical subjects in Afrikaans and isiZulu, 5-shot): registered where
it belongs with its pinned files, its prompt byte for byte the fork's (../shared/reference/prompts/
medhelm08_mmlu_clinical_afr.txt, rendered by the real fork from the synthetic rows written out below), HELM's
in-context sampler reproduced, malformed and missing files named, and end to end through the plugin against the
test server, serial and with -n 2.

The expected prompts and the sampler's choices are written out here from the spec
(../shared/reference/medhelm-0.8-additions.md §0 and §6), never computed with the package's code."""

from __future__ import annotations

import csv
import hashlib
import json
import random
from collections import defaultdict
from itertools import cycle
from pathlib import Path

import pytest
from pytester_runs import SHARED_DATA, SUITE, run

from pytest_medhelm.catalogue import builtin_benchmarks
from pytest_medhelm.catalogue.sampling import TooFewExamples, helm_in_context_examples
from pytest_medhelm.data.errors import DataError, DataMissing
from pytest_medhelm.data.sources import resolve_files
from pytest_medhelm.testing.server import running_server

SLUG = "mmlu_clinical_afr"
BENCH = {b.slug: b for b in builtin_benchmarks()}[SLUG]
REFERENCE = SHARED_DATA.parent / "reference" / "prompts" / "medhelm08_mmlu_clinical_afr.txt"
SUBJECTS = ("clinical_knowledge", "college_medicine", "virology")
LANGS = {"af": ("Afr.", "Afrikaans"), "zu": ("Zul.", "Zulu")}
DASH = "\u2013"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# ------------------------------------------------------------------------------------------------ synthetic files
def question(tag: str, name: str) -> str:
    return f"{tag} SINTETIESE vraag {name}: watter stelling is korrek?"


def row(tag: str, name: str, letter: str, options: tuple[str, ...] | None = None) -> list[str]:
    options = options or tuple(f"{name} opsie {x} {DASH} sint." for x in "ABCD")
    return [question(tag, name), *options, letter]


def dev_rows(tag: str) -> list[list[str]]:
    """The five dev rows the fork's example prompt was rendered from (with the language's tag)."""
    return [
        row(tag, "d0", "A"),
        row(tag, "d1", "B"),
        [f"{tag} SINTETIESE vraag d2, met 'n komma, \"aanhalings\" en \u2019n kruis \u2020?",
         *(f"d2 opsie {x} {DASH} sint." for x in "ABCD"), "C"],
        row(tag, "d3", "D", (f"d3 opsie A {DASH} sint.", "ATP.", "ATP.", f"d3 opsie D {DASH} sint.")),
        row(tag, "d4", "A"),
    ]


#: val and test rows of each run: (name, letter); isiZulu's test file has one row more
VAL = (("v0", "B"), ("v1", "A"))
TEST = {"af": (("t0", "A"), ("t1", "C"), ("t2", "D")), "zu": (("t0", "A"), ("t1", "C"), ("t2", "D"), ("t3", "A"))}


def write_csv(path: Path, rows: list[list[str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as fh:
        csv.writer(fh, lineterminator="\n").writerows(rows)  # minimal quoting, LF, as the real files


def file_of(root: Path, subject: str, split: str, lang: str) -> Path:
    return root / SLUG / "mmlu_cm_ck_vir" / f"{subject}_{split}_{lang}.csv"


def write_data(root: Path) -> None:
    for subject in SUBJECTS:
        for lang, (tag, _) in LANGS.items():
            write_csv(file_of(root, subject, "dev", lang), dev_rows(tag))
            write_csv(file_of(root, subject, "val", lang), [row(tag, n, x) for n, x in VAL])
            write_csv(file_of(root, subject, "test", lang), [row(tag, n, x) for n, x in TEST[lang]])


def load(root: Path, compat: str = "default"):
    return BENCH.instance_builder(compat)(resolve_files(BENCH, root, download=False))


# ------------------------------------------------------------------------------------------------ the spec, written out
def block(fields: list[str], answer: str | None) -> str:
    """HELM's multiple-choice-joint block, nouns Question / Answer."""
    text = f"Question: {fields[0]}\n" + "".join(f"{x}. {o}\n" for x, o in zip("ABCD", fields[1:5]))
    return text + (f"Answer: {answer}\n" if answer else "Answer:")


#: HELM's sampler on these five dev rows (labels all different, one each): sorted, shuffled with random.seed(0)
SHOT_ORDER = (2, 1, 0, 4, 3)


def expected_prompt(subject: str, lang: str, fields: list[str]) -> str:
    tag, language = LANGS[lang]
    dev = dev_rows(tag)
    instructions = (f"The following are multiple choice questions (with answers) about {subject.replace('_', ' ')} "
                    f"in {language}.\n")
    blocks = [instructions, *(block(dev[i], dev[i][5]) for i in SHOT_ORDER), block(fields, None)]
    return "\n".join(blocks)


def expected_prompts() -> dict[str, str]:
    """instance id -> prompt, for every instance of the synthetic files."""
    out = {}
    for subject in SUBJECTS:
        for lang, (tag, _) in LANGS.items():
            rows = [row(tag, n, x) for n, x in (*VAL, *TEST[lang])]
            for number, fields in enumerate(rows, start=5):
                out[f"{subject}_{lang}-id{number}"] = expected_prompt(subject, lang, fields)
    return out


def helm_sample_examples(train: list, k: int, label, seed: int = 0) -> list:
    """HELM's InContextLearningAdapter.sample_examples, transcribed (global random, itertools.cycle)."""
    random.seed(seed)
    num = min(len(train), k)
    examples: list = []
    unlabeled = []
    label_to = defaultdict(list)
    for inst in train:
        if label(inst) is not None:
            label_to[label(inst)].append(inst)
        else:
            unlabeled.append(inst)
    counts_to_labels = defaultdict(list)
    for lab, members in sorted(label_to.items()):
        counts_to_labels[len(members)].append(lab)
    sorted_labels: list = []
    for count in sorted(counts_to_labels, reverse=True):
        labels = counts_to_labels[count]
        random.shuffle(labels)
        sorted_labels.extend(labels)
    it = cycle(sorted_labels)
    while num > 0:
        nxt = next(it, None)
        if not nxt:
            break
        members = label_to[nxt]
        if len(members) == 0:
            continue
        examples.append(members.pop(random.randrange(len(members))))
        num -= 1
    examples += random.sample(unlabeled, num)
    return examples


# ------------------------------------------------------------------------------------------------ the catalogue
def test_registered_with_its_pinned_files() -> None:
    assert (BENCH.category, BENCH.subcategory, BENCH.access, BENCH.kind) == (
        "clinical_decision_support", "Providing Clinical Knowledge Support", "public", "closed")
    assert (BENCH.metric.name, BENCH.max_tokens, BENCH.stop) == ("exact_match", 1, ())
    assert list(SUITE.rglob(f"test_{SLUG}.py"))
    names = [f.name for f in BENCH.files]
    assert names == [f"mmlu_cm_ck_vir/{s}_{split}_{lang}.csv" for s in SUBJECTS for lang in LANGS
                     for split in ("dev", "val", "test")]
    commit = "9af6ce2f5df8171a64d58ced2032761396bfb2ad"
    for file in BENCH.files:
        assert file.url == ("https://raw.githubusercontent.com/InstituteforDiseaseModeling/Bridging-the-Gap-Low-"
                            f"Resource-African-Languages/{commit}/data/evaluation_benchmarks_afr_release/{file.name}")
        # the Afrikaans files are pinned (sha256 at the commit), isiZulu's are not known
        assert bool(file.sha256) == file.name.endswith("_af.csv"), file.name
    pins = {f.name.split("/")[1]: f.sha256 for f in BENCH.files if f.sha256}
    assert pins["clinical_knowledge_dev_af.csv"] == "8a35596fe25b23942f0f700bd8f67c3b9bf17cf8ce218ff63f7e56d369c442b1"
    assert pins["virology_test_af.csv"] == "6a70358dc1aa301f49637c946cffdb9aae9e231a3593dde464334e7b08a50094"


def test_instances_runs_ids_and_splits(tmp_path: Path) -> None:
    write_data(tmp_path)
    instances = load(tmp_path)
    # val and test of each of the six runs; dev is the in-context pool only
    assert len(instances) == 3 * (5 + 6)
    assert [i.subset for i in instances[:11]] == ["clinical_knowledge_af"] * 5 + ["clinical_knowledge_zu"] * 6
    first = instances[0]
    assert (first.id, first.input, first.expected, first.extra["split"]) == (
        "clinical_knowledge_af-id5", question("Afr.", "v0"), "B", "valid")
    assert [i.id for i in instances[:5]] == [f"clinical_knowledge_af-id{n}" for n in range(5, 10)]
    assert [i.extra["split"] for i in instances[:5]] == ["valid"] * 2 + ["test"] * 3
    assert first.extra["helm_run"] == (
        "mmlu_clinical_afr:subject=clinical_knowledge,lang=af,method=multiple_choice_joint")
    assert instances.removed == {}


# ------------------------------------------------------------------------------------------------ the prompt
@pytest.mark.parametrize("compat", ["medhelm", "default", "helm"])
def test_prompts_are_the_forks_byte_for_byte(tmp_path: Path, compat: str) -> None:
    write_data(tmp_path)
    instances = load(tmp_path, compat)
    rendered = {i.id: BENCH.render_prompt(i, compat) for i in instances}
    if REFERENCE.exists():  # the fork's own rendering of the first question
        assert sha(rendered["clinical_knowledge_af-id5"]) == sha(REFERENCE.read_text(encoding="utf-8"))
    assert rendered == expected_prompts()
    # the request: the prompt as one user message, one output token
    from pytest_medhelm.values import ModelSpec

    request = BENCH.request_for(ModelSpec("openai/m", "openai/m"), instances[0], compat=compat)
    assert (request.prompt_text, request.max_tokens) == (rendered["clinical_knowledge_af-id5"], 1)


def test_the_shown_answer_is_the_first_option_with_the_correct_text(tmp_path: Path) -> None:
    write_data(tmp_path)
    path = file_of(tmp_path, "virology", "dev", "zu")
    rows = dev_rows("Zul.")
    rows[3][5] = "C"  # options B and C are both "ATP.": HELM shows B, the first correct reference
    write_csv(path, rows)
    [inst] = [i for i in load(tmp_path) if i.id == "virology_zu-id5"]
    prompt = BENCH.render_prompt(inst)
    assert "B. ATP.\nC. ATP.\nD. d3 opsie D \u2013 sint.\nAnswer: B\n" in prompt


# ------------------------------------------------------------------------------------------------ the five shots
def test_five_shots_are_helms_choice() -> None:
    labels = [f"d{n} opsie {x} {DASH} sint." for n, x in enumerate("ABCDA")]
    assert helm_in_context_examples(labels, 5, lambda t: t) == [labels[i] for i in SHOT_ORDER]
    assert helm_sample_examples(list(labels), 5, lambda t: t) == [labels[i] for i in SHOT_ORDER]


def test_sampler_matches_helms_on_random_pools() -> None:
    """Repeated labels (counts grouped, ties shuffled), unlabelled rows, empty labels, several seeds."""
    compared = 0
    for trial in range(1500):
        rng = random.Random(trial)
        size, k = rng.randint(1, 12), rng.randint(1, 8)
        pool = [(n, rng.choice(["a", "b", "c", "d", "", None])) for n in range(size)]
        labelled = sum(lab is not None for _, lab in pool)
        if 0 < labelled < min(size, k) and all(lab != "" for _, lab in pool):
            continue  # HELM's round-robin would cycle for ever
        try:
            expected = helm_sample_examples(list(pool), k, lambda p: p[1], seed=trial % 3)
        except ValueError:
            expected = None
        try:
            got = helm_in_context_examples(pool, k, lambda p: p[1], seed=trial % 3)
        except TooFewExamples:
            got = None
        assert got == expected, (pool, k)
        compared += 1
    assert compared > 1000


def test_dev_file_with_too_few_usable_shots_is_an_error_naming_it(tmp_path: Path) -> None:
    write_data(tmp_path)
    rows = dev_rows("Afr.")
    rows[0][1] = ""  # d0's correct option is an empty text: HELM's sampler stops there and fails
    write_csv(file_of(tmp_path, "college_medicine", "dev", "af"), rows)
    with pytest.raises(DataError, match=r"college_medicine_dev_af.csv: HELM's sampler cannot draw 5"):
        load(tmp_path)


# ------------------------------------------------------------------------------------------------ bad files
def test_missing_file_says_what_to_put_where(tmp_path: Path) -> None:
    write_data(tmp_path)
    file_of(tmp_path, "virology", "test", "zu").unlink()
    with pytest.raises(DataMissing) as err:
        load(tmp_path)
    text = str(err.value)
    assert "mmlu_clinical_afr/mmlu_cm_ck_vir/virology_test_zu.csv" in text
    assert "9af6ce2f5df8171a64d58ced2032761396bfb2ad/data/evaluation_benchmarks_afr_release" in text


@pytest.mark.parametrize(("rows", "message"), [
    ([row("Afr.", "v0", "B"), row("Afr.", "v1", "A")[:5]],
     r"college_medicine_val_af.csv, row 2 \(line 2\): expected 6 fields \(question, A, B, C, D, answer\), got 5"),
    ([row("Afr.", "v0", "E")], r"college_medicine_val_af.csv, row 1 \(line 1\): the correct letter \(6th field\) "
                               r"must be one of A, B, C, D, got 'E'"),
    ([row("Afr.", "v0", " B")], r"row 1 \(line 1\): the correct letter .* got ' B'"),
    ([], r"college_medicine_val_af.csv: "),
])
def test_malformed_file_is_an_error_naming_file_and_row(tmp_path: Path, rows, message) -> None:
    write_data(tmp_path)
    write_csv(file_of(tmp_path, "college_medicine", "val", "af"), rows)
    with pytest.raises(DataError, match=message):
        load(tmp_path)


# ------------------------------------------------------------------------------------------------ end to end
#: the server always answers A: right on v1 and t0 (and isiZulu's t3) of every run
EXPECTED_MEAN = (0.4 + 0.5) / 2  # the mean of the six run means (af 2/5, zu 3/6), not the pooled 15/33


@pytest.mark.e2e
@pytest.mark.parametrize("xdist", [pytest.param(["-p", "no:xdist"], id="serial"),
                                   pytest.param(["-n", "2"], id="xdist")])
def test_runs_end_to_end(pytester: pytest.Pytester, xdist) -> None:
    data = pytester.mkdir("data")
    write_data(data)
    out = pytester.path / "r.json"
    with running_server(answer="A") as server:
        result = run(pytester, str(SUITE), "--medhelm-model", "openai/writer", "--medhelm-api-base", server.url,
                     "--medhelm-data-dir", str(data), "--medhelm-benchmark", SLUG, "--medhelm-compat", "medhelm",
                     # synthetic files: the Afrikaans ones differ from their pins
                     "--medhelm-data-unverified", SLUG, "--medhelm-json", str(out), *xdist)
        sent = server.count
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert sent == 33
    report = json.loads(out.read_text())
    [bench] = report["benchmarks"]
    assert (bench["n"], bench["n_errors"]) == (33, 0)
    assert bench["mean"] == pytest.approx(EXPECTED_MEAN)
    assert {r["instance_id"]: r["prompt_sha256"] for r in report["instances"]} == {
        i: sha(p) for i, p in expected_prompts().items()}
    unverified = report["run"]["data_unverified"][SLUG]
    assert len(unverified) == 18
    assert {name for name, entry in unverified.items() if entry["expected"] is None} == {
        f"mmlu_cm_ck_vir/{s}_{split}_zu.csv" for s in SUBJECTS for split in ("dev", "val", "test")}


@pytest.mark.e2e
def test_capped_run_samples_each_run(pytester: pytest.Pytester) -> None:
    data = pytester.mkdir("data")
    write_data(data)
    out = pytester.path / "r.json"
    with running_server(answer="A") as server:
        result = run(pytester, str(SUITE), "-p", "no:xdist", "--medhelm-model", "openai/writer", "--medhelm-api-base",
                     server.url, "--medhelm-data-dir", str(data), "--medhelm-benchmark", SLUG,
                     "--medhelm-data-unverified", SLUG, "--medhelm-max-instances", "2", "--medhelm-json", str(out))
    assert result.ret == 0, result.stdout.str()[-3000:]
    ids = [r["instance_id"] for r in json.loads(out.read_text())["instances"]]
    assert len(ids) == 12 and {i.split("-")[0] for i in ids} == {f"{s}_{lang}" for s in SUBJECTS for lang in LANGS}


def test_list_shows_it_with_its_data(pytester: pytest.Pytester, monkeypatch) -> None:
    monkeypatch.setenv("MEDHELM_DATA_HOME", str(pytester.mkdir("empty-cache")))
    data = pytester.mkdir("data")
    write_data(data)
    listed = run(pytester, "--medhelm-list", "--medhelm-data-dir", str(data), "--medhelm-data-unverified", SLUG)
    assert listed.ret == 0, listed.stdout.str()
    [line] = [line for line in listed.stdout.lines if line.split() and line.split()[0] == SLUG]
    assert "Providing Clinical Knowledge Support" in line and line.rstrip().endswith("yes     33")
    empty = run(pytester, "--medhelm-list")
    [line] = [line for line in empty.stdout.lines if line.split() and line.split()[0] == SLUG]
    assert line.rstrip().endswith("no      -")
