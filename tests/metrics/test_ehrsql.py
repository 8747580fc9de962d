"""EHRSQL's execution accuracy (metrics/ehrsql.py) on a synthetic database: answerable and not, gold repairs, limits."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from catalogue_helpers import (
    ROUTE_QUERY,
    make_database,
    sql_instance,
)

from pytest_medhelm.metrics.ehrsql import (
    EhrSqlExecutionAccuracy,
    extract_sql,
    normalize_gold_sql,
    run_query,
)
from pytest_medhelm.values import Instance

BOTH = ("default", "helm")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return make_database(tmp_path / "db" / "eicu.sqlite")


@pytest.mark.parametrize("compat", BOTH)
@pytest.mark.parametrize(
    ("answer", "accuracy", "validity"),
    [
        ("SELECT routeadmin FROM medication WHERE drugname = 'aspirin 81 mg';", 1.0, 1.0),
        # a set comparison: order and duplicates do not matter
        ("SELECT routeadmin FROM medication WHERE drugname = 'aspirin 81 mg' ORDER BY medicationid DESC", 1.0, 1.0),
        ("<sql>SELECT routeadmin FROM medication WHERE drugname = 'aspirin 81 mg'</sql>", 1.0, 1.0),
        ("Here it is: < SQL >SELECT routeadmin FROM medication WHERE medicationid = 1</sql> done", 1.0, 1.0),
        ("```sql\nSELECT routeadmin FROM medication WHERE medicationid = 3;\n```", 1.0, 1.0),
        ("SELECT drugname FROM medication WHERE medicationid = 1", 0.0, 1.0),
        ("SELECT routeadmin FROM medication", 0.0, 1.0),  # {po, iv} is not {po}
        ("SELECT route FROM medication", 0.0, 0.0),  # no such column
        ("SELECT routeadmin FROM medication; SELECT 1;", 0.0, 0.0),  # one statement at a time
        ("", 0.0, 0.0),
        ("<sql></sql>", 0.0, 0.0),  # no query generated, yet not an empty answer
    ],
)
def test_ehrsql_answerable(db: Path, answer: str, accuracy: float, validity: float, compat: str) -> None:
    instance = sql_instance(db, ROUTE_QUERY, {"drug_name": "aspirin 81 mg"})
    score = EhrSqlExecutionAccuracy().score(answer, instance, compat=compat)
    assert (score.value, score.extra["ehr_sql_query_validity"]) == (accuracy, validity), score.detail
    answered = float(bool(answer.strip()))
    assert score.extra["ehr_sql_total_predicted_answerable"] == answered
    assert score.extra["ehr_sql_total_ground_truth_answerable"] == 1.0
    assert score.extra["ehr_sql_precision_answerable"] == score.extra["ehr_sql_recall_answerable"] == answered


def test_ehrsql_unanswerable(db: Path) -> None:
    instance = sql_instance(db, "null", impossible=True)
    metric = EhrSqlExecutionAccuracy()
    for compat in BOTH:
        assert metric.score("", instance, compat).value == 1.0
        assert metric.score("  \n", instance, compat).value == 1.0
        assert metric.score("SELECT 1 WHERE 0", instance, compat).value == 0.0  # an empty result is not abstaining
    # answerability: from the data's is_impossible flag in both modes (HELM 0.5.16 reads it from extra_data:
    # answerable = not is_impossible and bool(gold query))
    for compat in BOTH:
        empty = metric.score("", instance, compat).extra
        assert (empty["ehr_sql_total_ground_truth_answerable"], empty["ehr_sql_recall_answerable"]) == (0.0, 0.0)
        query = metric.score("SELECT 1", instance, compat).extra
        assert (query["ehr_sql_total_predicted_answerable"], query["ehr_sql_precision_answerable"]) == (1.0, 0.0)
        assert query["ehr_sql_total_ground_truth_answerable"] == 0.0 and query["ehr_sql_recall_answerable"] == 0.0
    # a question not flagged impossible counts as answerable in HELM's mode whatever its gold query's text
    flagged_possible = sql_instance(db, "null", impossible=False)
    helm = metric.score("SELECT 1", flagged_possible, "helm").extra
    assert (helm["ehr_sql_total_ground_truth_answerable"], helm["ehr_sql_precision_answerable"]) == (1.0, 1.0)
    assert metric.score("SELECT 1", flagged_possible).extra["ehr_sql_total_ground_truth_answerable"] == 0.0
    assert not any(metric.score(a, instance, c).not_scored for a in ("", "SELECT 1") for c in BOTH)
    detail = metric.score("SELECT 1", instance).detail
    assert detail.startswith("unanswerable question: expected an empty answer")


def test_ehrsql_empty_gold_result_default_and_helm(db: Path) -> None:
    # an answerable question whose gold query finds nothing on this database
    gold = "select medication.routeadmin from medication where medication.drugname = 'warfarin 5 mg'"
    metric = EhrSqlExecutionAccuracy()
    with_value = sql_instance(db, gold, {"drug_name": "warfarin 5 mg"})
    right = "SELECT routeadmin FROM medication WHERE drugname = 'warfarin 5 mg'"
    # default: an empty gold result tells no answer from another: not scored, whatever the answer
    for answer in (right, "", "SELECT 1 WHERE 0", "SELECT 1"):
        score = metric.score(answer, with_value)
        assert score.not_scored and score.not_scored.startswith("the gold query returns no rows on this database")
        assert score.value == 0.0 and score.detail.startswith("not scored: the gold query returns no rows")
    assert metric.score("SELECT 1", with_value).extra["ehr_sql_query_validity"] == 1.0  # still recorded
    # the same question on a database where its gold query returns rows is scored again (per item)
    with sqlite3.connect(db) as connection:
        connection.execute("INSERT INTO medication (medicationid, patientunitstayid, drugname, routeadmin) "
                           "VALUES (99, 10, 'warfarin 5 mg', 'po')")
    assert metric.score(right, with_value).not_scored is None and metric.score(right, with_value).value == 1.0
    assert metric.score("SELECT 1 WHERE 0", with_value).value == 0.0
    assert metric.score("", with_value).value == 0.0  # abstaining on an answerable question is wrong
    with sqlite3.connect(db) as connection:
        connection.execute("DELETE FROM medication WHERE medicationid = 99")
    # HELM: the template value ["warfarin 5 mg"] stands in for the gold result: nothing can match it
    assert metric.score(right, with_value, "helm").value == 0.0
    assert metric.score("", with_value, "helm").value == 0.0
    assert metric.score("SELECT 'warfarin 5 mg'", with_value, "helm").value == 0.0  # rows are tuples, not strings
    assert not any(metric.score(a, with_value, "helm").not_scored for a in (right, "", "SELECT 1"))
    # HELM without template values: only an empty answer scores
    no_value = sql_instance(db, gold, {})
    assert metric.score("", no_value, "helm").value == 1.0
    assert metric.score(right, no_value, "helm").value == 0.0
    assert "HELM's rule" in metric.score("", no_value, "helm").detail


def test_ehrsql_gold_repairs(db: Path) -> None:
    metric = EhrSqlExecutionAccuracy()
    # %y: SQLite gives no four-digit year, so HELM's gold finds nothing; repaired to %Y by default
    year = sql_instance(db, "select count(*) from medication where strftime('%y',medication.drugstarttime) = '2104'",
                        {"year": "2104"})
    assert metric.score("SELECT COUNT(*) FROM medication WHERE drugstarttime LIKE '2104%'", year).value == 1.0
    # vital-sign placeholders: HELM's gold fails ("no such column"), repaired with EHRSQL's normal ranges
    vitals = sql_instance(db, "select count(*)>0 from vitalperiodic where vitalperiodic.patientunitstayid = 10 and "
                              "vitalperiodic.heartrate between heart_rate_lower and heart_rate_upper", {})
    assert normalize_gold_sql(vitals.references[0]).endswith("heartrate between 60.0 and 100.0")
    good = "SELECT COUNT(*) > 0 FROM vitalperiodic WHERE patientunitstayid = 10 AND heartrate BETWEEN 60 AND 100"
    assert metric.score(good, vitals).value == 1.0
    assert metric.score(good, vitals, "helm").value == 0.0
    assert metric.score("", vitals, "helm").value == 1.0  # HELM: gold error and no values: abstaining "wins"


def test_ehrsql_gold_failure_is_not_scored_with_the_reason(db: Path) -> None:
    instance = sql_instance(db, "select nothing from nowhere")
    score = EhrSqlExecutionAccuracy().score("SELECT 1", instance)
    assert score.not_scored == 'the gold query fails on this database (near "nothing": syntax error)'
    assert score.value == 0.0 and "the gold query fails" in score.detail
    assert not EhrSqlExecutionAccuracy().score("SELECT 1", instance, "helm").not_scored


def test_ehrsql_database_is_read_only(db: Path) -> None:
    metric = EhrSqlExecutionAccuracy()
    instance = sql_instance(db, "select count(*) from patient")
    for statement in ("DELETE FROM patient", "DROP TABLE patient", "INSERT INTO patient VALUES ('x', 3, '1', 'y')",
                      f"ATTACH DATABASE '{db.parent / 'other.sqlite'}' AS other"):
        score = metric.score(statement, instance)
        assert (score.value, score.extra["ehr_sql_query_validity"]) == (0.0, 0.0), statement
        assert score.detail.startswith("query error:")
    assert run_query(db, "SELECT COUNT(*) FROM patient") == [(2,)]
    assert not (db.parent / "other.sqlite").exists()


def test_ehrsql_time_limit(db: Path) -> None:
    endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT COUNT(*) FROM c"
    metric = EhrSqlExecutionAccuracy(time_limit=0.2)
    score = metric.score(endless, sql_instance(db, "select count(*) from patient"))
    assert score.value == 0.0 and "time limit of 0.2 s exceeded" in score.detail


def test_ehrsql_row_cap(db: Path) -> None:
    metric = EhrSqlExecutionAccuracy(max_rows=3)
    score = metric.score("SELECT * FROM medication, patient", sql_instance(db, "select count(*) from patient"))
    assert score.value == 0.0 and "more than 3 rows" in score.detail


def test_ehrsql_metric_needs_the_database() -> None:
    with pytest.raises(ValueError, match="db_path"):
        EhrSqlExecutionAccuracy().score("SELECT 1", Instance(id="e", input="?", references=("select 1",)))


@pytest.mark.parametrize(
    ("answer", "sql"),
    [
        ("SELECT 1;", "SELECT 1;"),
        ("  <sql> SELECT 1 </sql>  ", "SELECT 1"),
        ("<SQL>SELECT 1<SQL>", "SELECT 1"),  # HELM accepts an unslashed closing tag
        ("```sql\nSELECT 1\n```", "SELECT 1"),
        ("`SELECT 1`", "SELECT 1"),
        ("```\nSELECT 1\n```", "SELECT 1"),
        ("Sure.\nsql\nSELECT 1", "Sure.\nSELECT 1"),  # a "sql" line is dropped wherever it is
        ("", ""),
    ],
)
def test_extract_sql(answer: str, sql: str) -> None:
    assert extract_sql(answer) == sql
