"""Safety (PBDS Sec. 6) and reuse (PBDS Sec. 7) checks on the paper's examples."""

from __future__ import annotations

import pytest

from sketch_core.algebra.frontend import to_ir
from sketch_core.analysis.reuse import can_reuse
from sketch_core.analysis.safety import check_safety, choose_attributes, ordering_attributes

CITIES = {"t.cities": [("popden", "bigint"), ("city", "string"), ("state", "string")]}
# Population densities are positive (Iceberg min/max statistics).
STATS = {"t.cities": {"popden": (1000, 9000)}}


def plan(sql: str, params: dict[str, object] | None = None):  # type: ignore[no-untyped-def]
    return to_ir(sql, CITIES, params).plan


@pytest.mark.parametrize(
    ("sql", "attribute", "safe"),
    [
        # PBDS Ex. 4: top-1 state by avg(popden); a sketch on popden is unsafe, on state safe.
        (
            "SELECT state, AVG(popden) AS a FROM t.cities GROUP BY state ORDER BY a DESC LIMIT 1",
            "popden",
            False,
        ),
        (
            "SELECT state, AVG(popden) AS a FROM t.cities GROUP BY state ORDER BY a DESC LIMIT 1",
            "state",
            True,
        ),
        # PBDS Ex. 6/7: with sum over positive values the sketch on popden is safe ...
        (
            "SELECT state, SUM(popden) AS a FROM t.cities GROUP BY state ORDER BY a DESC LIMIT 1",
            "popden",
            True,
        ),
        # ... but not for the bottom-1 (a partial sum ranks lower).
        (
            "SELECT state, SUM(popden) AS a FROM t.cities GROUP BY state ORDER BY a ASC LIMIT 1",
            "popden",
            False,
        ),
        ("SELECT state, COUNT(*) AS c FROM t.cities GROUP BY state HAVING COUNT(*) > 3", "popden", True),
        ("SELECT state, COUNT(*) AS c FROM t.cities GROUP BY state HAVING COUNT(*) < 3", "popden", False),
        (
            "SELECT state, MIN(popden) AS m FROM t.cities GROUP BY state HAVING MIN(popden) < 2000",
            "city",
            True,
        ),
        (
            "SELECT state, MIN(popden) AS m FROM t.cities GROUP BY state HAVING MIN(popden) > 2000",
            "city",
            False,
        ),
        ("SELECT DISTINCT state FROM t.cities WHERE popden > 5000", "city", True),  # monotone
        # Looker's COALESCE(SUM(x), 0): a partial sum of positive values, or 0 where it is NULL,
        # is still at most the full one; a fallback above the sums is not.
        (
            "SELECT state, COALESCE(SUM(popden), 0) AS a FROM t.cities GROUP BY state "
            "ORDER BY a DESC LIMIT 1",
            "city",
            True,
        ),
        (
            "SELECT state, COALESCE(SUM(popden), 0) AS a FROM t.cities GROUP BY state "
            "HAVING COALESCE(SUM(popden), 0) > 5000",
            "city",
            True,
        ),
        (
            "SELECT state, COALESCE(SUM(popden), 99999999) AS a FROM t.cities GROUP BY state "
            "ORDER BY a DESC LIMIT 1",
            "city",
            False,
        ),
        (
            "SELECT state, COALESCE(SUM(popden), 0) AS a FROM t.cities GROUP BY state ORDER BY a ASC LIMIT 1",
            "city",
            False,
        ),
        # SUM(IFNULL(x, 0)) / SUM(COALESCE(x, y, 0)): each row's value is one of the
        # arguments, all non-negative, so a partial sum is smaller; a negative fallback is not.
        (
            "SELECT state, SUM(IFNULL(popden, 0)) AS a FROM t.cities GROUP BY state ORDER BY a DESC LIMIT 1",
            "city",
            True,
        ),
        (
            "SELECT state, SUM(COALESCE(popden, popden * 2, 0)) AS a FROM t.cities GROUP BY state "
            "HAVING SUM(COALESCE(popden, popden * 2, 0)) > 5000",
            "city",
            True,
        ),
        (
            "SELECT state, SUM(NVL(popden, -1)) AS a FROM t.cities GROUP BY state ORDER BY a DESC LIMIT 1",
            "city",
            False,
        ),
        # Tableau's SUM(CAST(x AS BIGINT)) keeps x's sign: a partial sum of positive values
        # is smaller, of negative ones larger.
        (
            "SELECT state, SUM(CAST(popden AS BIGINT)) AS a FROM t.cities GROUP BY state "
            "HAVING SUM(CAST(popden AS BIGINT)) >= 5000",
            "city",
            True,
        ),
        (
            "SELECT state, SUM(CAST(-popden AS BIGINT)) AS a FROM t.cities GROUP BY state "
            "HAVING SUM(CAST(-popden AS BIGINT)) >= -5000",
            "city",
            False,
        ),
        ("SELECT city FROM t.cities WHERE popden > 3000", "state", True),
        # Aggregate functions the project does not evaluate: nothing is known of their value
        # over part of a group, so a condition on one holds the same only on whole groups; a
        # shown one decides nothing.
        (
            "SELECT state, STDDEV(popden) AS sd FROM t.cities GROUP BY state HAVING STDDEV(popden) > 900",
            "state",
            True,
        ),
        (
            "SELECT state, STDDEV(popden) AS sd FROM t.cities GROUP BY state HAVING STDDEV(popden) > 900",
            "city",
            False,
        ),
        (
            "SELECT state, MAX_BY(city, popden) AS densest FROM t.cities GROUP BY state "
            "ORDER BY densest LIMIT 2",
            "popden",
            False,
        ),
        # Other window functions: the same value only over whole partitions.
        (
            "SELECT city FROM (SELECT city, popden, LAG(popden) OVER (PARTITION BY state ORDER BY city) "
            "AS prev FROM t.cities) WHERE popden > prev",
            "state",
            True,
        ),
        (
            "SELECT city FROM (SELECT city, popden, LAG(popden) OVER (PARTITION BY state ORDER BY city) "
            "AS prev FROM t.cities) WHERE popden > prev",
            "city",
            False,
        ),
        (
            "SELECT state, COUNT(*) AS c, STDDEV(popden) AS sd, MAX_BY(city, popden) AS densest "
            "FROM t.cities GROUP BY state HAVING COUNT(*) > 3",
            "popden",
            True,
        ),
    ],
)
def test_safety(sql: str, attribute: str, safe: bool) -> None:
    result = check_safety(plan(sql), {"t.cities": attribute}, STATS)
    assert result.safe is safe
    assert (result.reason is None) is safe


def test_sum_over_possibly_negative_values_is_unsafe_without_statistics() -> None:
    sql = "SELECT state, SUM(popden) AS a FROM t.cities GROUP BY state ORDER BY a DESC LIMIT 1"
    assert not check_safety(plan(sql), {"t.cities": "popden"}, {}).safe


def test_choose_attributes_takes_the_first_safe_candidate_and_says_why_others_failed() -> None:
    sql = "SELECT state, AVG(popden) AS a FROM t.cities GROUP BY state ORDER BY a DESC LIMIT 1"
    choice = choose_attributes(plan(sql), {"t.cities": ["popden", "state"]}, STATS)
    assert choice.chosen == {"t.cities": "state"}
    assert [a for a, _ in choice.refused["t.cities"]] == ["popden"]
    assert "ORDER BY" in choice.refused["t.cities"][0][1]


EX8 = "SELECT state, COUNT(*) AS cnt FROM t.cities WHERE popden > :p1 GROUP BY state HAVING COUNT(*) > :p2"


@pytest.mark.parametrize(
    ("binding", "reusable"),
    [
        ((1500, 15), True),  # PBDS Ex. 8
        ((1500, 10), True),  # the same binding
        ((2000, 10), True),  # fewer rows per group, and fewer groups pass
        ((1500, 5), False),  # admits groups the sketch left out
        ((1200, 10), False),  # admits rows the sketch left out
    ],
)
def test_reuse_across_bindings(binding: tuple[int, int], reusable: bool) -> None:
    captured = plan(EX8, {"p1": 1500, "p2": 10})
    new = plan(EX8, {"p1": binding[0], "p2": binding[1]})
    result = can_reuse(captured, new, STATS)
    assert result.reusable is reusable
    assert (result.reason is None) is reusable


def test_reuse_of_top_k_needs_the_same_input_and_no_larger_k() -> None:
    template = (
        "SELECT state, SUM(popden) AS s FROM t.cities WHERE popden > :p GROUP BY state "
        "ORDER BY s DESC LIMIT :k"
    )
    captured = plan(template, {"p": 1500, "k": 5})
    assert can_reuse(captured, plan(template, {"p": 1500, "k": 3}), STATS).reusable
    assert not can_reuse(captured, plan(template, {"p": 1500, "k": 8}), STATS).reusable
    assert not can_reuse(captured, plan(template, {"p": 2000, "k": 3}), STATS).reusable


def test_reuse_refuses_different_shapes() -> None:
    a = plan("SELECT state FROM t.cities WHERE popden > 1")
    b = plan("SELECT city FROM t.cities WHERE popden > 1")
    assert not can_reuse(a, b, STATS).reusable


TOP_PER_STATE = (
    "SELECT state, city, p FROM (SELECT state, city, SUM(popden) AS p, "
    "RANK() OVER (PARTITION BY state ORDER BY SUM(popden) DESC) AS r FROM t.cities GROUP BY state, city) x "
    "WHERE r <= 2"
)
COUNTS_PER_STATE = (
    "SELECT city, n FROM (SELECT city, COUNT(*) OVER (PARTITION BY state ORDER BY popden) AS n "
    "FROM t.cities) x WHERE n {} 3"
)
# The count a left join matches on, which a sketch on popden cuts short.
PADDED_ON_A_COUNT = (
    "SELECT g.state, o.city FROM (SELECT state, COUNT(*) AS n FROM t.cities GROUP BY state) g "
    "LEFT JOIN t.cities o ON g.n = o.popden"
)


@pytest.mark.parametrize(
    ("sql", "attribute", "unsafe_because"),
    [
        # A city's matches on the padded side do not depend on the other cities: safe.
        (
            "SELECT c.state, COUNT(o.city) AS n FROM t.cities c LEFT JOIN t.cities o "
            "ON c.city = o.state GROUP BY c.state HAVING COUNT(o.city) > 2",
            "popden",
            None,
        ),
        # A state could come out padded on the sketch and matched on the full data.
        (PADDED_ON_A_COUNT, "popden", "padded"),
        (PADDED_ON_A_COUNT, "state", None),
        # Windows: partitions in one fragment are wholly in the sketch or not at all; under a
        # top-N filter the sketch holds each state's first cities, so any attribute that keeps
        # the ranks' order keys equal will do (city: SUM(popden) per city is whole), one that
        # cuts a city's sum short will not.
        (TOP_PER_STATE, "state", None),
        (TOP_PER_STATE, "city", None),
        (TOP_PER_STATE, "popden", "ORDER BY"),
        # A running count is at most the full one on part of a partition: a filter keeping
        # small counts is unsafe, one keeping large counts safe.
        (COUNTS_PER_STATE.format("<"), "city", "condition"),
        (COUNTS_PER_STATE.format(">"), "city", None),
    ],
)
def test_safety_of_outer_joins_and_windows(sql: str, attribute: str, unsafe_because: str | None) -> None:
    result = check_safety(plan(sql), {"t.cities": attribute}, STATS)
    assert result.safe is (unsafe_because is None), result.reason
    if unsafe_because is not None:
        assert unsafe_because in (result.reason or "")


def test_ordering_attributes_are_the_columns_a_top_k_over_rows_orders_by() -> None:
    rows = plan("SELECT city, popden FROM t.cities WHERE state = 'CA' ORDER BY popden DESC, city LIMIT 5")
    assert ordering_attributes(rows) == {"t.cities": ["popden", "city"]}
    grouped = plan("SELECT state, MAX(popden) AS m FROM t.cities GROUP BY state ORDER BY state LIMIT 5")
    assert ordering_attributes(grouped) == {}  # the ordering is over groups, not rows
    assert ordering_attributes(plan("SELECT city FROM t.cities ORDER BY popden * 2 DESC LIMIT 5")) == {}
    assert check_safety(rows, {"t.cities": "popden"}, STATS).safe


@pytest.mark.parametrize("attribute", ["popden", "state", "city"])
def test_a_long_in_list_gets_the_verdicts_of_a_short_one(attribute: str) -> None:
    # BI tools print filters on thousands of values; the solver took seconds per check on them.
    template = (
        "SELECT state, SUM(popden) AS a FROM t.cities WHERE city IN ({cities}) AND popden NOT IN ({dens}) "
        "GROUP BY state ORDER BY a DESC LIMIT 1"
    )
    short = template.format(cities="'a', 'b'", dens="1, 2")
    long = template.format(
        cities=", ".join(f"'c{i}'" for i in range(2000)), dens=", ".join(str(i) for i in range(2000))
    )
    verdicts = [check_safety(plan(q), {"t.cities": attribute}, STATS).safe for q in (short, long)]
    assert verdicts[0] == verdicts[1]
