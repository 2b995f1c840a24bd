"""Recursive reports through the service: evaluated on Spark, captured, used and maintained.

The oracles: a fixpoint computed here (reachability), Spark's plain query, and a fresh capture
at the same snapshot. After every generated batch of inserted and deleted links (duplicates,
self-loops, cycles, disconnected parts), the sketch maintained incrementally equals a fresh
capture, and the report with the sketch equals the report without it.
"""

from __future__ import annotations

import itertools
import os

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from sketch_core.errors import (
    DeltaQuarantinedError,
    InvalidDataError,
    QueryError,
    SketchNotFoundError,
    TableExistsError,
    UnsupportedQueryError,
)
from sketch_core.service.facade import SketchService
from sketch_core.spark.recursion import RecursionDepthError
from tests.oracles.results import sorted_rows
from tests.recursive.test_selection import LEAST_COST as ALL_PAIRS_TEXT
from tests.recursive.test_selection import least_costs as all_pair_costs
from tests.service.test_maintain import fresh_fragments, maintained

pytestmark = pytest.mark.spark

LONG = os.environ.get("SKETCH_HYPOTHESIS_PROFILE") == "long"
SCHEMA = pa.schema([("src", pa.int64()), ("dst", pa.int64()), ("w", pa.int64())])
NODES = 8
_tables = itertools.count()

# Reachability from node 0 (UNION: cycles end; Spark itself runs only UNION ALL).
REACH = """WITH RECURSIVE reach(src, dst) AS (
    SELECT src, dst FROM {t} WHERE src = 0
    UNION
    SELECT r.src, l.dst FROM reach r JOIN {t} l ON l.src = r.dst)
SELECT dst FROM reach"""
# Least hops to each node within 3, from Spark's own UNION ALL recursion.
LEAST_HOPS = """WITH RECURSIVE hops(node, n) AS (
    SELECT dst, 1 FROM {t} WHERE src = 0
    UNION ALL
    SELECT l.dst, h.n + 1 FROM hops h JOIN {t} l ON l.src = h.node WHERE h.n < 3)
SELECT node, MIN(n) AS n FROM hops WHERE node <> 0 GROUP BY node"""
# Least cost to each node from node 0 over a graph with cycles: the query as written never
# ends; with aggregate selection it does (Spark and the engine derive from best rows only).
LEAST_COST = """WITH RECURSIVE paths(node, cost) AS (
    SELECT dst, w FROM {t} WHERE src = 0
    UNION ALL
    SELECT l.dst, p.cost + l.w FROM paths p JOIN {t} l ON l.src = p.node)
SELECT node, MIN(cost) AS cost FROM paths GROUP BY node ORDER BY cost, node"""


ALL_PAIRS = ALL_PAIRS_TEXT.replace("links", "{t}")


def _links(rows: list[tuple[int, int, int]]) -> pa.Table:
    columns = list(zip(*rows, strict=True)) if rows else [(), (), ()]
    return pa.table([pa.array(c, pa.int64()) for c in columns], schema=SCHEMA)


def _reachable(links: list[tuple[int, int, int]]) -> set[int]:
    found = {dst for src, dst, _ in links if src == 0}
    while True:
        more = {dst for src, dst, _ in links if src in found} - found
        if not more:
            return found
        found |= more


def _least_costs(links: list[tuple[int, int, int]]) -> set[tuple[int, int]]:
    """Dijkstra from node 0 (walks of one link or more; positive weights)."""
    best: dict[int, int] = {}
    frontier = [(w, dst) for src, dst, w in links if src == 0]
    while frontier:
        frontier.sort()
        cost, node = frontier.pop(0)
        if node in best:
            continue
        best[node] = cost
        frontier += [(cost + w, dst) for src, dst, w in links if src == node and dst not in best]
    return set(best.items())


def _truth(template: str, links: list[tuple[int, int, int]]) -> set[tuple[int, ...]] | None:
    """The rows the plain report must return, where the test knows them."""
    if template is REACH:
        return {(n,) for n in _reachable(links)}
    return _least_costs(links) if template is LEAST_COST else None


def _table(svc: SketchService, ns: str, links: list[tuple[int, int, int]]) -> str:
    table = f"{ns}.links{next(_tables)}"
    svc.tables.create(table, _links(links), sort_by=["src"])
    return table


def test_union_recursion_runs_semi_naively_on_spark(spark_svc: SketchService, ns: str) -> None:
    links = [(0, 1, 1), (1, 2, 1), (2, 0, 1), (2, 3, 1), (5, 6, 1), (3, 3, 1)]
    table = _table(spark_svc, ns, links)
    result = spark_svc.query(REACH.format(t=table), use_sketches=False)
    assert {r["dst"] for r in result.table.to_pylist()} == _reachable(links) == {0, 1, 2, 3}
    # Other CTEs beside the recursive one, read by its members and by the outer query.
    sql = f"""WITH RECURSIVE heavy AS (SELECT * FROM {table} WHERE w > 0),
        reach(dst) AS (SELECT dst FROM heavy WHERE src = 0
            UNION SELECT h.dst FROM reach r JOIN heavy h ON h.src = r.dst)
        SELECT COUNT(*) AS n FROM reach WHERE dst IN (SELECT src FROM heavy)"""
    assert spark_svc.query(sql, use_sketches=False).table.to_pylist() == [{"n": 4}]  # 0, 1, 2, 3


def test_least_cost_paths_over_cycles_run_on_spark_with_aggregate_selection(
    spark_svc: SketchService, ns: str
) -> None:
    # A zero-cost cycle (1 <-> 2), a self-loop, a link of NULL cost (which MIN skips: 4 is
    # reached at cost NULL only through it), and a part not connected to the rest.
    links = [(0, 1, 2), (1, 2, 0), (2, 1, 0), (2, 3, 1), (0, 3, 5), (3, 3, 1), (3, 4, None), (6, 7, 1)]
    table = f"{ns}.links{next(_tables)}"
    spark_svc.tables.create(table, pa.table(list(zip(*links, strict=True)), schema=SCHEMA))
    sql = ALL_PAIRS.format(t=table)
    rows = spark_svc.query(sql, use_sketches=False).table.to_pylist()
    assert {(r["s"], r["d"]): r["cost"] for r in rows} == all_pair_costs(links)
    costs = [r["cost"] for r in rows]  # ORDER BY cost: Spark puts NULLs first
    assert costs == sorted(costs, key=lambda c: (c is not None, c or 0)) and 0 in costs


def test_rounds_past_many_rows_join_what_was_found_by_sort_merge_with_the_same_result(
    spark_svc: SketchService, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Large recursions join the rows found so far by sort-merge (a broadcast of a million
    # rows failed); here every round does, and the answers stay the oracles'.
    monkeypatch.setattr("sketch_core.spark.recursion.BROADCAST_ROWS", 0)
    links = [(0, 1, 2), (1, 2, 1), (2, 0, 1), (2, 3, 4), (0, 3, 9), (3, 3, 1), (5, 6, 1)]
    table = _table(spark_svc, ns, links)
    reached = spark_svc.query(REACH.format(t=table), use_sketches=False).table.to_pylist()
    assert {r["dst"] for r in reached} == _reachable(links)
    costs = spark_svc.query(LEAST_COST.format(t=table), use_sketches=False).table.to_pylist()
    assert {tuple(r.values()) for r in costs} == _least_costs(links)


def test_a_recursion_past_spark_s_level_limit_gets_a_typed_error(spark_svc: SketchService, ns: str) -> None:
    table = _table(spark_svc, ns, [(i, i + 1, 1) for i in range(8)])
    spark = spark_svc.context.spark
    spark.conf.set("spark.sql.cteRecursionLevelLimit", "4")
    try:
        with pytest.raises(RecursionDepthError, match="in each of 4 rounds") as caught:
            spark_svc.query(REACH.format(t=table), use_sketches=False)
    finally:
        spark.conf.unset("spark.sql.cteRecursionLevelLimit")
    assert caught.value.limit == 4


def _check(svc: SketchService, sql: str, name: str, truth: set[tuple[int, ...]] | None) -> None:
    sequence = svc.latest_sequence()
    assert maintained(svc, name) == fresh_fragments(svc, sql, name, sequence)
    plain = svc.query(sql, use_sketches=False)
    used = svc.query(sql, use_sketches="always")
    assert used.sketch is not None and used.sketch[0] == name
    assert sorted_rows(used.table) == sorted_rows(plain.table)
    if truth is not None:
        assert {tuple(r.values()) for r in plain.table.to_pylist()} == truth


LINK = st.tuples(st.integers(0, NODES - 1), st.integers(0, NODES - 1), st.integers(1, 3))
# Per batch: links inserted, and links deleted (by index into the table's links).
BATCH = st.tuples(st.lists(LINK, max_size=4), st.lists(st.integers(0, 30), max_size=2))


@seed(20261129)
@settings(
    # Each example costs a capture, a fresh capture and two queries per batch on Spark.
    max_examples=200 if LONG else 5,
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],  # no shrinking: each example costs seconds of Spark
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(start=st.lists(LINK, min_size=1, max_size=10), batches=st.lists(BATCH, min_size=1, max_size=3))
@pytest.mark.parametrize(
    "template", [REACH, LEAST_HOPS, LEAST_COST], ids=["reach", "least_hops", "least_cost"]
)
def test_maintained_recursive_sketches_equal_fresh_captures_and_keep_reports_exact(
    spark_svc: SketchService, ns: str, template: str, start: list, batches: list
) -> None:
    svc = spark_svc
    table = _table(svc, ns, start)
    sql = template.format(t=table)
    name = f"{table.replace('.', '_')}_sketch"
    svc.capture(sql, name=name, fragments=4)
    links = list(start)
    _check(svc, sql, name, _truth(template, links))
    for added, deleted in batches:
        gone = sorted({links[i] for i in deleted if i < len(links)})
        if not gone and not added:
            continue
        for src, dst, w in gone:  # every copy of the link goes
            svc.tables.delete(table, f"src = {src} AND dst = {dst} AND w = {w}")
            links = [link for link in links if link != (src, dst, w)]
        if added:
            svc.tables.append(table, _links(added))
            links += added
        if len(links) % 2:  # as another process would: the view restored from the state store
            svc.recursive.forget(name)
        runs = svc.maintain(name, strategy="incremental")
        assert [run.strategy for run in runs] == ["incremental"]
        _check(svc, sql, name, _truth(template, links))
    # Every run took the view it left behind, kept or stored: none computed it again.
    assert [r["built_state"] for r in svc.sketches.runs(name) if r["strategy"] == "incremental"] == [
        False
    ] * (len(svc.sketches.runs(name)) - 1)
    assert svc.sketches.version(name).state_ref is not None


def test_a_delete_that_leaves_every_row_derivable_changes_no_fragment(
    spark_svc: SketchService, ns: str
) -> None:
    # Two ways from 0 to 2 (0->1->2 and 0->2): deleting 0->2 keeps node 2 reachable.
    table = _table(spark_svc, ns, [(0, 1, 1), (1, 2, 1), (0, 2, 1), (2, 3, 1), (6, 7, 1)])
    sql = REACH.format(t=table)
    first = spark_svc.capture(sql, name=f"{ns}_two_ways", fragments=8)
    assert first.fragments[table] != sorted(range(9))  # node 6's links are not in it
    spark_svc.tables.delete(table, "src = 0 AND dst = 2")
    (run,) = spark_svc.maintain(f"{ns}_two_ways", strategy="incremental")
    assert run.strategy == "incremental"
    assert {r["dst"] for r in spark_svc.query(sql, use_sketches="always").table.to_pylist()} == {1, 2, 3}


def test_a_link_with_a_null_key_is_refused_and_the_sketch_keeps_its_version(
    spark_svc: SketchService, ns: str
) -> None:
    table = _table(spark_svc, ns, [(0, 1, 1), (1, 2, 1)])
    sql, name = REACH.format(t=table), f"{ns}_nulls"
    before = spark_svc.capture(sql, name=name, fragments=4)
    seq = spark_svc.tables.append(table, pa.table({"src": [None], "dst": [5], "w": [1]}, schema=SCHEMA))
    # Delta validation stops the batch first (the column never had NULLs) ...
    with pytest.raises(DeltaQuarantinedError, match="src: 1 NULL values"):
        spark_svc.maintain(name)
    # ... and once it is accepted, the recursion refuses the link itself.
    spark_svc.override_validation(table, seq, reason="test: let the broken link through")
    for strategy in ("incremental", "auto"):
        with pytest.raises(InvalidDataError, match=r"links\d+ has a row with a NULL join key"):
            spark_svc.maintain(name, strategy=strategy)
    assert spark_svc.sketch(name).version == before.version
    assert maintained(spark_svc, name) == {t: set(ids) for t, ids in before.fragments.items()}


def test_recursions_a_sketch_cannot_serve_are_refused_by_name(spark_svc: SketchService, ns: str) -> None:
    table = _table(spark_svc, ns, [(0, 1, 1), (1, 2, 1)])
    counted = LEAST_HOPS.format(t=table).replace("MIN(n) AS n", "COUNT(*) AS walks")
    with pytest.raises(UnsupportedQueryError, match="read with its duplicates"):
        spark_svc.capture(counted, name=f"{ns}_walks")
    # The report itself still runs, plain.
    assert spark_svc.query(counted).sketch is None
    outside = REACH.format(t=table).replace(
        "SELECT dst FROM reach", f"SELECT dst FROM reach JOIN {table} x ON x.src = reach.dst"
    )
    with pytest.raises(UnsupportedQueryError, match="read outside the recursion"):
        spark_svc.capture(outside, name=f"{ns}_outside")
    with pytest.raises(QueryError, match="is not a column of"):
        spark_svc.capture(REACH.format(t=table), name=f"{ns}_bad", attributes={table: "nope"})
    nonlinear = f"""WITH RECURSIVE path(a, b) AS (SELECT src, dst FROM {table}
        UNION SELECT p.a, q.b FROM path p JOIN path q ON p.b = q.a) SELECT * FROM path"""
    negated = f"""WITH RECURSIVE r(n) AS (SELECT src FROM {table}
        UNION SELECT l.dst FROM {table} l WHERE l.src NOT IN (SELECT n FROM r)) SELECT * FROM r"""
    for sql, construct in ((nonlinear, "non-linear recursion"), (negated, "not stratifiable")):
        with pytest.raises(UnsupportedQueryError, match=construct):
            spark_svc.capture(sql, name=f"{ns}_refused")
    with pytest.raises(SketchNotFoundError):  # nothing of the refused captures was published
        spark_svc.sketch(f"{ns}_refused")


def test_a_materialized_recursive_view_follows_inserted_and_expired_links(
    spark_svc: SketchService, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    svc = spark_svc
    table = _table(svc, ns, [(0, 1, 1), (1, 2, 1), (2, 0, 1), (5, 6, 1), (1, 2, 1)])
    view = f"{ns}.reachable"
    sql = REACH.format(t=table).replace(
        "SELECT dst FROM reach", "SELECT dst AS node, src AS source FROM reach"
    )
    svc.materialize(view, sql, fragments=4)

    def check() -> None:
        assert sorted_rows(svc.tables.read_arrow(view)) == sorted_rows(
            svc.query(sql, use_sketches=False).table
        )

    check()
    steps = [
        ("append", [(2, 3, 1), (3, 4, 1)]),
        ("delete", "src = 1 AND dst = 2"),  # both copies: 2, 3 and 4 are cut off
        ("append", [(0, 3, 1), (6, 0, 1)]),  # 3 and 4 come back, by another way
        ("delete", "src = 3"),
        ("append", [(4, 5, 1), (0, 4, 1)]),
    ]
    for number, (kind, change) in enumerate(steps):
        if kind == "append":
            svc.tables.append(table, _links(change))  # type: ignore[arg-type]
        else:
            svc.tables.delete(table, change)  # type: ignore[arg-type]
        if number == 3:  # a change too big for a predicate: the table is written whole
            monkeypatch.setattr("sketch_core.service.recursive.MAX_PREDICATE_ROWS", 0)
        (run,) = svc.maintain(view, strategy="incremental")
        assert run.strategy == "incremental"
        check()
    # A table that is not the view's is not overwritten, and a query whose rows are not the
    # view's one to one is refused; neither leaves a sketch behind.
    with pytest.raises(TableExistsError):
        svc.materialize(table, sql)
    with pytest.raises(UnsupportedQueryError, match="materialised view whose query is not"):
        svc.materialize(f"{ns}.nodes", REACH.format(t=table))
    with pytest.raises(SketchNotFoundError):
        svc.sketch(f"{ns}.nodes")
    assert not svc.tables.exists(f"{ns}.nodes")


def test_a_materialized_least_cost_table_keeps_each_node_s_cheapest_cost(
    spark_svc: SketchService, ns: str
) -> None:
    svc = spark_svc
    table = _table(svc, ns, [(0, 1, 3), (1, 2, 1), (2, 1, 1), (0, 2, 5), (2, 3, 2)])
    routes = f"{ns}.routes"
    sql = LEAST_COST.format(t=table).replace(" ORDER BY cost, node", "")
    svc.materialize(routes, sql, fragments=4)

    def check(links: list[tuple[int, int, int]]) -> None:
        rows = {tuple(r.values()) for r in svc.tables.read_arrow(routes).to_pylist()}
        assert (
            rows
            == _least_costs(links)
            == {tuple(r.values()) for r in svc.query(sql, use_sketches=False).table.to_pylist()}
        )

    links = [(0, 1, 3), (1, 2, 1), (2, 1, 1), (0, 2, 5), (2, 3, 2)]
    check(links)
    steps: list[tuple[str, list[tuple[int, int, int]]]] = [
        ("append", [(0, 2, 1)]),  # cheaper: 2, 1 and 3 all change
        ("delete", [(0, 2, 1)]),  # and back: the next best rows are the table's again
        ("delete", [(1, 2, 1)]),  # 2 is reached at 5 only now
        ("append", [(3, 4, 1), (4, 0, 1)]),  # a cycle back to 0: 0 itself is reached
    ]
    for kind, change in steps:
        if kind == "append":
            svc.tables.append(table, _links(change))
            links += change
        else:
            for src, dst, w in change:
                svc.tables.delete(table, f"src = {src} AND dst = {dst} AND w = {w}")
                links = [link for link in links if link != (src, dst, w)]
        (run,) = svc.maintain(routes, strategy="incremental")
        assert run.strategy == "incremental"
        check(links)
    with pytest.raises(UnsupportedQueryError, match="MIN"):
        svc.materialize(f"{ns}.unnamed", sql.replace("MIN(cost) AS cost", "MIN(cost)"))
