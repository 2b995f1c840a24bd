"""Hostile and odd input: injection through parameters and names, malformed SQL, huge fragment
counts, empty tables, NULLs, NaNs and extreme values in partition attributes. Each gets a typed
error that names the problem, or a right answer; nothing published is harmed."""

from __future__ import annotations

import math
from pathlib import Path

import pyarrow as pa
import pytest

from sketch_core.datasets import synthetic_table
from sketch_core.errors import InvalidSketchNameError, InvalidTableNameError, QueryError, SketchError
from sketch_core.maintenance.state_store import state_directory_name
from sketch_core.partitions.range_partition import PartitionError
from sketch_core.service import SketchService
from tests.service.test_maintain import fresh_fragments, maintained, sibling
from tests.tables.test_expire_snapshots import bag

INJECTIONS = [
    "x'; DROP TABLE sketch.sketches; --",
    '" OR 1=1 --',
    "../../../../tmp/escape",
    "a\\' OR \\'1\\'=\\'1",
    "ü🙂 tail",
]


def labelled(rows: pa.Table) -> pa.Table:
    return rows.append_column("label", pa.array([f"g{i % 7}" for i in range(rows.num_rows)]))


@pytest.fixture
def table(spark_svc: SketchService, ns: str) -> str:
    name = f"{ns}.facts"
    data = synthetic_table(2000, 40, seed=95).append_column(
        "label", pa.array([f"g{i % 7}" for i in range(2000)])
    )
    spark_svc.tables.create(name, data, sort_by=["a"])
    return name


def same_as_plain(svc: SketchService, sql: str, **kwargs: object) -> bool:
    sketched = svc.query(sql, **kwargs)  # type: ignore[arg-type]
    plain = svc.query(sql, use_sketches=False, **kwargs)  # type: ignore[arg-type]
    return bag(sketched.table) == bag(plain.table)


@pytest.mark.parametrize("value", INJECTIONS)
def test_parameter_values_are_bound_not_spliced(spark_svc: SketchService, table: str, value: str) -> None:
    svc = spark_svc
    sql = f"SELECT a, COUNT(*) AS n FROM {table} WHERE label = :label OR a < 0 GROUP BY a"
    result = svc.query(sql, params={"label": value})
    assert result.table.num_rows == 0, "the value matched as a string, not as SQL"
    assert svc.query(sql, params={"label": "g3"}).table.num_rows > 0
    assert svc.tables.exists(table) and svc.sketches.definitions() is not None, "nothing dropped"


def test_parameters_of_a_captured_sketch_are_printed_as_literals(
    spark_svc: SketchService, table: str
) -> None:
    """Capture and the sketched query put parameters into SQL through sqlglot's literals."""
    svc = sibling(spark_svc)
    sql = f"SELECT a, SUM(b) AS s FROM {table} WHERE label <> :label GROUP BY a HAVING SUM(b) > 100"
    for value in INJECTIONS:
        svc.capture(sql, params={"label": value}, attributes={table: "a"}, fragments=20)
        result = svc.query(sql, params={"label": value}, use_sketches="always")
        assert result.sketch is not None
        plain = svc.query(sql, params={"label": value}, use_sketches=False)
        assert bag(result.table) == bag(plain.table) and result.table.num_rows > 0


@pytest.mark.parametrize("name", INJECTIONS)
def test_sketch_names_are_values_and_never_paths(spark_svc: SketchService, table: str, name: str) -> None:
    svc = sibling(spark_svc)
    sql = f"SELECT a, SUM(b) AS s FROM {table} GROUP BY a HAVING SUM(b) > 100"
    version = svc.capture(sql, name=name, attributes={table: "a"}, fragments=20, with_state=True)
    assert svc.sketch(name).version == version.version == 1
    state_root = (svc.settings.warehouse / "_sketch_state").resolve()
    ref = svc.sketches.version(name).state_ref  # type: ignore[union-attr]
    assert ref is not None and state_root in Path(ref).resolve().parents
    assert "/" not in state_directory_name(name) and ".." not in state_directory_name(name)
    svc.tables.append(table, labelled(synthetic_table(10, 40, seed=96, key_start=5000)))
    (run,) = svc.maintain(name, "incremental")
    assert run.to_version == 2
    assert maintained(svc, name) == fresh_fragments(svc, sql, name, svc.latest_sequence())
    assert [s.name for s in svc.status(name)] == [name]
    svc.drop_sketch(name)


@pytest.mark.parametrize(
    "bad", ["ns.t; DROP TABLE x", "ns.t'--", "../ns.t", 'ns."t"', "ns.t OR 1=1", "", "ns."]
)
def test_table_names_that_are_not_identifiers_are_refused(spark_svc: SketchService, bad: str) -> None:
    with pytest.raises(InvalidTableNameError) as info:
        spark_svc.tables.create(bad, synthetic_table(5, 2))
    assert info.value.name == bad


def test_attribute_and_predicate_injection_is_refused_with_the_reason(
    spark_svc: SketchService, table: str
) -> None:
    svc = spark_svc
    sql = f"SELECT a, SUM(b) AS s FROM {table} GROUP BY a HAVING SUM(b) > 100"
    with pytest.raises(SketchError) as info:
        svc.capture(sql, attributes={table: "a; DROP TABLE sketch.sketches"}, fragments=10)
    assert "a; DROP TABLE sketch.sketches" in str(info.value)
    with pytest.raises(SketchError) as deleted:
        svc.tables.delete(table, "a = 1; DROP TABLE sketch.sketches")
    assert not deleted.value.transient
    assert svc.tables.read_arrow(table).num_rows == 2000


@pytest.mark.parametrize(
    ("sql", "names"),
    [
        ("SELEC a FROM {t}", "SELEC"),
        ("SELECT a FROM {t} WHERE", "WHERE"),
        ("SELECT a FROM {t} GROUP BY a HAVING", ""),
        ("SELECT (a FROM {t}", ""),
        ("", ""),
    ],
)
def test_malformed_sql_gets_a_query_error(spark_svc: SketchService, table: str, sql: str, names: str) -> None:
    with pytest.raises(QueryError) as info:
        spark_svc.capture(sql.format(t=table), attributes={table: "a"}, fragments=10)
    assert names in str(info.value)
    with pytest.raises(QueryError):
        spark_svc.query(sql.format(t=table))


@pytest.mark.parametrize("fragments", [0, -5, 10**9])
def test_fragment_counts_out_of_range_are_refused(
    spark_svc: SketchService, table: str, fragments: int
) -> None:
    sql = f"SELECT a, SUM(b) AS s FROM {table} GROUP BY a HAVING SUM(b) > 100"
    with pytest.raises(PartitionError) as info:
        spark_svc.capture(sql, attributes={table: "a"}, fragments=fragments)
    assert str(fragments) in str(info.value) and "1,000,000" in str(info.value)


def test_a_sketch_on_an_empty_table_is_empty_and_grows_with_it(spark_svc: SketchService, ns: str) -> None:
    svc = sibling(spark_svc)
    table = f"{ns}.empty"
    svc.tables.create(table, synthetic_table(0, 5), sort_by=["a"])
    sql = f"SELECT a, SUM(b) AS s FROM {table} GROUP BY a HAVING SUM(b) > 0"
    version = svc.capture(sql, attributes={table: "a"}, fragments=10, name=f"{ns}_empty", with_state=True)
    assert version.fragments[table] == [] and same_as_plain(svc, sql)
    svc.tables.append(table, synthetic_table(500, 5, seed=97))
    (run,) = svc.maintain(f"{ns}_empty")
    assert run.to_version == 2 and same_as_plain(svc, sql)
    assert maintained(svc, f"{ns}_empty") == fresh_fragments(svc, sql, f"{ns}_empty", svc.latest_sequence())


@pytest.mark.parametrize("kind", ["int", "float"])
def test_nulls_nans_and_extremes_in_the_partition_attribute(
    spark_svc: SketchService, ns: str, kind: str
) -> None:
    svc = sibling(spark_svc, validate_deltas=False)  # the values are the point here, not the checks
    table = f"{ns}.edges"
    rows = 600
    base = synthetic_table(rows, 30, seed=98)
    if kind == "int":
        specials: list[object] = [None, -(2**63), 2**63 - 1, 0, None]
        column = pa.array(specials + base.column("a").to_pylist()[len(specials) :], pa.int64())
    else:
        specials = [None, math.nan, math.inf, -math.inf, 1e308, -1e308, -0.0, 5e-324]
        values = [float(v) for v in base.column("a").to_pylist()]
        column = pa.array(specials + values[len(specials) :], pa.float64())
    data = base.set_column(base.column_names.index("a"), "a", column)
    svc.tables.create(table, data, sort_by=["key"])
    name = f"{ns}_edges_{kind}"
    for template in (
        "SELECT a, SUM(b) AS s FROM {t} GROUP BY a HAVING SUM(b) > 50",
        "SELECT a, MAX(c) AS m FROM {t} GROUP BY a ORDER BY m DESC, a LIMIT 5",
    ):
        sql = template.format(t=table)
        svc.capture(sql, name=name, attributes={table: "a"}, fragments=16, with_state=True)
        assert same_as_plain(svc, sql), sql
        svc.tables.append(table, data.slice(0, 12))  # the special values again
        (run,) = svc.maintain(name, "incremental")
        assert run.to_version == 2
        assert maintained(svc, name) == fresh_fragments(svc, sql, name, svc.latest_sequence())
        assert same_as_plain(svc, sql), sql
        svc.drop_sketch(name)


@pytest.mark.parametrize(("name", "problem"), [("a\x00b", "control"), ("", "empty"), ("x" * 201, "201")])
def test_sketch_names_the_metastore_cannot_hold_are_refused(
    spark_svc: SketchService, table: str, name: str, problem: str
) -> None:
    sql = f"SELECT a, SUM(b) AS s FROM {table} GROUP BY a HAVING SUM(b) > 100"
    with pytest.raises(InvalidSketchNameError) as info:
        spark_svc.capture(sql, name=name, attributes={table: "a"}, fragments=10)
    assert info.value.name == name and problem in info.value.problem
