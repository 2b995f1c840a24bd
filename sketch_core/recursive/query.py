"""``WITH RECURSIVE`` queries: split into their members, and checked for the recursions the
engines maintain (:mod:`.rule`): linear, stratified, one recursive CTE.

A recursive CTE is ``name(columns) AS (base UNION [ALL] step)``: ``base`` does not read
``name``; ``step`` reads it exactly once, in its FROM clause, joined with other tables. What
else is refused, each by name (:class:`~sketch_core.errors.UnsupportedQueryError`):

* ``name`` read twice in ``step`` (non-linear recursion: ``path JOIN path``);
* ``name`` read inside a subquery of ``step`` (under ``NOT EXISTS``/``NOT IN``, a negation of
  the relation being defined, which has no stratification; elsewhere not linear);
* aggregation, DISTINCT, window functions, ORDER BY or LIMIT in ``step``, and outer joins
  (none of them is monotone: a row derived once could be taken back by a later iteration);
* two CTEs that read each other, or more than one recursive CTE; more than two members.

Example: ``WITH RECURSIVE reach(src, dst) AS (SELECT src, dst FROM g.links UNION SELECT r.src,
l.dst FROM reach r JOIN g.links l ON l.src = r.dst) SELECT dst FROM reach WHERE src = 1``
splits into the base member over ``g.links``, the step joining ``reach`` with ``g.links``, set
semantics (UNION), and the outer query reading ``reach``.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from sketch_core.algebra.dialect import SPARK
from sketch_core.errors import QueryError, UnsupportedQueryError


@dataclass(frozen=True)
class RecursiveQuery:
    name: str
    columns: tuple[str, ...]
    base: exp.Select
    step: exp.Select
    distinct: bool  # UNION (set semantics) rather than UNION ALL
    outer: exp.Expr  # the query that reads the CTE (with the WITH clause as written)


def where(node: exp.Expr) -> str:
    """The SQL of ``node``, for error messages."""
    return node.sql(dialect=SPARK)


def member_types_differ(name: str, column: str, step_type: str, base_type: str, step: exp.Expr) -> QueryError:
    """The error for a recursive member that gives ``column`` another type than the base member
    (Spark does not widen a recursive CTE's columns between its members: it refuses the query)."""
    return QueryError(
        f"the recursive member of {name} gives {column} as {step_type} where its base member gives "
        f"{base_type}: {where(step)[:200]!r}",
        hint="cast one of them, for example CAST(0 AS BIGINT) in the base member",
    )


def _reads(node: exp.Expr, name: str) -> list[exp.Table]:
    """The references to the relation ``name`` in ``node`` (unqualified table names only: a
    CTE has no database)."""
    return [t for t in node.find_all(exp.Table) if not t.args.get("db") and t.name == name]


def split_recursive(sql: str | exp.Expr) -> RecursiveQuery | None:
    """The recursive CTE of ``sql`` and its members, checked; None without ``WITH RECURSIVE``."""
    tree = sqlglot.parse_one(sql, dialect=SPARK) if isinstance(sql, str) else sql
    with_ = tree.args.get("with_")
    if with_ is None or not with_.args.get("recursive"):
        return None
    ctes = {cte.alias_or_name: cte for cte in with_.expressions}
    recursive = [name for name, cte in ctes.items() if _reads(cte.this, name)]
    for name, cte in ctes.items():
        for other in ctes:
            if other != name and _reads(cte.this, other) and _reads(ctes[other].this, name):
                raise UnsupportedQueryError(
                    f"mutual recursion ({name} and {other} read each other)", where(cte)
                )
    if len(recursive) > 1:
        raise UnsupportedQueryError(f"more than one recursive CTE ({', '.join(recursive)})", where(with_))
    if not recursive:
        return None  # WITH RECURSIVE over CTEs that do not recur: ordinary CTEs
    name = recursive[0]
    cte = ctes[name]
    body = cte.this
    if not isinstance(body, exp.Union) or isinstance(body.left, exp.Union):
        raise UnsupportedQueryError(
            f"a recursive CTE that is not one base member UNION one recursive member ({name})", where(cte)
        )
    base, step = body.left, body.right
    if not isinstance(base, exp.Select) or not isinstance(step, exp.Select):
        raise UnsupportedQueryError(f"a member of {name} that is not a SELECT", where(body))
    if _reads(base, name):
        raise UnsupportedQueryError(f"{name} read by its base member (the first one)", where(base))
    _check_step(step, name)
    alias = cte.args.get("alias")
    listed = tuple(c.name for c in alias.columns) if alias is not None and alias.columns else ()
    columns = listed or tuple(e.alias_or_name for e in base.expressions)
    if len(columns) != len(base.expressions) or len(columns) != len(step.expressions):
        raise QueryError(
            f"{name} has {len(columns)} columns but its members select {len(base.expressions)} and "
            f"{len(step.expressions)}: {where(cte)[:200]!r}"
        )
    return RecursiveQuery(name, columns, base, step, bool(body.args.get("distinct")), tree)


def _check_step(step: exp.Select, name: str) -> None:
    reads = _reads(step, name)
    if len(reads) > 1:
        raise UnsupportedQueryError(
            f"non-linear recursion ({name} read {len(reads)} times in one member)", where(step)
        )
    if not reads:
        raise UnsupportedQueryError(f"a recursive member that does not read {name}", where(step))
    read = reads[0]
    if read.find_ancestor(exp.Subquery, exp.Exists, exp.In) is not None:
        if read.find_ancestor(exp.Not) is not None:
            raise UnsupportedQueryError(
                f"{name} negated in its own recursive member (not stratifiable)", where(step)
            )
        raise UnsupportedQueryError(f"{name} read inside a subquery of its recursive member", where(step))
    refused = {
        "group": "GROUP BY",
        "having": "HAVING",
        "distinct": "DISTINCT",
        "order": "ORDER BY",
        "limit": "LIMIT",
        "qualify": "QUALIFY",
    }
    for key, what in refused.items():
        if step.args.get(key):
            raise UnsupportedQueryError(
                f"{what} in the recursive member of {name} (not monotone)", where(step)
            )
    if step.find(exp.AggFunc) is not None:
        raise UnsupportedQueryError(
            f"an aggregate in the recursive member of {name} (not monotone)", where(step)
        )
    if step.find(exp.Window) is not None:
        raise UnsupportedQueryError(f"a window function in the recursive member of {name}", where(step))
    for join in step.args.get("joins") or []:
        if join.side:  # padded rows appear and vanish as matches come and go: not monotone
            raise UnsupportedQueryError(
                f"a {join.side.upper()} JOIN in the recursive member of {name} (not monotone)", where(join)
            )
