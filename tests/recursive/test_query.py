"""WITH RECURSIVE split into its members, and the recursions outside the supported class
refused by name (non-linear, not stratifiable, not monotone, mutual)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from sketch_core.errors import QueryError, UnsupportedQueryError
from sketch_core.recursive.outer import materialized_columns
from sketch_core.recursive.query import split_recursive

REACH = """WITH RECURSIVE reach(src, dst) AS (
    SELECT src, dst FROM g.links
    UNION
    SELECT r.src, l.dst FROM reach r JOIN g.links l ON l.src = r.dst)
SELECT dst FROM reach WHERE src = 1"""


def test_a_reachability_query_splits_into_its_members() -> None:
    split = split_recursive(REACH)
    assert split is not None
    assert (split.name, split.columns, split.distinct) == ("reach", ("src", "dst"), True)
    assert split.base.sql() == "SELECT src, dst FROM g.links"
    assert split.step.sql() == "SELECT r.src, l.dst FROM reach AS r JOIN g.links AS l ON l.src = r.dst"


def test_union_all_hop_counts_with_column_names_from_the_base_member() -> None:
    split = split_recursive(
        """WITH RECURSIVE hops AS (SELECT src, dst, 1 AS n FROM g.links UNION ALL
        SELECT h.src, l.dst, h.n + 1 FROM hops h, g.links l WHERE l.src = h.dst AND h.n < 5)
        SELECT src, dst, MIN(n) FROM hops GROUP BY src, dst"""
    )
    assert split is not None and split.columns == ("src", "dst", "n") and not split.distinct


def test_queries_without_a_recursion_are_not_split() -> None:
    assert split_recursive("SELECT * FROM g.links") is None
    assert split_recursive("WITH RECURSIVE x AS (SELECT 1 AS a) SELECT a FROM x") is None


REFUSED = {
    "non-linear recursion (path read 2 times in one member)": """WITH RECURSIVE path(a, b) AS (
        SELECT src, dst FROM g.links UNION SELECT p.a, q.b FROM path p JOIN path q ON p.b = q.a)
        SELECT * FROM path""",
    "reach negated in its own recursive member (not stratifiable)": """WITH RECURSIVE reach(n) AS (
        SELECT 1 UNION SELECT l.dst FROM g.links l WHERE NOT EXISTS (SELECT 1 FROM reach r WHERE r.n = l.src))
        SELECT * FROM reach""",
    "reach read inside a subquery of its recursive member": """WITH RECURSIVE reach(n) AS (
        SELECT 1 UNION SELECT l.dst FROM g.links l WHERE l.src IN (SELECT n FROM reach))
        SELECT * FROM reach""",
    "GROUP BY in the recursive member of cost (not monotone)": """WITH RECURSIVE cost(n, c) AS (
        SELECT 1, 0 UNION
        SELECT l.dst, MIN(c.c + l.w) FROM cost c JOIN g.links l ON l.src = c.n GROUP BY l.dst)
        SELECT * FROM cost""",
    "an aggregate in the recursive member of cost (not monotone)": """WITH RECURSIVE cost(n, c) AS (
        SELECT 1, 0 UNION SELECT MAX(l.dst), MAX(c.c) FROM cost c JOIN g.links l ON l.src = c.n)
        SELECT * FROM cost""",
    "a LEFT JOIN in the recursive member of reach (not monotone)": """WITH RECURSIVE reach(n) AS (
        SELECT 1 UNION SELECT l.dst FROM reach r LEFT JOIN g.links l ON l.src = r.n)
        SELECT * FROM reach""",
    "mutual recursion (even and odd read each other)": """WITH RECURSIVE
        even(n) AS (SELECT 0 UNION SELECT o.n + 1 FROM odd o WHERE o.n < 10),
        odd(n) AS (SELECT e.n + 1 FROM even e WHERE e.n < 10)
        SELECT * FROM even""",
    "reach read by its base member (the first one)": """WITH RECURSIVE reach(n) AS (
        SELECT n FROM reach UNION SELECT l.dst FROM reach r JOIN g.links l ON l.src = r.n)
        SELECT * FROM reach""",
    "a recursive CTE that is not one base member UNION one recursive member (reach)": """WITH RECURSIVE
        reach(n) AS (SELECT 1 UNION SELECT 2 UNION SELECT l.dst FROM reach r JOIN g.links l ON l.src = r.n)
        SELECT * FROM reach""",
}


@pytest.mark.parametrize("construct", sorted(REFUSED))
def test_recursions_outside_the_supported_class_are_refused_by_name(construct: str) -> None:
    with pytest.raises(UnsupportedQueryError) as info:
        split_recursive(REFUSED[construct])
    assert info.value.construct == construct


def test_members_of_different_widths_are_a_query_error() -> None:
    with pytest.raises(QueryError, match="reach has 2 columns but its members select 2 and 1"):
        split_recursive(
            "WITH RECURSIVE reach(a, b) AS (SELECT 1, 2 UNION "
            "SELECT r.a FROM reach r JOIN g.l x ON x.k = r.a) SELECT * FROM reach"
        )


@pytest.mark.parametrize(
    ("outer", "expected"),
    [
        ("SELECT * FROM reach", [("src", 0), ("dst", 1)]),
        ("SELECT dst AS node, r.src FROM reach r WHERE r.src = 1", [("node", 1), ("src", 0)]),
        ("SELECT dst FROM reach", None),  # two view rows may give one table row
        ("SELECT src, dst, 1 AS one FROM reach", None),
        ("SELECT src, MIN(dst) AS d FROM reach GROUP BY src", None),
        ("SELECT * FROM reach ORDER BY src LIMIT 3", None),
        ("SELECT r.src, l.dst FROM reach r JOIN g.links l ON l.src = r.dst", None),
    ],
)
def test_materialized_views_map_view_rows_one_to_one_onto_table_rows(
    outer: str, expected: list[tuple[str, int]] | None
) -> None:
    sql = f"""WITH RECURSIVE reach(src, dst) AS (SELECT src, dst FROM g.links
        UNION SELECT r.src, l.dst FROM reach r JOIN g.links l ON l.src = r.dst) {outer}"""
    query = split_recursive(sql)
    assert query is not None
    cte = pa.schema([("src", pa.int64()), ("dst", pa.int64())])
    if expected is None:
        with pytest.raises(UnsupportedQueryError, match="materialised view whose query is not"):
            materialized_columns(query, cte)
    else:
        assert materialized_columns(query, cte) == expected
    walks = split_recursive(sql.replace("UNION SELECT", "UNION ALL SELECT"))
    assert walks is not None
    with pytest.raises(UnsupportedQueryError, match=r"UNION ALL|materialised view whose query"):
        materialized_columns(walks, cte)
