"""Catalog views written in as derived tables: names qualified with the view's namespace,
renamed columns by position, and a view's metadata file (Iceberg's view spec, as Spark writes
it) read as its current version."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlglot import exp

from sketch_core.algebra.dialect import SPARK
from sketch_core.algebra.query_text import QueryText
from sketch_core.algebra.views import ViewDefinition, view_relation
from sketch_core.errors import QueryError
from sketch_core.tables.catalog_views import parse_view_metadata, read_view_metadata


def view(
    sql: str,
    columns: tuple[str, ...] = (),
    query_columns: tuple[str, ...] | None = None,
    catalog: str | None = None,
    namespace: str | None = "ns",
) -> ViewDefinition:
    return ViewDefinition("ns.v", sql, columns, query_columns, catalog, namespace)


def test_tables_named_without_a_namespace_get_the_views_own() -> None:
    relation = view_relation(
        view("WITH r AS (SELECT * FROM orders) SELECT * FROM r JOIN other.custs c ON r.k = c.k"), "lake"
    )
    printed = relation.sql(dialect=SPARK)
    assert "FROM lake.ns.orders" in printed and "JOIN other.custs" in printed
    assert "FROM r JOIN" in printed, "a CTE's name is not a table"


def test_a_view_made_in_another_catalog_cannot_name_its_tables_here() -> None:
    with pytest.raises(QueryError, match="reads table orders without a namespace, in catalog spark_catalog"):
        view_relation(view("SELECT * FROM orders", catalog="spark_catalog"), "lake")
    assert view_relation(view("SELECT * FROM lake.ns.orders", catalog="spark_catalog"), "lake") is not None


def test_renamed_columns_name_the_derived_table_by_position() -> None:
    renamed = view("SELECT k, SUM(x) FROM lake.ns.t GROUP BY k", ("key", "total"), ("k", "sum(x)"))
    relation = view_relation(renamed, "lake")
    assert [c.name for c in relation.args["alias"].columns] == [
        "key",
        "total",
    ]
    same = view_relation(view("SELECT k FROM lake.ns.t", ("k",), ("k",)), "lake")
    assert same.args.get("alias") is None, "names as the query gives them: no list"
    # Written in for the reference, under its alias, with the view's names.
    text = QueryText("SELECT v.key FROM ns.v AS v WHERE v.total > 3")
    inlined = text.inlined({"ns.v": relation})
    assert inlined == (
        "SELECT v.key FROM (SELECT k, SUM(x) FROM lake.ns.t GROUP BY k) AS v(`key`, `total`) "
        "WHERE v.total > 3"
    )


def test_a_views_metadata_is_read_as_its_current_version() -> None:
    metadata = {
        "current-version-id": 2,
        "properties": {"spark.query-column-names": "cust,sum(amt)"},
        "schemas": [
            {"schema-id": 0, "fields": [{"id": 0, "name": "cust"}]},
            {"schema-id": 1, "fields": [{"id": 0, "name": "customer"}, {"id": 1, "name": "total"}]},
        ],
        "versions": [
            {"version-id": 1, "schema-id": 0, "representations": [{"type": "sql", "sql": "SELECT 1"}]},
            {
                "version-id": 2,
                "schema-id": 1,
                "default-namespace": ["vw"],
                "representations": [
                    {"type": "sql", "sql": "SELECT cust FROM t", "dialect": "trino"},
                    {"type": "sql", "sql": "SELECT cust, SUM(amt) FROM t GROUP BY cust", "dialect": "spark"},
                ],
            },
        ],
    }
    found = parse_view_metadata("vw.per_customer", metadata)
    assert found == ViewDefinition(
        "vw.per_customer",
        "SELECT cust, SUM(amt) FROM t GROUP BY cust",
        ("customer", "total"),
        ("cust", "sum(amt)"),
        None,
        "vw",
    )
    with pytest.raises(QueryError, match="no current version"):
        parse_view_metadata("vw.x", {**metadata, "current-version-id": 9})
    assert isinstance(view_relation(found, "lake").this, exp.Select)


def test_a_views_unreadable_metadata_file_is_a_query_error(tmp_path: Path) -> None:
    broken = tmp_path / "00001.gz.metadata.json"
    broken.write_bytes(b"\x1f\x8bnot gzip")
    with pytest.raises(QueryError, match="cannot be read"):
        read_view_metadata(str(broken))
