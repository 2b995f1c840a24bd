"""In-process evaluation of aggregation inputs (the rows an estimate aggregates) agrees with
Spark: every TPC-H aggregation whose input it covers gives the same bag of rows."""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc
import pytest
import sqlglot
from pyspark.sql import SparkSession
from sqlglot import exp

from sketch_core.algebra.frontend import to_ir
from sketch_core.algebra.ir import AggCall, Aggregate, Join, Relation, Scan, Select
from sketch_core.algebra.printer import to_sql
from sketch_core.algebra.query_text import referenced_tables
from sketch_core.attribute_choice.local_plan import evaluate_plan
from sketch_core.datasets.tpch_queries import TPCH_QUERIES
from sketch_core.errors import UnsupportedQueryError
from sketch_core.rewrites.push_selections import push_selections
from sketch_core.service import SketchService
from sketch_core.spark.views import register_view, table_schemas
from sketch_core.tables.deltas import read_matching

pytestmark = pytest.mark.spark

# Aggregation inputs the in-process evaluator must cover (the others may fall back to Spark: Q9
# lists part and supplier first, a cross product in the order written).
COVERED = {1, 3, 4, 5, 6, 7, 10, 12, 14, 18, 19}


def _rows(table: pa.Table) -> list[tuple[object, ...]]:
    def plain(value: object) -> object:
        if isinstance(value, Decimal):
            return float(value)
        if isinstance(value, float):
            return round(value, 6) if not math.isnan(value) else "nan"
        return value

    rows = [tuple(plain(v) for v in row.values()) for row in table.to_pylist()]
    return sorted(rows, key=repr)


def _aggregation_inputs(plan: Relation) -> list[Relation]:
    return [node.child for node in plan.walk() if isinstance(node, Aggregate)]


def test_tpch_aggregation_inputs_equal_spark_rows(tpch_svc: SketchService, spark: SparkSession) -> None:
    sequence = tpch_svc.latest_sequence()
    every_table = set().union(*(referenced_tables(sql) for sql in TPCH_QUERIES.values()))
    pins = {name: tpch_svc.tables.pin(name, sequence) for name in every_table}
    views = {table: register_view(spark, pin) for table, pin in pins.items()}

    def read(scan: Scan, keys: Mapping[str, pa.Array] | None) -> pa.Table:
        return read_matching(pins[scan.table], scan.source_columns, keys)

    covered = set()
    for number, sql in TPCH_QUERIES.items():
        try:
            plan = to_ir(sql, table_schemas({t: pins[t] for t in referenced_tables(sql)})).plan
        except UnsupportedQueryError:
            continue
        for child in _aggregation_inputs(plan):
            try:
                local = evaluate_plan(push_selections(child), read, driving="tpch.lineitem")
            except UnsupportedQueryError:
                continue
            expected = spark.sql(to_sql(child, source=lambda scan: views[scan.table])).toArrow()
            assert local.column_names == expected.column_names, number
            assert local.num_rows == expected.num_rows, number
            assert _rows(local) == _rows(expected), number
            covered.add(number)
    assert covered >= COVERED, sorted(COVERED - covered)
    # Q18's input holds its IN subquery's GROUP BY ... HAVING: evaluated in-process too.
    q18 = to_ir(
        TPCH_QUERIES[18], table_schemas({t: pins[t] for t in referenced_tables(TPCH_QUERIES[18])})
    ).plan
    outer = _aggregation_inputs(q18)[0]
    assert any(isinstance(node, Aggregate) for node in outer.walk())
    assert evaluate_plan(push_selections(outer), read, driving="tpch.lineitem").num_rows > 0


def test_grouped_aggregates_match_sql_and_pass_wanted_groups_down() -> None:
    rows = pa.table(
        {
            "g": [1, 1, 1, 2, 2, None],
            "q": pa.array(
                [Decimal("1.50"), Decimal("2.50"), None, Decimal("9.99"), Decimal("0.01"), Decimal(1)]
            ),
            "s": ["a", "b", "a", None, "c", "d"],
        }
    ).cast(pa.schema([("g", pa.int64()), ("q", pa.decimal128(15, 2)), ("s", pa.string())]))
    asked: list[object] = []

    def read(scan: Scan, keys: Mapping[str, pa.Array] | None) -> pa.Table:
        asked.append(None if keys is None else {c: sorted(v.to_pylist()) for c, v in keys.items()})
        return rows

    scan = Scan("ns.t", "t", ("g", "q", "s"), ("g", "q", "s"))
    aggregate = Aggregate(
        scan,
        (("g", exp.column("g")),),
        (
            ("n", AggCall("count")),
            ("nq", AggCall("count", exp.column("q"))),
            ("total", AggCall("sum", exp.column("q"))),
            ("mean", AggCall("avg", exp.column("q"))),
            ("low", AggCall("min", exp.column("s"))),
            ("kinds", AggCall("count", exp.column("s"), distinct=True)),
            ("n2", AggCall("count")),
        ),
    )
    found = {r["g"]: r for r in evaluate_plan(aggregate, read, driving="ns.t").to_pylist()}
    assert found[1] == {
        "g": 1,
        "n": 3,
        "nq": 2,
        "total": Decimal("4.00"),
        "mean": 2.0,
        "low": "a",
        "kinds": 2,
        "n2": 3,
    }
    assert found[2]["total"] == Decimal("10.00") and found[2]["kinds"] == 1
    assert found[None]["n"] == 1  # NULL is a group, as in SQL
    # A HAVING over the sums, semi-joined from the groups wanted: the read is asked for them only.
    having = Select(aggregate, _sql("total > 5"))
    wanted = Scan("ns.w", "w", ("k",), ("k",))
    asked.clear()

    def read_both(scan: Scan, keys: Mapping[str, pa.Array] | None) -> pa.Table:
        return pa.table({"k": [2, 3]}) if scan.table == "ns.w" else read(scan, keys)

    semi = evaluate_plan(Join(wanted, having, "semi", _sql("k = g")), read_both, driving="ns.w")
    assert semi.to_pylist() == [{"k": 2}] and asked == [{"g": [2, 3]}]
    with pytest.raises(UnsupportedQueryError, match="GROUP BY"):
        evaluate_plan(Aggregate(scan, (), (("n", AggCall("count")),)), read)


def test_joins_read_the_other_side_by_the_keys_already_joined() -> None:
    facts = pa.table({"k": [1, 2, 2, None], "x": [10, 20, 21, 30]})
    dims = pa.table({"id": list(range(100)), "name": [f"d{i}" for i in range(100)]})
    asked: dict[str, object] = {}

    def read(scan: Scan, keys: Mapping[str, pa.Array] | None) -> pa.Table:
        asked[scan.table] = None if keys is None else {c: sorted(v.to_pylist()) for c, v in keys.items()}
        return facts if scan.table == "ns.facts" else dims

    left = Scan("ns.facts", "f", ("k", "x"), ("k", "x"))
    right = Select(Scan("ns.dims", "d", ("id", "name"), ("id", "name")), _sql("name <> 'd2'"))
    joined = evaluate_plan(Join(right, left, "inner", _sql("k = id")), read, driving="ns.facts")
    # The sample's side is read first; the other side only for its keys (NULL never matches).
    assert asked == {"ns.facts": None, "ns.dims": {"id": [1, 2]}}
    assert sorted(joined.to_pylist(), key=repr) == [{"id": 1, "name": "d1", "k": 1, "x": 10}]
    semi = evaluate_plan(Join(left, right, "semi", _sql("k = id")), read, driving="ns.facts")
    assert semi.to_pylist() == [{"k": 1, "x": 10}]
    anti = evaluate_plan(Join(left, right, "anti", _sql("k = id")), read, driving="ns.facts")
    assert sorted(anti.column("x").to_pylist()) == [20, 21, 30]


def test_keys_wanted_from_above_pick_the_side_a_join_starts_from(monkeypatch: pytest.MonkeyPatch) -> None:
    """``sample JOIN (customers JOIN orders)``: the orders wanted are the sample's, so the inner
    join starts from orders (read by those keys) and reads customers by the orders' customer
    keys; past ``MAX_READ_KEYS`` a read gets no keys and its rows are filtered here."""
    from sketch_core.attribute_choice import local_plan

    sample = pa.table({"ok": [5, 7, 7]})
    orders = pa.table({"o": list(range(100)), "c": [i % 10 for i in range(100)]})
    customers = pa.table({"cid": list(range(10)), "name": [f"c{i}" for i in range(10)]})
    tables = {"ns.s": sample, "ns.o": orders, "ns.c": customers}
    asked: list[tuple[str, object]] = []

    def read(scan: Scan, keys: Mapping[str, pa.Array] | None) -> pa.Table:
        table = tables[scan.table]
        asked.append(
            (scan.table, None if keys is None else {k: sorted(v.to_pylist()) for k, v in keys.items()})
        )
        for name, values in (keys or {}).items():
            table = table.filter(pc.is_in(table.column(name), value_set=values))
        return table

    s = Scan("ns.s", "s", ("ok",), ("ok",))
    o = Scan("ns.o", "o", ("o", "c"), ("o", "c"))
    c = Scan("ns.c", "c", ("cid", "name"), ("cid", "name"))
    plan = Join(s, Join(c, o, "inner", _sql("cid = c")), "inner", _sql("ok = o"))
    rows = evaluate_plan(plan, read, driving="ns.s")
    assert asked == [("ns.s", None), ("ns.o", {"o": [5, 7]}), ("ns.c", {"cid": [5, 7]})]
    assert sorted(rows.to_pylist(), key=repr) == sorted(
        [{"ok": k, "cid": k, "name": f"c{k}", "o": k, "c": k} for k in (5, 7, 7)], key=repr
    )
    asked.clear()
    monkeypatch.setattr(local_plan, "MAX_READ_KEYS", 1)
    assert sorted(evaluate_plan(plan, read, driving="ns.s").to_pylist(), key=repr) == sorted(
        rows.to_pylist(), key=repr
    )
    assert asked == [("ns.s", None), ("ns.o", None), ("ns.c", None)]


def test_a_scans_selection_filters_before_many_wanted_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past ``MAX_READ_KEYS`` the other side is read whole: its own selection (as TPC-H Q10's
    quarter of orders) filters the rows before the keys' hash set is probed, with the same
    result as the keys first. Read by its source column names, filtered by its output ones."""
    from sketch_core.attribute_choice import local_plan

    sample = pa.table({"ok": [3, 5, 8, 9]})
    orders = pa.table({"o_key": list(range(100)), "day": [i % 4 for i in range(100)]})
    probed: list[int] = []
    having_keys = local_plan._having_keys

    def counted(table: pa.Table, keys: Mapping[str, pa.Array]) -> pa.Table:
        probed.append(table.num_rows)
        return having_keys(table, keys)

    def read(scan: Scan, keys: Mapping[str, pa.Array] | None) -> pa.Table:
        assert keys is None or set(keys) <= set(scan.source_columns)
        return sample if scan.table == "ns.s" else orders

    s = Scan("ns.s", "s", ("ok",), ("ok",))
    o = Select(Scan("ns.o", "o", ("o_key", "day"), ("o", "d")), _sql("d = 1"))
    plan = Join(s, o, "inner", _sql("ok = o"))
    few = evaluate_plan(plan, read, driving="ns.s")
    monkeypatch.setattr(local_plan, "MAX_READ_KEYS", 1)
    monkeypatch.setattr(local_plan, "_having_keys", counted)
    many = evaluate_plan(plan, read, driving="ns.s")
    assert probed == [25]  # the 25 rows of day 1, not the 100 read
    assert sorted(many.to_pylist(), key=repr) == sorted(few.to_pylist(), key=repr)
    assert sorted(r["ok"] for r in many.to_pylist()) == [5, 9]


def test_joins_without_an_equality_are_left_to_spark() -> None:
    table = pa.table({"a": [1, 2]})
    other = pa.table({"b": [1, 2]})

    def read(scan: Scan, keys: Mapping[str, pa.Array] | None) -> pa.Table:
        return table if scan.table == "ns.a" else other

    plan = Join(Scan("ns.a", "a", ("a",), ("a",)), Scan("ns.b", "b", ("b",), ("b",)), "inner", _sql("a < b"))
    with pytest.raises(UnsupportedQueryError, match="inner join"):
        evaluate_plan(plan, read)


def _sql(text: str) -> exp.Expr:
    return sqlglot.parse_one(text, read="spark")
