"""Recursive CTEs compiled to the engines and maintained over base-table rows, against Spark.

Spark 4.1 evaluates ``WITH RECURSIVE`` with ``UNION ALL`` (not ``UNION``): the hop-bounded
queries here run there as written, and the maintained view (absorption provenance and DRed
alike) must hold exactly the distinct rows Spark returns, after the first load and after every
batch of inserted and deleted links (duplicates and self-loops included). Reachability with
``UNION`` over cyclic graphs, which Spark does not run, is checked against a fixpoint of a
hand-written rule instead.
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from sketch_core.errors import InvalidDataError, QueryError
from sketch_core.recursive.evaluate import fixpoint
from sketch_core.recursive.members import compile_members
from sketch_core.recursive.query import split_recursive
from sketch_core.recursive.rule import LinearRule, row_by_row
from sketch_core.recursive.view import RecursiveView

SCHEMA = pa.schema([("src", pa.int64()), ("dst", pa.int64()), ("w", pa.int64())])
# Least hops and cost from node 0 and 1, at most 4 hops, over links of positive weight; the
# residual (h.n < 4) is checked per derivation, the link filter (l.w > 0) per edge.
HOPS = """WITH RECURSIVE hops AS (
    SELECT src, dst, 1 AS n, w AS cost FROM links WHERE src < 2 AND w > 0
    UNION ALL
    SELECT h.src, l.dst, h.n + 1, h.cost + l.w FROM hops h JOIN links l ON l.src = h.dst
    WHERE h.n < 4 AND l.w > 0)
SELECT * FROM hops"""
# From a constant seed, through a comma join.
FROM_ROOT = """WITH RECURSIVE walk(node, depth) AS (
    SELECT CAST(0 AS BIGINT), 0
    UNION ALL
    SELECT l.dst, w.depth + 1 FROM walk w, links l WHERE l.src = w.node AND w.depth < 3)
SELECT * FROM walk"""
REACH = """WITH RECURSIVE reach(src, dst) AS (
    SELECT src, dst FROM links UNION SELECT r.src, l.dst FROM reach r JOIN links l ON l.src = r.dst)
SELECT * FROM reach"""

Expected = Callable[[list[tuple[int, int, int]]], set[tuple[object, ...]]]
LINK = st.tuples(st.integers(0, 5), st.integers(0, 5), st.integers(-1, 3))
BATCH = st.tuples(st.lists(LINK, max_size=3), st.integers(0, 3))  # links inserted, links deleted


def _links(rows: list[tuple[int, int, int]]) -> pa.Table:
    return pa.table(
        [pa.array(c, pa.int64()) for c in zip(*rows, strict=True)]
        if rows
        else [pa.array([], pa.int64())] * 3,
        schema=SCHEMA,
    )


def _views(sql: str) -> list[RecursiveView]:
    split = split_recursive(sql)
    assert split is not None
    members = compile_members(split, {"links": SCHEMA})
    return [RecursiveView(members, "absorption"), RecursiveView(members, "dred")]


def _run(sql: str, start: list[tuple[int, int, int]], batches: list, expected: Expected) -> None:
    views = _views(sql)
    links = list(start)
    for view in views:
        view.insert({"links": _links(links)})
    assert all(view.rows == expected(links) for view in views)
    for added, deleted in batches:
        gone = links[:deleted]
        links = links[deleted:] + added
        for view in views:
            view.delete({"links": _links(gone)})
            view.insert({"links": _links(added)})
        truth = expected(links)
        assert [view.rows for view in views] == [truth, truth], (added, gone)


@pytest.mark.spark
@pytest.mark.parametrize("sql", [HOPS, FROM_ROOT], ids=["hops", "from_root"])
@given(start=st.lists(LINK, max_size=8), batches=st.lists(BATCH, max_size=3))
def test_maintained_views_hold_the_rows_spark_returns(
    spark: SparkSession, sql: str, start: list[tuple[int, int, int]], batches: list
) -> None:
    def spark_rows(links: list[tuple[int, int, int]]) -> set[tuple[object, ...]]:
        spark.createDataFrame(
            _links(links).to_pandas(), "src long, dst long, w long"
        ).createOrReplaceTempView("links")
        return {tuple(r) for r in spark.sql(sql).collect()}

    _run(sql, start, batches, spark_rows)


@given(start=st.lists(LINK, max_size=8), batches=st.lists(BATCH, max_size=4))
def test_reachability_with_union_over_cycles_equals_a_fixpoint(start: list, batches: list) -> None:
    rule = LinearRule((1,), (0,), row_by_row(lambda r, e: (r[0], e[1])))

    def reachable(links: list[tuple[int, int, int]]) -> set[tuple[object, ...]]:
        return fixpoint(rule, [link[:2] for link in links], links)

    _run(REACH, start, batches, reachable)


def test_a_link_with_a_null_key_is_refused_and_changes_nothing() -> None:
    view = _views(REACH)[0]
    view.insert({"links": _links([(0, 1, 1), (1, 2, 1)])})
    before = view.rows
    broken = pa.table({"src": [2, None], "dst": [3, 4], "w": [1, 1]}, schema=SCHEMA)
    with pytest.raises(InvalidDataError, match=r"links has a row with a NULL join key, \(None, 4, 1\)"):
        view.insert({"links": broken})
    assert view.rows == before
    view.insert({"links": broken.slice(0, 1)})  # the keys it would have taken are free
    assert (0, 3) in view.rows


def test_members_whose_column_types_differ_are_refused_as_spark_refuses_them() -> None:
    split = split_recursive(FROM_ROOT.replace("CAST(0 AS BIGINT)", "0"))
    assert split is not None
    with pytest.raises(QueryError, match="gives node as int64 where its base member gives int32"):
        compile_members(split, {"links": SCHEMA})


def test_deleting_a_row_the_view_never_had_is_refused() -> None:
    view = _views(REACH)[0]
    view.insert({"links": _links([(0, 1, 1)])})
    with pytest.raises(InvalidDataError, match=r"a row deleted from links that the view of reach never had"):
        view.delete({"links": _links([(0, 1, 1), (0, 1, 1)])})
    assert view.rows == {(0, 1)}  # nothing changed: the one copy it has can still go
    assert view.delete({"links": _links([(0, 1, 1)])}).removed == {(0, 1)}


def test_columns_copied_from_the_cte_row_are_known_for_dred_s_rederivation_index() -> None:
    (hops, _), (reach, _) = _views(HOPS), _views(REACH)
    assert (hops.members.copied, reach.members.copied) == (((0, 0),), ((0, 0),))
    assert (hops.members.edge_copied, reach.members.edge_copied) == (((1, 1),), ((1, 1),))
    assert (hops.members.rule.own, hops.members.rule.other) == ((1,), (0,))
