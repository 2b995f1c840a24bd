"""A query text is parsed once and kept: its tables, template key, bound forms and IR come from
one object per text, the same whichever layer asks."""

from __future__ import annotations

import pytest

from sketch_core.algebra import query_text as module
from sketch_core.algebra.frontend import to_ir
from sketch_core.algebra.ir import PlanError
from sketch_core.algebra.query_text import QueryText, bind_tables, query_text, referenced_tables, template_key
from sketch_core.errors import QueryError, UnsupportedQueryError
from sketch_core.lru import LruMap

SQL = """
WITH big AS (SELECT region, amount FROM s.sales WHERE amount > :low)
SELECT b.region, SUM(b.amount) AS total FROM big b JOIN S.Regions r ON b.region = r.region
GROUP BY b.region
"""
SCHEMAS = {
    "s.sales": [("region", "string"), ("amount", "double")],
    "s.regions": [("region", "string")],
}


def test_one_object_per_text_holds_what_every_layer_asks() -> None:
    text = query_text(SQL)
    assert query_text(SQL) is text
    assert text.tables == ("s.regions", "s.sales") and referenced_tables(SQL) == ["s.regions", "s.sales"]
    assert template_key(SQL) == text.template_key == template_key(SQL.replace("  ", " "))
    assert template_key(SQL) != template_key(SQL.replace("> :low", ">= :low"))


def test_the_ir_is_made_once_per_schemas_and_parameters_and_equals_a_fresh_one() -> None:
    text = QueryText(SQL)
    first = text.to_ir(SCHEMAS, {"low": 10})
    assert text.to_ir(SCHEMAS, {"low": 10}) is first
    fresh = to_ir(SQL, SCHEMAS, {"low": 10})  # (sqlglot nodes compare by identity: compare the text)
    assert (repr(first.plan), first.output_names, first.sql) == (
        repr(fresh.plan),
        fresh.output_names,
        fresh.sql,
    )
    other = text.to_ir(SCHEMAS, {"low": 10.0})  # another type: another binding
    assert other is not first and "10.0" in other.sql


def test_a_catalog_qualified_name_is_its_table_and_the_catalog_is_kept_for_the_service() -> None:
    qualified = SQL.replace("FROM s.sales", "FROM lake.s.sales").replace(
        "JOIN S.Regions", "JOIN `Lake`.`S`.`Regions`"
    )
    text = QueryText(qualified)
    assert text.tables == ("s.regions", "s.sales") and text.catalogs == frozenset({"lake", "Lake"})
    assert QueryText(SQL).catalogs == frozenset()
    plain, named = to_ir(SQL, SCHEMAS, {"low": 1}), text.to_ir(SCHEMAS, {"low": 1})
    assert repr(named.plan) == repr(plain.plan)
    bound = text.bound_to({"s.sales": "v_sales", "s.regions": "v_regions"})
    assert "v_sales" in bound and "v_regions AS r" in bound and "lake" not in bound.lower()


def test_binding_reads_the_views_and_keeps_aliases() -> None:
    bound = bind_tables(SQL, {"s.sales": "v_sales", "s.regions": "v_regions"})
    assert "v_sales" in bound and "v_regions AS r" in bound and "s.sales" not in bound.lower()
    assert bind_tables(SQL, {"s.sales": "v_sales", "s.regions": "v_regions"}) is bound


def test_columns_named_with_the_full_table_name_read_the_bound_table() -> None:
    # Metabase prints `ns`.`table`.`column`; Spark resolves it against the unaliased table only.
    sql = (
        "SELECT `s`.`sales`.`region`, lake.s.sales.amount, r.region FROM `s`.`sales` "
        "JOIN s.regions r ON s.sales.region = r.region WHERE S.Sales.amount > 1"
    )
    bound = QueryText(sql).bound_to({"s.sales": "v_sales", "s.regions": "v_regions"})
    assert "FROM v_sales AS sales" in bound and "v_regions AS r" in bound
    assert "s.sales" not in bound.lower().replace("`", "") and "lake" not in bound.lower()
    assert "sales.region = r.region" in bound and "`sales`.`region`" in bound
    snapshot = QueryText(sql).bound_to_snapshots("lake", {"s.sales": 7, "s.regions": 8})
    assert snapshot.count("VERSION AS OF") == 2 and "lake.s.sales VERSION AS OF 7 AS sales" in snapshot
    assert "s.sales.amount" not in snapshot.lower()
    # An aliased table's full name resolves to nothing in Spark either: left as written.
    aliased = QueryText("SELECT s.sales.amount FROM s.sales x").bound_to({"s.sales": "v"})
    assert "s.sales.amount" in aliased


def test_optimizer_hints_name_aliases_not_tables() -> None:
    sql = (
        "SELECT /*+ BROADCAST(r), REPARTITION(4) */ r.region, SUM(x.amount) AS t "
        "FROM s.sales x JOIN s.regions r ON x.region = r.region GROUP BY r.region"
    )
    text = QueryText(sql)
    assert text.tables == ("s.regions", "s.sales")
    bound = text.bound_to({"s.sales": "v_sales", "s.regions": "v_regions"})
    assert "/*+ BROADCAST(r), REPARTITION(4) */" in bound  # the plain query keeps them for Spark
    plain = to_ir(sql.replace("/*+ BROADCAST(r), REPARTITION(4) */ ", ""), SCHEMAS)
    hinted = text.to_ir(SCHEMAS)
    assert repr(hinted.plan) == repr(plain.plan)


def test_the_cache_keeps_the_most_recently_used_texts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(module, "_texts", LruMap(2))
    first = query_text("SELECT 1 AS a FROM x.first")
    second = query_text("SELECT 1 AS a FROM x.second")
    assert query_text("SELECT 1 AS a FROM x.first") is first  # used again: kept
    query_text("SELECT 1 AS a FROM x.third")
    assert query_text("SELECT 1 AS a FROM x.first") is first
    assert query_text("SELECT 1 AS a FROM x.second") is not second  # dropped, parsed again


@pytest.mark.parametrize(
    ("sql", "error"),
    [
        ("SELECT FROM WHERE", QueryError),
        ("SELECT 1; SELECT 2", QueryError),
    ],
)
def test_a_text_that_does_not_parse_raises_every_time(sql: str, error: type[Exception]) -> None:
    for _ in range(2):
        with pytest.raises(error):
            query_text(sql)


def test_a_statement_that_is_not_a_query_has_tables_but_no_template() -> None:
    text = query_text("INSERT INTO s.sales SELECT * FROM s.staging")
    assert text.tables == ("s.sales", "s.staging")
    with pytest.raises(UnsupportedQueryError):
        _ = text.template_key


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT b, COUNT(*) AS n FROM sales GROUP BY b",  # a tool with a default schema prints this
        "WITH big AS (SELECT region FROM s.sales) SELECT region FROM big JOIN regions USING (region)",
    ],
)
def test_a_table_not_named_as_ns_table_is_named_in_the_error(sql: str) -> None:
    with pytest.raises(QueryError, match=r"must be named as ns\.table") as info:
        QueryText(sql).to_ir(SCHEMAS)
    assert "qualify it with its namespace" in str(info.value)
    # A CTE's name is no table, in any case.
    QueryText("WITH Big AS (SELECT region FROM s.sales) SELECT region FROM big").to_ir(SCHEMAS)


@pytest.mark.parametrize(
    ("sql", "construct"),
    [
        ("SELECT COUNT(*) FROM s.sales VERSION AS OF 4512", "time travel"),
        ("SELECT COUNT(*) FROM s.sales TIMESTAMP AS OF '2024-01-01 00:00:00'", "time travel"),
        ("SELECT COUNT(*) FROM s.sales TABLESAMPLE (10 PERCENT)", "TABLESAMPLE"),
        ("SELECT COUNT(*) FROM s.sales AS x TABLESAMPLE (5 ROWS)", "TABLESAMPLE"),
        ("SELECT COUNT(*) FROM lake.s.sales.snapshots", "metadata table"),
    ],
)
def test_reads_of_another_state_of_a_table_are_refused_not_read_as_the_pinned_one(
    sql: str, construct: str
) -> None:
    """The service reads every table at one commit: such a read got the pinned rows instead."""
    with pytest.raises(UnsupportedQueryError, match=construct):
        query_text(sql)


def test_a_table_named_by_identifier_is_that_table() -> None:
    """``IDENTIFIER('ns.table')``, Spark's clause for names built as strings, reads the table."""
    named = SQL.replace("FROM s.sales", "FROM IDENTIFIER('s.sales')").replace(
        "JOIN S.Regions r", "JOIN identifier('lake.s.regions') r"
    )
    text = QueryText(named)
    assert text.tables == ("s.regions", "s.sales") and text.catalogs == frozenset({"lake"})
    assert repr(text.to_ir(SCHEMAS, {"low": 1}).plan) == repr(to_ir(SQL, SCHEMAS, {"low": 1}).plan)
    assert "v_sales" in text.bound_to({"s.sales": "v_sales", "s.regions": "v_regions"})
    with pytest.raises(UnsupportedQueryError, match="IDENTIFIER"):
        QueryText("SELECT a FROM IDENTIFIER(:t)")


def test_a_plan_the_front_end_fails_to_build_is_a_typed_refusal(monkeypatch: pytest.MonkeyPatch) -> None:
    """A front-end bug a text finds (an IR invariant broken) is an UnsupportedQueryError, which
    the default query answers by running plain, never a ValueError out of the public API."""

    def broken(*_: object, **__: object) -> None:
        raise PlanError("two columns named x")

    monkeypatch.setattr("sketch_core.algebra.query_text.ir_from_tree", broken)
    with pytest.raises(UnsupportedQueryError, match="two columns named x") as refused:
        QueryText("SELECT region FROM s.sales").to_ir(SCHEMAS)
    assert refused.value.hint and "without sketches" in refused.value.hint
