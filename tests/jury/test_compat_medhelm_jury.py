"""The jury's reading of a judge's reply under ``--medhelm-compat medhelm`` (medhelm 0.8.0's ``model_as_judge.py``
and ``llm_jury_metrics.py``) beside HELM 0.5.16's and our default.

The fork validates only the criteria at the top level of the reply (a criterion without ``explanation`` now
counts) and reads every key's ``score`` with ``float()`` instead of ``int()`` (4.9 stays 4.9, ``"4.5"`` is read).
Everything else is HELM's: the greedy ``\\{.*\\}``, the one retry with ``}``, every key of the reply averaged, no
range check, 1.0 when no judge is left. Where the fork's metric would crash the run (a criterion that is not an
object with a ``score``, a score ``float()`` cannot read) the judge is rejected with the reason instead.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest
import pytester_runs
from fuzzing import examples, fuzz
from judge_replies import CRITERIA, FOURS, TABLE, obj
from pytester_runs import NO_BERTSCORE, SUITE

from pytest_medhelm.jury import FLAG_NO_JUDGE, jury_score
from pytest_medhelm.values import Completion

#: medhelm 0.8.0's mean for each row of the helm/default table (None: the judge is rejected)
MEDHELM = {
    "valid": 4.0,
    "float score truncated by int()": 4.3,
    "string score": 10 / 3,
    "string float score": 12.5 / 3,
    "4/5": None,  # float("4/5") raises: the fork's metric would crash
    "extra criterion averaged by HELM": 4.25,
    "extra bare number: HELM's metric would crash": None,  # so would the fork's (5["score"])
    "missing criterion": None,
    "no explanation": 4.0,  # the fork no longer checks the sub-keys
    "score 0 as in HELM's example": 8 / 3,
    "score 7": 5.0,
    "score exactly 1": 3.0,
    "score exactly 5": 13 / 3,
    "score true": 3.0,  # float(True) == 1.0, as int(True) == 1
    "[score, explanation] list": None,  # passes validation now, then [4, "ok"]["score"] crashes the metric
    "criterion as a string naming the sub-keys": None,  # likewise: "…"["score"]
    "code fence": 4.0,
    "prose with a stray { before the JSON": None,
    "two objects": None,
    "outer brace missing": 4.0,
    "cut in the last criterion": None,
    "raw newline inside a string": None,
    "no JSON": None,
    "empty": None,
    "single quotes": None,
}

#: rows only the fork's reading tells apart: (id, reply, default, helm, medhelm)
MORE = [
    ("float 4.9 kept, no explanation", json.dumps({c: {"score": 4.9} for c in CRITERIA}), 4.9, None, 4.9),
    ("explanation but no score", json.dumps({**{c: {"score": 4, "explanation": "ok"} for c in CRITERIA[:2]},
                                             CRITERIA[2]: {"explanation": "no score given"}}), None, None, None),
    ("NaN score", obj({**FOURS, "clarity": "nan"}), None, None, None),
    ("infinite score", obj({**FOURS, "clarity": "inf"}), None, None, None),
    ("extra key without explanation", obj(FOURS, overall={"score": 2}), 4.0, 3.5, 3.5),
]

ROWS = [(row[0], row[1], row[2], row[3], MEDHELM[row[0]]) for row in TABLE] + MORE


def test_the_table_covers_every_helm_row() -> None:
    assert set(MEDHELM) == {row[0] for row in TABLE}


@pytest.mark.parametrize("compat", ["default", "helm", "medhelm"])
@pytest.mark.parametrize(("reply", "default", "helm", "medhelm"), [row[1:] for row in ROWS], ids=[r[0] for r in ROWS])
def test_one_judges_reply_per_mode(reply: str, default: float | None, helm: float | None, medhelm: float | None,
                                   compat: str) -> None:
    expected = {"default": default, "helm": helm, "medhelm": medhelm}[compat]
    result = jury_score("aci_bench", {"judge": Completion(text=reply)}, CRITERIA, answer="a note", compat=compat)
    if expected is None:
        assert result.flagged == FLAG_NO_JUDGE and result.raw == 1.0 and "judge" in result.failures
    else:
        assert result.flagged is None and result.failures == {}
        assert result.raw == pytest.approx(expected)


def test_a_rejected_reply_says_why_under_medhelm() -> None:
    replies = {"a": Completion(text=obj({**FOURS, "clarity": "4/5"})), "b": Completion(text=obj(FOURS, x=1)),
               "c": Completion(text=obj({**FOURS, "clarity": "nan"}))}
    result = jury_score("aci_bench", replies, CRITERIA, answer="x", compat="medhelm")
    assert result.failures == {
        "a": "clarity: score '4/5' is not a number to HELM's float() (its metric would crash on it)",
        "b": "x: 1 has no 'score' (HELM's metric would crash on it)",
        "c": "clarity: score 'nan' is not a finite number (the mean would be NaN)",
    }
    helm = jury_score("aci_bench", {"a": replies["a"]}, CRITERIA, answer="x", compat="helm")
    assert helm.failures == {"a": "clarity: score '4/5' is not an integer to HELM's int() (its metric would crash "
                                  "on it)"}


# ------------------------------------------------------------------------------------------------ through the plugin
#: judge-a's reply: a float score, a criterion without explanation, a string score, an extra key
ODD = json.dumps({"accuracy": {"score": 4.5, "explanation": "mostly right"}, "completeness": {"score": 4},
                  "clarity": {"score": "3", "explanation": "dense"}, "overall": {"score": 5}})
WELL_FORMED = json.dumps({c: {"score": 4, "explanation": f"{c} fine"} for c in CRITERIA})
#: the mean per mode: default reads both (the extra key ignored), helm drops judge-a, medhelm averages every key
EXPECTED_RAW = {"default": (4.5 + 4 + 3 + 12) / 6, "helm": 4.0, "medhelm": (4.5 + 4 + 3 + 5 + 12) / 7}


def answer_or_judge(body: dict) -> str:
    if body["model"] == "judge-a":
        return ODD
    if body["model"] == "judge-b":
        return WELL_FORMED
    return "That sounds hard. What has helped you before?"


def write_mentalhealth(data: Path) -> None:
    folder = data / "mentalhealth"
    folder.mkdir(parents=True, exist_ok=True)
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(["topic", "dialogue_type", "context", "gold_counselor_response"])
    writer.writerow(["stress", "support", "Client: synthetic, I cannot sleep.", "Tell me more about your nights."])
    writer.writerow(["grief", "support", "Client: synthetic, I miss my dog.", "Losing a pet is painful."])
    (folder / "processed_dialogues.csv").write_text(text.getvalue(), encoding="utf-8")


@pytest.mark.parametrize("xdist", [pytest.param(["-p", "no:xdist"], id="serial"),
                                   pytest.param(["-n", "2"], id="xdist-2", marks=pytest.mark.e2e)])
def test_jury_scores_per_mode_through_the_plugin(pytester: pytest.Pytester, shared_data: Path,
                                                 xdist: list[str]) -> None:
    """Two judges on a private open-ended benchmark: HELM's judge prompts in every mode (the same sha256), the
    jury's mean per mode as the fork's and HELM's rules give it."""
    from pytest_medhelm.testing.server import running_server

    if not (shared_data / "helm_jury").is_dir():
        pytest.skip("../shared/data lacks helm_jury (HELM's judge prompts)")
    data = pytester.path / "data"
    write_mentalhealth(data)
    shutil.copytree(shared_data / "helm_jury", data / "helm_jury")
    judge_prompts = {}
    # under xdist, helm's and medhelm's modes: the option reaches the workers (medhelm's reading differs from the
    # default's), and helm's is the only check under xdist of a judge failing on an item that is still scored; the
    # default mode's prompts and mean are the serial variant's
    modes = ({compat: EXPECTED_RAW[compat] for compat in ("helm", "medhelm")} if pytester_runs.starts_xdist(xdist)
             else EXPECTED_RAW)
    for compat, raw in modes.items():
        out = pytester.path / f"{compat}.json"
        with running_server(answer="x") as server:
            server.set_answer(answer_or_judge)
            result = pytester_runs.run(pytester, str(SUITE), "--medhelm-model", "openai/writer", "--medhelm-api-base",
                                       server.url, "--medhelm-jury", "openai/judge-a", "--medhelm-jury",
                                       "openai/judge-b", "--medhelm-jury-api-base", server.url, "--medhelm-benchmark",
                                       "mentalhealth", "--medhelm-data-dir", str(data), "--medhelm-cache", "off",
                                       "--medhelm-compat", compat, "--medhelm-json", str(out), *NO_BERTSCORE,
                                       *xdist)  # (BERTScore is not under test here)
            assert result.ret == 0, result.stdout.str()[-3000:]
            judge_prompts[compat] = sorted(r["json"]["messages"][0]["content"] for r in server.requests
                                           if r["json"]["model"].startswith("judge"))
        report = json.loads(out.read_text())
        assert report["run"]["compat"] == compat and report["run"]["jury_prompts"] == "helm@ef439fc"
        [bench] = report["benchmarks"]
        assert bench["raw_mean"] == pytest.approx(raw), compat
        for record in report["instances"]:
            assert record["raw_score"] == pytest.approx(raw)
            jury = record["metrics"]["jury"]
            if compat == "helm":
                assert set(jury["per_judge"]) == {"openai/judge-b"}
                assert jury["failures"] == {"openai/judge-a": "completeness: no 'explanation'"}
            else:
                assert set(jury["per_judge"]) == {"openai/judge-a", "openai/judge-b"}
            if compat == "medhelm":
                assert jury["per_judge"]["openai/judge-a"]["overall"]["score"] == 5.0
                assert jury["per_judge"]["openai/judge-a"]["accuracy"]["score"] == 4.5
    assert len(judge_prompts["medhelm"]) == 4
    assert all(prompts == judge_prompts["medhelm"] for prompts in judge_prompts.values())


# ------------------------------------------------------------------------------------------------ fuzzing
FUZZ_EXAMPLES = 1500


def _values():
    from hypothesis import strategies as st

    scalar = (st.none() | st.booleans() | st.integers(-10**20, 10**20) | st.floats(allow_nan=True, allow_infinity=True)
              | st.sampled_from(["4", "4.5", "nan", "inf", "-inf", "4/5", "1e309", " 3 ", "", "score"])
              | st.text(max_size=8))
    return st.recursive(scalar, lambda inner: st.lists(inner, max_size=3)
                        | st.dictionaries(st.sampled_from(["score", "explanation", "x"]), inner, max_size=3),
                        max_leaves=8)


def test_the_medhelm_reading_never_breaks_on_any_reply() -> None:
    """Replies built from the criteria with any values (and garbled around): the medhelm reading gives finite
    scores or rejects the judge with a reason; it never raises anything else, in any mode."""
    import math

    from hypothesis import given
    from hypothesis import strategies as st

    score = (st.integers(-3, 9) | st.floats(allow_nan=True, allow_infinity=True) | st.booleans()
             | st.sampled_from(["4", "4.5", "nan", "inf", "1e309", "4/5", " 3 "]) | _values())
    criterion = (st.fixed_dictionaries({"score": score}, optional={"explanation": st.text(max_size=5)})
                 | _values())
    # every criterion present (then the reading decides), extra keys sometimes, a criterion sometimes missing
    reply = (st.fixed_dictionaries(dict.fromkeys(CRITERIA, criterion), optional={"overall": criterion, "x": _values()})
             | st.dictionaries(st.sampled_from([*CRITERIA, "Accuracy"]), criterion, max_size=3)).map(json.dumps)
    # a well-formed reply too, so that the judge kept is a path taken often, not only by chance
    well_formed = st.fixed_dictionaries(dict.fromkeys(CRITERIA, st.fixed_dictionaries(
        {"score": st.integers(1, 5)}, optional={"explanation": st.text(max_size=5)}))).map(json.dumps)
    garbled = st.tuples(st.text(max_size=10), reply | well_formed,
                        st.sampled_from(["", "}", "{", "\n```", ","])).map("".join)
    tried: list[str] = []
    medhelm_read = {True: 0, False: 0}  # judge kept / rejected under medhelm

    @fuzz(FUZZ_EXAMPLES, database=None)
    @given(text=well_formed | reply | garbled | st.text(max_size=40))
    def check(text: str) -> None:
        tried.append(text)
        for compat in ("medhelm", "helm", "default"):
            result = jury_score("aci_bench", {"judge": Completion(text=text)}, CRITERIA, answer="x", compat=compat)
            assert math.isfinite(result.raw)
            assert (result.flagged is None) == ("judge" in result.per_judge)
            assert all(math.isfinite(v["score"]) for scores in result.per_judge.values() for v in scores.values())
            if compat == "medhelm":
                medhelm_read[result.flagged is None] += 1

    check()
    assert len(tried) >= examples(FUZZ_EXAMPLES) // 2
    # both paths exercised: replies kept and rejected (well-formed replies are about a quarter of the inputs; at
    # least 1 in 20 is asked of each path. Without that branch kept ones were some 5 %, and 1 in 60 failed by chance)
    assert min(medhelm_read.values()) >= max(5, len(tried) // 20), medhelm_read
