"""The jury's instrument: HELM v0.5.16's judge prompts read as pinned data (never executed), rendered byte for byte as
HELM renders them, and our own rubric as the announced fallback.

HELM's annotator files are read from ../shared/data/helm_jury (these tests skip without it); the one judge prompt
HELM sent that we keep as a reference is ../shared/reference/prompts/aci_bench.judge.txt.
"""

from __future__ import annotations

import hashlib
import shutil
import string
from pathlib import Path

import pytest
from catalogue_helpers import load
from pytester_runs import SHARED_DATA

from pytest_medhelm.jury import judge_requests
from pytest_medhelm.jury.instrument import (
    HELM_INSTRUMENT,
    HELM_JURY_FILES,
    HELM_SCENARIOS,
    InstrumentError,
    JuryInstrument,
    annotator_file,
    helm_instrument,
    load_jury_instrument,
    own_rubric_instrument,
    read_helm_constants,
    render_helm,
)
from pytest_medhelm.values import Instance, ModelSpec

REFERENCE = SHARED_DATA.parent / "reference" / "prompts" / "aci_bench.judge.txt"
JUDGES = [ModelSpec(name=n, litellm_model=n) for n in ("openai/judge-a", "openai/judge-b", "openai/judge-c")]


@pytest.fixture
def helm_dir() -> Path:
    """The shared data directory holding helm_jury/ (HELM's 13 annotator files)."""
    if not (SHARED_DATA / "helm_jury").is_dir():
        pytest.skip("../shared/data/helm_jury is absent (HELM's annotator files)")
    return SHARED_DATA


@pytest.fixture
def helm(helm_dir: Path) -> JuryInstrument:
    instrument, warning = load_jury_instrument(helm_dir, download_allowed=False)
    assert warning is None and instrument.is_helm and instrument.name == HELM_INSTRUMENT == "helm@ef439fc"
    return instrument


def _between(text: str, tag: str) -> str:
    return text.split(f"<{tag}>\n", 1)[1].split(f"\n</{tag}>", 1)[0]


def test_the_aci_bench_judge_prompt_helm_sent_is_reproduced_byte_for_byte(helm: JuryInstrument, helm_dir: Path):
    if not REFERENCE.is_file() or not (helm_dir / "aci_bench").is_dir():
        pytest.skip("the reference judge prompt or the ACI-Bench data is absent")
    expected = REFERENCE.read_bytes()
    text = expected.decode("utf-8")
    [instance] = [i for i in load("aci_bench", helm_dir) if i.input == _between(text, "conversation")]
    answer = _between(text, "response")  # the answer HELM's model gave, as the judges saw it
    requests = helm.judge_requests("aci_bench", instance, answer, JUDGES)
    assert len(requests) == 3
    for _judge, request in requests:
        assert request.prompt_text.encode("utf-8") == expected


def test_the_13_annotator_files_are_pinned_and_read_as_literals(helm_dir: Path):
    assert {f.name for f in HELM_JURY_FILES.files} == {annotator_file(s) for s in HELM_SCENARIOS}
    for file in HELM_JURY_FILES.files:
        assert file.url == ("https://raw.githubusercontent.com/stanford-crfm/helm/ef439fc94e58568fd1274d5c07ceb1b711360a55"
                            f"/src/helm/benchmark/annotation/{file.name}")
        path = helm_dir / "helm_jury" / file.name
        assert hashlib.sha256(path.read_bytes()).hexdigest() == file.sha256
        template, criteria = read_helm_constants(path)
        assert "{RESPONSE}" in template and "{QUESTION}" in template
        assert all(sub == {"score", "explanation"} for sub in criteria.values())
    noteextract = read_helm_constants(helm_dir / "helm_jury" / "chw_care_plan_annotator.py")
    assert list(noteextract[1]) == ["accuracy", "structure", "clarity"] and "{GOLD_RESPONSE}" not in noteextract[0]


def test_the_files_are_never_executed(tmp_path: Path):
    module = tmp_path / "x_annotator.py"
    marker = tmp_path / "executed"
    module.write_text(f"open({str(marker)!r}, 'w').close()\nraise SystemExit(3)\n"
                      "PROMPT_TEMPLATE = 'Q: {QUESTION} A: {RESPONSE}'\n"
                      "ANNOTATION_CRITERIA: dict = {'accuracy': {'score', 'explanation'}}\n")
    assert read_helm_constants(module) == ("Q: {QUESTION} A: {RESPONSE}",
                                           {"accuracy": frozenset({"score", "explanation"})})
    assert not marker.exists()
    module.write_text("PROMPT_TEMPLATE = 'a' + 'b'\nANNOTATION_CRITERIA = {}\n")
    with pytest.raises(InstrumentError, match="PROMPT_TEMPLATE is not a literal"):
        read_helm_constants(module)
    module.write_text("PROMPT_TEMPLATE = 'x'\n")
    with pytest.raises(InstrumentError, match="ANNOTATION_CRITERIA"):
        read_helm_constants(module)


def test_rendering_is_one_template_substitution_of_the_raw_values(helm: JuryInstrument, helm_dir: Path):
    gold = "PLAN\nRest.\u00a0\n\n"  # a no-break space and trailing newlines, kept verbatim
    answer = "  {RESPONSE} $RESPONSE {GOLD_RESPONSE} $$ ${QUESTION}\n"  # not stripped, nothing in it expanded
    instance = Instance(id="x", input="Doctor-patient dialogue:\n\n[doctor] hi", references=(gold, "other"),
                        benchmark="aci_bench")
    text = helm.judge_prompt("aci_bench", instance, answer)
    raw, _criteria = read_helm_constants(helm_dir / "helm_jury" / "aci_bench_annotator.py")
    # independently of our renderer: HELM's steps written out
    dollar = raw.replace("{QUESTION}", "$QUESTION").replace("{RESPONSE}", "$RESPONSE").replace(
        "{GOLD_RESPONSE}", "$GOLD_RESPONSE")
    assert text == string.Template(dollar).substitute(QUESTION=instance.input, RESPONSE=answer, GOLD_RESPONSE=gold)
    assert f"<response>\n{answer}\n</response>" in text and f"<gold_response>\n{gold}\n</gold_response>" in text
    assert render_helm("{QUESTION}|{RESPONSE}", "q", "{QUESTION}", "g") == "q|{QUESTION}"


def test_judge_requests_are_helms(helm: JuryInstrument):
    instance = Instance(id="x", input="What is aspirin?", references=("A drug.",), benchmark="medicationqa")
    requests = judge_requests("medicationqa", instance, "An NSAID.", JUDGES, instrument=helm)
    assert [name for name, _r in requests] == [j.name for j in JUDGES]
    [text] = {r.prompt_text for _n, r in requests}  # every judge the identical prompt
    for _name, request in requests:
        assert request.messages == (("user", text),)  # one user message, no system message
        assert (request.temperature, request.max_tokens, request.stop) == (0.0, 4096, ())
        assert request.purpose == "judge:medicationqa:helm@ef439fc"
    own = judge_requests("medicationqa", instance, "An NSAID.", JUDGES)  # default: our rubric
    assert own[0][1].purpose == "judge:medicationqa:1" and own[0][1].cache_key() != requests[0][1].cache_key()
    for empty in ("", "  \n\t"):
        assert helm.judge_requests("medicationqa", instance, empty, JUDGES) == []
    assert helm.judge_requests("pubmedqa", instance, "yes", JUDGES) == []
    assert helm.criteria("noteextract") == ("accuracy", "structure", "clarity")


def test_without_the_files_our_rubric_with_one_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("MEDHELM_DATA_HOME", str(tmp_path / "cache"))
    instrument, warning = load_jury_instrument(tmp_path, download_allowed=False)
    assert instrument.name.startswith("pytest-medhelm@") and not instrument.is_helm
    assert warning is not None and "\n" not in warning
    assert "aci_bench_annotator.py" in warning and "not comparable with MedHELM's" in warning
    instrument, warning = load_jury_instrument(None, download_allowed=False)  # nor in the (empty) data cache
    assert not instrument.is_helm and "not comparable with MedHELM's" in warning
    assert instrument.criteria("aci_bench") == own_rubric_instrument().criteria("aci_bench")


def test_from_the_data_cache_verified(helm_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    cache = tmp_path / "cache"
    shutil.copytree(helm_dir / "helm_jury", cache / "helm_jury")
    monkeypatch.setenv("MEDHELM_DATA_HOME", str(cache))
    instrument, warning = load_jury_instrument(None, download_allowed=False)
    assert warning is None and instrument.is_helm
    # a changed file is not HELM's instrument: refused, with the file and both checksums named
    target = tmp_path / "dir" / "helm_jury"
    shutil.copytree(helm_dir / "helm_jury", target)
    path = target / "medi_qa_annotator.py"
    path.write_bytes(path.read_bytes().replace(b"medical expert", b"medical student"))
    instrument, warning = load_jury_instrument(tmp_path / "dir", download_allowed=False)
    assert not instrument.is_helm and str(path) in warning and "expected HELM v0.5.16's" in warning
    with pytest.raises(InstrumentError, match="medi_qa_annotator.py"):
        helm_instrument({f.name: target / f.name for f in HELM_JURY_FILES.files})
