"""A results dict built as a run builds it, for the tests of comparisons and saved runs."""

from __future__ import annotations


def results(model, scores, category_of=None):
    """A results dict built as a run builds it: ``scores[slug]`` = per-instance scores (ids i000, i001, ...)."""
    from types import SimpleNamespace

    from pytest_medhelm.report.results import build_results

    category_of = category_of or {}
    records = [{"benchmark": slug, "instance_id": f"i{i:03d}", "model": model, "score": s, "raw_score": s,
                "prompt_sha256": f"{slug}{i}", "error": None if s is not None else "ModelError: down"}
               for slug, values in scores.items() for i, s in enumerate(values)]
    catalogue = {slug: SimpleNamespace(category=category_of.get(slug, "medical_research"), subcategory="",
                                       metric=SimpleNamespace(name="exact_match")) for slug in scores}
    return build_results(records, catalogue, models=[model])
