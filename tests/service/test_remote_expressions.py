"""Expressions the in-process engine has no exact rule for are evaluated by Spark on the
operator's delta rows, and the rest of the maintenance stays incremental (not a recapture).

The oracle: after every round of random deltas, the maintained sketch equals a fresh capture
and the sketched query equals the plain one."""

from __future__ import annotations

import pytest

from sketch_core.datasets import synthetic_table
from sketch_core.datasets.deltas import DeltaGenerator
from sketch_core.errors import SparkQueryError
from sketch_core.service import SketchService
from tests.oracles.results import sorted_rows
from tests.service.test_maintain import fresh_fragments, maintained

# MD5, a ROUND of a double and % are outside the engine's rules: in a selection, in an
# aggregation's argument (and so in HAVING), and in a join condition beside the equality.
AGGREGATE = (
    "SELECT a, SUM(ROUND(c / 7, 1)) AS s, COUNT(*) AS n FROM {t} "
    "WHERE MD5(CAST(b AS STRING)) > '4' GROUP BY a HAVING SUM(ROUND(c / 7, 1)) > 0"
)
JOIN = (
    "SELECT t.a, COUNT(*) AS n FROM {t} AS t JOIN {o} AS o ON t.a = o.a AND t.b % 7 = o.b % 7 "
    "GROUP BY t.a HAVING COUNT(*) > 3"
)


@pytest.mark.parametrize("template", [AGGREGATE, JOIN], ids=["aggregate", "join"])
def test_refused_expressions_are_evaluated_on_spark_and_maintenance_stays_incremental(
    spark_svc: SketchService, ns: str, template: str
) -> None:
    svc = spark_svc
    table, other = f"{ns}.facts", f"{ns}.other"
    svc.tables.create(table, synthetic_table(3000, 60, seed=11), sort_by=["a"])
    svc.tables.create(other, synthetic_table(300, 60, seed=12), sort_by=["a"])
    sql = template.format(t=table, o=other)
    name = f"{ns}_remote"
    svc.capture(sql, name=name, attributes={table: "a"}, fragments=30)
    assert maintained(svc, name)[table], "the query keeps some fragments"
    facts = DeltaGenerator(svc.tables, table, ("key",), seed=13)
    for make in (facts.inserts, facts.deletes, facts.mixed):
        sequence = make(60).apply(svc.tables)
        (run,) = svc.maintain(name)  # auto: no recapture for an expression Spark evaluates
        assert run.strategy == "incremental"
        assert maintained(svc, name) == fresh_fragments(svc, sql, name, sequence)
        with_sketch = svc.query(sql, use_sketches="always")
        assert with_sketch.sketch is not None and with_sketch.sketch[0] == name
        assert sorted_rows(with_sketch.table) == sorted_rows(svc.query(sql, use_sketches=False).table)
    engine = svc.kept_engine(name)
    assert engine is not None and engine.remote_expressions, "the refused expressions ran on Spark"


def test_without_ansi_mode_spark_evaluates_the_expressions_and_maintenance_stays_exact(
    spark_svc: SketchService, ns: str
) -> None:
    svc = spark_svc
    table = f"{ns}.facts"
    svc.tables.create(table, synthetic_table(3000, 60, seed=14), sort_by=["a"])
    # b / (a - 5) divides by zero where a = 5: NULL without ANSI mode, an error with it. The
    # engine's rules are ANSI mode's, so here Spark evaluates every expression.
    sql = (
        f"SELECT a, COUNT(*) AS n, SUM(b / (a - 5)) AS s FROM {table} "
        "WHERE b / (a - 5) > 1 GROUP BY a HAVING COUNT(*) > 20"
    )
    with pytest.raises(SparkQueryError, match="DIVIDE_BY_ZERO"):
        svc.query(sql, use_sketches=False)
    name = f"{ns}_no_ansi"
    key = "spark.sql.ansi.enabled"
    before = svc.spark.conf.get(key)
    svc.spark.conf.set(key, "false")
    try:
        svc.capture(sql, name=name, attributes={table: "a"}, fragments=30)
        facts = DeltaGenerator(svc.tables, table, ("key",), seed=15)
        for make in (facts.inserts, facts.mixed):
            sequence = make(60).apply(svc.tables)
            (run,) = svc.maintain(name)
            assert run.strategy == "incremental"
            assert maintained(svc, name) == fresh_fragments(svc, sql, name, sequence)
            plain = svc.query(sql, use_sketches=False)
            assert sorted_rows(svc.query(sql, use_sketches="always").table) == sorted_rows(plain.table)
        engine = svc.kept_engine(name)
        assert engine is not None and "b / (a - 5) > 1" in " ".join(engine.remote_expressions)
    finally:
        svc.spark.conf.set(key, before)
