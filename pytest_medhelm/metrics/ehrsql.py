"""EHRSQL execution accuracy (HELM ``EhrSqlAnnotator`` + ``EhrSqlMetric``).

The gold SQL and the model's SQL are both run against the benchmark's SQLite database (``Instance.extra["db_path"]``)
and their result sets compared. Per instance:

* ``ehr_sql_execution_accuracy`` (the main score, 0/1);
* in ``Score.extra``: ``ehr_sql_query_validity`` (the answer is non-empty and its SQL ran without error),
  ``ehr_sql_precision_answerable`` and ``ehr_sql_recall_answerable`` (HELM's per-instance values: 1 when both the
  question is answerable and the model answered, counted over predicted-answerable resp. answerable items; the
  benchmark means are averages over *all* items, as HELM reports them, not true precision and recall), and
  ``ehr_sql_total_predicted_answerable`` / ``ehr_sql_total_ground_truth_answerable``.

The model's SQL is taken as HELM does: the text inside ``<sql>…</sql>`` when present, else the whole answer; every
backtick removed; a leading ``sql`` line (of a code fence) dropped. An *empty answer* means "unanswerable".

Both modes (safety; HELM differs, unavoidably):

* Queries run in a sandbox (:mod:`pytest_medhelm.metrics.sql_sandbox`): a separate, recycled child process with
  a memory limit and SQLite's heap limit, on a **read-only** connection, behind an allow-list authorizer (SELECT,
  reading the database's tables, recursive CTEs, pure functions; no PRAGMA, ATTACH, writes, ``load_extension``,
  ``fts3_tokenizer``, ``zeroblob``), with a maximum value length, a time limit per query (SQLite's progress
  handler, and a kill of the child past it), and caps on the rows and bytes fetched. So a model's ``DELETE``
  cannot change the database for the items after it (HELM opens it read-write: such a statement would run, count
  as valid, and alter the data), a ``PRAGMA hard_heap_limit`` or ``temp_store_directory`` cannot change the
  pytest process (SQLite's settings are per process), and a runaway join, recursive query or huge value cannot
  hang the run or exhaust its memory. A statement refused, interrupted or over a limit is a query error (validity
  0, accuracy 0) whose detail names the reason. HELM catches only ``OperationalError`` and ``Warning`` from the
  model's query; here every ``sqlite3`` error is a query error.

Differences by default (``compat="helm"`` keeps HELM's behaviour for each):

1. **No fallback to ``value``.** When the gold query returns no rows (or fails), HELM replaces its result by the
   question's template slot values (``extra["value"]``, e.g. ``["warfarin sodium 2.5 mg po tabs"]``): strings, not
   result rows, which no query result can equal. On MedHELM's 7-patient database most answerable gold queries
   return no rows, so HELM scores those items 0 whatever the model writes (and 1 for an *empty* answer when the
   question has no slot values). By default the gold result is the gold query's own result.
2. **An answerable question whose gold result is empty on the database in use is not scored.** On MedHELM's
   7-patient database 1,091 of the 1,959 answerable gold queries return no rows: any valid query that returns
   nothing (``SELECT 1 WHERE 0``) would match them, so a constant answer would score about 0.375 on the full set.
   Such an item tells no answer from another: it counts neither for nor against (``Score.not_scored`` gives the
   reason; the run records the item with score null and ``not_scored``, reports it as skipped, and counts it in
   the benchmark's ``n_not_scored``). The decision is per item, on the database the run uses: with a full eICU
   database where the gold query returns rows, the item counts again. A constant query that returns nothing then
   scores 0, and an empty answer only the unanswerable questions it gets right. An answerable question is never
   answered by abstaining (an empty answer). HELM requires an empty *answer* on an empty gold result. (Under
   HELM's rules the gold query itself, given as the answer, scores on only 845 of the 1,959: those whose result
   has rows.)
3. **The gold SQL is normalised as EHRSQL's official scorer does** (glee4810/EHRSQL ``post_process_sql``), for the
   two rewrites that repair the gold query itself: ``strftime('%y', …)`` becomes ``'%Y'`` (SQLite 3.40 returns
   NULL for ``%y``, and releases that know it give a two-digit year, so ``strftime('%y', t) = '2103'`` is never
   true: 349 gold queries, 23 of whose results change on the pinned database), and the vital-sign placeholders
   ``heart_rate_lower`` … ``mean_bp_upper`` (8 gold queries, which fail with "no such column") become EHRSQL's
   normal ranges. Its other rewrites are not applied: ``current_time`` stays SQLite's clock (a time of day, read
   as 2000-01-01 by the date functions; the prompt does not tell the model EHRSQL's "now", 2105-12-31 23:59:00,
   so a model's ``'now'`` and the gold's ``current_time`` both lie before the data's years 2100-2105, as in HELM),
   and ``%j`` stays day-of-year.
4. **A gold query that still fails is not scored** either (no such query in the pinned data once normalised): the
   reason names the error. HELM scores it through the ``value`` fallback.

``compat="medhelm"`` is HELM's behaviour with medhelm 0.8.0's two changes to the annotator: every
``current_time`` of the gold query (any case) becomes ``'2105-12-31 23:59:00'`` (EHRSQL's "now") before it runs
(:func:`medhelm_gold_sql`), and there is no fallback to ``value``. (Its scenario also drops the unanswerable
questions: :mod:`pytest_medhelm.catalogue.medical_research.ehrsql`.)

The secondary answerability values follow the data's ``is_impossible`` flag in both modes: HELM 0.5.16's scenario
keeps it in ``extra_data`` and its metric counts a question as answerable when ``not is_impossible and bool(gold
query)`` (1,959 of the 2,909). By default a gold query of ``"null"`` also counts as unanswerable (none in the pinned
data is both possible and ``"null"``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_medhelm.compat import is_medhelm, reproduces_helm
from pytest_medhelm.metrics.base import Score

if TYPE_CHECKING:  # pragma: no cover
    from pytest_medhelm.values import Instance

#: seconds a single query may run
QUERY_TIME_LIMIT = 10.0
#: rows a single query may return (the largest gold result on MedHELM's database is a few thousand)
MAX_ROWS = 200_000

_SQL_TAG = re.compile(r"<\s*sql\s*>(.*?)<\/?\s*sql\s*>", re.DOTALL | re.IGNORECASE)
_SQL_FENCE_LINE = re.compile(r"^sql\n", re.MULTILINE)

#: EHRSQL's ``__precomputed_dict``: the normal range of each vital sign, for ``<vital>_lower`` / ``<vital>_upper``
VITAL_RANGES: dict[str, tuple[float, float]] = {
    "temperature": (35.5, 38.1),
    "sao2": (95.0, 100.0),
    "heart_rate": (60.0, 100.0),
    "respiration": (12.0, 18.0),
    "systolic_bp": (90.0, 120.0),
    "diastolic_bp": (60.0, 90.0),
    "mean_bp": (60.0, 110.0),
}
_VITAL_PLACEHOLDER = re.compile(r"\b(" + "|".join(VITAL_RANGES) + r")_(lower|upper)\b")


class QueryError(Exception):
    """A query that did not produce a result: SQL error, refused statement, time limit, too many rows."""


def extract_sql(answer: str) -> str:
    """The SQL of a model's answer, as HELM's annotator extracts it."""
    text = answer.strip()
    match = _SQL_TAG.search(text)
    sql = match.group(1).strip() if match else text
    sql = sql.replace("`", "").strip()
    return _SQL_FENCE_LINE.sub("", sql)


def normalize_gold_sql(sql: str) -> str:
    """The two repairs of EHRSQL's official scorer that apply to the gold query (module docstring, item 3)."""
    sql = sql.replace("%y", "%Y")
    return _VITAL_PLACEHOLDER.sub(lambda m: str(VITAL_RANGES[m.group(1)][0 if m.group(2) == "lower" else 1]), sql)


#: medhelm 0.8.0's fixed "now" for the gold queries (EHRSQL's own, also named in that fork's prompt)
MEDHELM_CURRENT_TIME = "'2105-12-31 23:59:00'"
_CURRENT_TIME = re.compile("current_time", re.IGNORECASE)


def medhelm_gold_sql(sql: str) -> str:
    """The gold query as medhelm 0.8.0's annotator runs it: every ``current_time``, in any case, replaced by
    EHRSQL's fixed time (a plain text substitution, as the fork's, not limited to whole words)."""
    return _CURRENT_TIME.sub(MEDHELM_CURRENT_TIME, sql)


def run_query(db_path: str | Path, sql: str, time_limit: float = QUERY_TIME_LIMIT, max_rows: int = MAX_ROWS,
              one_row: bool = False) -> list[tuple]:
    """Run ``sql`` read-only in this process's SQL sandbox (:mod:`pytest_medhelm.metrics.sql_sandbox`) and return
    its rows (the first only when ``one_row``); :class:`QueryError` with the reason otherwise."""
    from pytest_medhelm.metrics.base import ScoringError
    from pytest_medhelm.metrics.sql_sandbox import BudgetSpent, SandboxError, sandbox

    path = Path(db_path)
    if not path.is_file():
        raise FileNotFoundError(f"EHRSQL database not found: {path}")
    try:
        return sandbox().run(str(path.resolve()), sql, time_limit, max_rows, one_row=one_row)
    except BudgetSpent as exc:  # no measurement: the item is an error saying so, never a wrong answer
        raise ScoringError(str(exc), {"sql sandbox": str(exc)}) from None
    except SandboxError as exc:
        raise QueryError(_bounded(str(exc))) from None


#: characters of one shown value (a row, an error) in a detail: a query can return megabytes in one value
SHOWN_CHARS = 200


def _bounded(text: str, limit: int = SHOWN_CHARS) -> str:
    return text if len(text) <= limit else f"{text[:limit - 1]}… ({len(text):,} characters)"


def _shown_rows(rows: Sequence[Any], limit: int = 3) -> str:
    shown = ", ".join(_bounded(repr(r)) for r in list(rows)[:limit])
    more = f", … ({len(rows)} rows)" if len(rows) > limit else ""
    return f"[{shown}{more}]"


def _shown(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


class EhrSqlExecutionAccuracy:
    name = "ehr_sql_execution_accuracy"
    binary = True
    pass_mark = 1.0

    def __init__(self, time_limit: float = QUERY_TIME_LIMIT, max_rows: int = MAX_ROWS) -> None:
        self.time_limit = time_limit
        self.max_rows = max_rows

    def _run(self, db_path: str, sql: str, one_row: bool = False) -> list[tuple]:
        return run_query(db_path, sql, self.time_limit, self.max_rows, one_row=one_row)

    # ------------------------------------------------------------------------------------------ gold results
    def _gold_helm(self, db_path: str, gold_sql: str, value: Any) -> tuple[list[Any], str | None]:
        """HELM's annotator: the gold rows, else the template values (type-cast to a row fetched again); no
        fallback when ``value`` is None (medhelm 0.8.0)."""
        error = None
        try:
            rows: list[Any] = self._run(db_path, gold_sql)
        except QueryError as exc:
            rows, error = [], str(exc)
        if not rows and isinstance(value, dict):
            values = list(value.values())
            try:
                fetched = self._run(db_path, gold_sql, one_row=True)
                if fetched:
                    rows = [type(fetched[0][i])(values[i]) for i in range(len(values))]
                else:
                    rows = values
            except (QueryError, IndexError, TypeError, ValueError):  # HELM: OperationalError only
                rows = values
        return rows, error

    def _gold_default(self, db_path: str, gold_sql: str) -> tuple[list[Any], str | None]:
        try:
            return self._run(db_path, normalize_gold_sql(gold_sql)), None
        except QueryError as exc:
            return [], str(exc)

    # ------------------------------------------------------------------------------------------------ score
    def score(self, answer: str, instance: Instance, compat: str = "default") -> Score:
        extra = instance.extra
        db_path = extra.get("db_path")
        if not db_path:
            raise ValueError(f"instance {instance.id!r} has no extra['db_path'] (the EHRSQL SQLite database)")
        if not instance.references:
            raise ValueError(f"instance {instance.id!r} has no gold query")
        helm = reproduces_helm(compat)
        gold_sql = instance.references[0].strip()
        is_impossible = bool(extra.get("is_impossible", False))
        prediction = answer.strip()
        pred_sql = extract_sql(answer)

        # the model's query (HELM: an empty extraction is "No query generated")
        pred_rows: list[tuple] = []
        pred_error: str | None = None
        if not pred_sql:
            pred_error = "no query generated"
        else:
            try:
                pred_rows = self._run(str(db_path), pred_sql)
            except QueryError as exc:
                pred_error = str(exc)
        query_validity = 1.0 if prediction and pred_error is None else 0.0

        not_scored: str | None = None
        if helm:
            # HELM 0.5.16: is_impossible from the instance's extra_data, and a non-empty gold query; medhelm 0.8.0
            # runs the gold query at EHRSQL's fixed time and has no fallback to the template values
            if is_medhelm(compat):
                gold_rows, gold_error = self._gold_helm(str(db_path), medhelm_gold_sql(gold_sql), None)
            else:
                gold_rows, gold_error = self._gold_helm(str(db_path), gold_sql, extra.get("value", {}))
            is_answerable = not is_impossible and bool(gold_sql)
            if not gold_sql:
                accuracy = 0.0
            elif gold_rows and pred_rows:
                accuracy = float(set(pred_rows) == set(gold_rows))
            else:
                accuracy = float(not gold_rows and not pred_rows and not prediction)
        else:
            is_answerable = not is_impossible and bool(gold_sql) and gold_sql.lower() != "null"
            if not is_answerable:
                gold_rows, gold_error = [], None
                accuracy = float(not prediction)
            else:
                gold_rows, gold_error = self._gold_default(str(db_path), gold_sql)
                accuracy = float(bool(prediction) and gold_error is None and pred_error is None
                                 and set(pred_rows) == set(gold_rows))
                if gold_error is not None:
                    not_scored = f"the gold query fails on this database ({gold_error})"
                elif not gold_rows:
                    not_scored = ("the gold query returns no rows on this database: any query returning nothing "
                                  "would match, so the item tells no answer from another")

        is_pred_answerable = bool(prediction)
        correct_answerable = float(is_answerable and is_pred_answerable)
        if not_scored is not None:
            accuracy = 0.0
            detail = f"not scored: {not_scored}; got {'an empty answer' if not prediction else _shown(prediction)}"
        else:
            detail = self._detail(accuracy, is_impossible, prediction, pred_rows, pred_error, gold_rows, helm)
        return Score(
            value=accuracy,
            detail=detail,
            not_scored=not_scored,
            extra={
                "ehr_sql_query_validity": query_validity,
                "ehr_sql_precision_answerable": correct_answerable if is_pred_answerable else 0.0,
                "ehr_sql_recall_answerable": correct_answerable if is_answerable else 0.0,
                "ehr_sql_total_predicted_answerable": float(is_pred_answerable),
                "ehr_sql_total_ground_truth_answerable": float(is_answerable),
            },
        )

    @staticmethod
    def _detail(accuracy: float, is_impossible: bool, prediction: str,
                pred_rows: list[tuple], pred_error: str | None, gold_rows: list[Any], helm: bool) -> str:
        got = "an empty answer" if not prediction else _shown(prediction)
        if not helm and is_impossible:
            verdict = "right" if accuracy else "wrong"
            return f"unanswerable question: expected an empty answer, got {got} ({verdict})"
        if not prediction:
            if accuracy:
                return "empty answer and empty gold result (right under HELM's rule)"
            expected = f"expected rows {_shown_rows(gold_rows)}" if gold_rows else "expected a query"
            return f"{expected}, got an empty answer"
        if pred_error is not None:
            return f"query error: {pred_error}; got {got}"
        if accuracy:
            return f"result matches the gold result {_shown_rows(gold_rows)}"
        return f"expected rows {_shown_rows(gold_rows)}, got rows {_shown_rows(pred_rows)} from {got}"


EHRSQL_EXECUTION_ACCURACY = EhrSqlExecutionAccuracy()
