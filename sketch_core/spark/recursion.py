"""``WITH RECURSIVE`` on Spark: its own recursion where it has one, semi-naive iteration with
DataFrames where it does not.

Spark 4.1 evaluates a recursive CTE whose members are joined by ``UNION ALL`` and refuses
``UNION`` (set semantics), which is what reachability over a graph with cycles needs: with
``UNION ALL`` every walk around a cycle is a new row and the recursion never ends. A query
with ``UNION`` is evaluated here instead, semi-naively (each round joins only the rows the
last round found, keeps those not seen before, and stops when there are none), and its outer
query reads the result as a temp view. Each round's rows are written out as Parquet under
the warehouse's scratch directory and read back, so a deep recursion does not grow one plan
per round. Depth is bounded by Spark's own
``spark.sql.cteRecursionLevelLimit``, as its recursion is.

A recursion whose outer query reads a cost only through MIN or MAX (least-cost paths:
:mod:`sketch_core.recursive.selection`) is evaluated here too, with ``UNION`` or ``UNION ALL``:
each round keeps, per group, only the rows that beat the group's best so far (Bellman-Ford).
That ends on graphs with cycles, where the query as Spark runs it never does, and gives the
answer the query defines.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from sqlglot import exp

from sketch_core.algebra.dialect import SPARK
from sketch_core.errors import QueryError
from sketch_core.recursive.query import RecursiveQuery, member_types_differ, split_recursive
from sketch_core.recursive.selection import AggregateSelection, find_selection, outer_aggregate
from sketch_core.spark.delta_partials import collect_scratch

LEVEL_LIMIT_CONF = "spark.sql.cteRecursionLevelLimit"
DEFAULT_LEVEL_LIMIT = 100
# Rows found past which a round joins them by sort-merge rather than as the planner likes.
BROADCAST_ROWS = 200_000
# Rounds of evaluations older than this are removed (an evaluation's outer query reads its
# rounds for as long as its frame is used, so they are not removed when it returns).
SCRATCH_HOURS = 6


class RecursionDepthError(QueryError):
    """A recursion that had not reached its fixpoint after the configured number of rounds."""

    def __init__(self, name: str, limit: int) -> None:
        super().__init__(
            f"the recursion of {name} found new rows in each of {limit} rounds without reaching a fixpoint",
            hint="bound it (for example WHERE hops < 20 in its recursive member) or raise "
            f"{LEVEL_LIMIT_CONF}",
        )
        self.name = name
        self.limit = limit


def recursive_frame(
    spark: SparkSession, sql: str, scratch: Path, params: Mapping[str, Any] | None = None
) -> DataFrame | None:
    """The query ``sql`` (its tables bound to views already) as a DataFrame when it holds a
    recursive CTE with ``UNION`` that Spark would refuse; None for every other query (Spark
    runs those itself). Each round's rows are written under ``scratch``."""
    if "recursive" not in sql.lower():  # most queries: not parsed again
        return None
    query = split_recursive(sql)
    if query is None or not (query.distinct or outer_aggregate(query)):
        return None
    evaluation = _Evaluation(spark, query, dict(params) if params else None, scratch)
    if not query.distinct and evaluation.selection is None:
        return None  # UNION ALL without a selection: Spark's own recursion
    collect_scratch(scratch, time.time() - SCRATCH_HOURS * 3600)
    return evaluation.frame()


class _Evaluation:
    """One semi-naive evaluation. Each round's new rows are written to Parquet and read back:
    a checkpoint that cuts the plan's lineage. (Spark's own checkpoints do not serve here: a
    plan that subtracts or unions two checkpoints of one lineage fails in Spark 4.1's optimizer
    with "key not found", and cached rounds make every plan as deep as all the rounds before.)"""

    def __init__(
        self, spark: SparkSession, query: RecursiveQuery, params: dict[str, Any] | None, scratch: Path
    ) -> None:
        self.spark = spark
        self.query = query
        self.params = params
        tag = uuid.uuid4().hex[:12]
        self.view = f"__recursive_{query.name}_{tag}"
        self.directory = scratch / tag
        with_ = query.outer.args["with_"]
        self.others = [cte for cte in with_.expressions if cte.alias_or_name != query.name]
        self.selection = self._selection() if outer_aggregate(query) else None

    def _selection(self) -> AggregateSelection | None:
        """The recursion's aggregate selection, from the columns of the tables its recursive
        member joins (other CTEs included)."""
        name = self.query.name
        joined = [t for t in self.query.step.find_all(exp.Table) if t.db or t.name != name]
        columns = [c for t in joined for c in self._sql(exp.select("*").from_(t.copy())).columns]
        return find_selection(self.query, columns)

    def frame(self) -> DataFrame:
        limit = int(self.spark.conf.get(LEVEL_LIMIT_CONF, str(DEFAULT_LEVEL_LIMIT)) or DEFAULT_LEVEL_LIMIT)
        first = self._sql(self.query.base).toDF(*self.query.columns)
        schema = first.schema
        paths = [self._written(self._kept(first, []), 0)]
        rounds = found_rows = 0
        while True:
            last = self.spark.read.schema(schema).parquet(paths[-1])
            new_rows = last.count()  # from the Parquet footers
            if not new_rows:
                break
            found_rows += new_rows
            if rounds >= limit:
                raise RecursionDepthError(self.query.name, limit)
            rounds += 1
            last.createOrReplaceTempView(f"{self.view}_delta")
            step = self._sql(self._reading(self.query.step, f"{self.view}_delta"))
            self._check_types(first, step)
            found = self.spark.read.schema(schema).parquet(*paths)
            new = self._kept(step.toDF(*self.query.columns), [found], found_rows > BROADCAST_ROWS)
            paths.append(self._written(new, rounds))
        self.spark.read.schema(schema).parquet(*paths).createOrReplaceTempView(self.view)
        outer = self._reading(self.query.outer, self.view)
        kept = outer.args["with_"]
        kept.set("expressions", [e for e in kept.expressions if e.alias_or_name != self.query.name])
        kept.set("recursive", False)
        if not kept.expressions:
            outer.set("with_", None)
        return self.spark.sql(outer.sql(dialect=SPARK), args=self.params)

    def _kept(self, rows: DataFrame, found: list[DataFrame], large: bool = False) -> DataFrame:
        """Of a round's ``rows``, those to keep: the new ones (set semantics), or under an
        aggregate selection each group's best where it beats the best ``found`` so far.
        ``large``: the rows found are many; they are then joined by sort-merge (their Parquet
        files look small to the planner, which broadcast a million rows and failed with "Not
        enough memory to build and broadcast the table")."""
        names = list(self.query.columns)
        if self.selection is None:
            distinct = rows.distinct()
            if not found:
                return distinct
            if not large:
                return distinct.subtract(found[0])
            seen = found[0].select(*[F.col(n).alias(f"__found_{i}") for i, n in enumerate(names)])
            on = [distinct[n].eqNullSafe(seen[f"__found_{i}"]) for i, n in enumerate(names)]
            return distinct.join(seen.hint("merge"), on, "left_anti")
        cost = names[self.selection.cost]
        groups = [names[i] for i in self.selection.groups]
        aggregate = F.min if self.selection.kind == "min" else F.max

        def best(frame: DataFrame) -> DataFrame:
            keys = [F.col(g) for g in groups] or [F.lit(0)]  # no groups: no row from no rows
            return frame.groupBy(*keys).agg(aggregate(cost).alias(cost)).select(*names)

        candidates = best(rows)
        if not found:
            return candidates
        so_far = best(found[0]).select(
            *[F.col(g).alias(f"__best_{i}") for i, g in enumerate(groups)],
            F.col(cost).alias("__best"),
            F.lit(True).alias("__seen"),
        )
        on = [candidates[g].eqNullSafe(so_far[f"__best_{i}"]) for i, g in enumerate(groups)]
        beats = (
            candidates[cost] < F.col("__best")
            if self.selection.kind == "min"
            else candidates[cost] > F.col("__best")
        )
        joined = candidates.join(so_far.hint("merge") if large else so_far, on or F.lit(True), "left")
        new = F.col("__seen").isNull() | (candidates[cost].isNotNull() & (F.col("__best").isNull() | beats))
        return joined.where(new).select(*[candidates[n] for n in names])

    def _written(self, frame: DataFrame, round_: int) -> str:
        path = str(self.directory / f"round_{round_:04d}")
        frame.write.mode("overwrite").parquet(path)
        return path

    def _sql(self, select: exp.Expr) -> DataFrame:
        node = select.copy()
        if self.others:  # the members may read the query's other CTEs
            node.set("with_", exp.With(expressions=[cte.copy() for cte in self.others]))
        return self.spark.sql(node.sql(dialect=SPARK), args=self.params)

    def _reading(self, node: exp.Expr, view: str) -> exp.Expr:
        """``node`` with its references to the recursive CTE reading ``view`` (aliases kept)."""
        name = self.query.name

        def swap(n: exp.Expr) -> exp.Expr:
            if isinstance(n, exp.Table) and not n.args.get("db") and n.name == name:
                alias = exp.TableAlias(this=exp.to_identifier(n.alias or name))
                return exp.Table(this=exp.to_identifier(view), alias=alias)
            return n

        return node.copy().transform(swap)

    def _check_types(self, base: DataFrame, step: DataFrame) -> None:
        """Spark does not widen a recursive CTE's column types between its members (it refuses
        the query when they differ), and neither does this."""
        for column, left, right in zip(self.query.columns, base.schema, step.schema, strict=True):
            if left.dataType != right.dataType:
                raise member_types_differ(
                    self.query.name,
                    column,
                    right.dataType.simpleString(),
                    left.dataType.simpleString(),
                    self.query.step,
                )


def plain_frame(
    spark: SparkSession, sql: str, scratch: Path, params: Mapping[str, Any] | None = None
) -> DataFrame:
    """The query ``sql`` (its tables bound already) as Spark runs it, recursions with ``UNION``
    included (their rounds written under ``scratch``)."""
    frame = recursive_frame(spark, sql, scratch, params)
    return frame if frame is not None else spark.sql(sql, args=dict(params) if params else None)
