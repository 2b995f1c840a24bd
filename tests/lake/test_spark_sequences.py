"""Generated sequences of Spark commits, on copy-on-write and merge-on-read tables.

Hypothesis draws a sequence of Spark ``INSERT``, ``DELETE``, ``UPDATE`` (which moves rows
between the sketch's fragments) and ``MERGE`` statements; after each commit, every maintained
sketch equals a fresh capture, and every sketched report (``svc.query`` with the sketch and the
lazy ``svc.sketched`` frame) equals the plain query at that snapshot.

``SEQUENCES`` sequences per delete mode under the ``ci`` profile, 200 under
``SKETCH_HYPOTHESIS_PROFILE=long``; the draw is derandomized (the same sequences every run)
unless ``SKETCH_SEQUENCE_SEED`` gives a seed.
"""

from __future__ import annotations

import itertools
import os

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from sketch_core.datasets import synthetic_table
from sketch_core.service.facade import SketchService
from tests.lake.test_merge_on_read import MERGE_ON_READ
from tests.oracles.results import sorted_rows
from tests.service.test_maintain import HAVING, TOPK, fresh_fragments, maintained

pytestmark = pytest.mark.spark

LONG = os.environ.get("SKETCH_HYPOTHESIS_PROFILE") == "long"
SEQUENCES = 200 if LONG else 2
SEQUENCE_SEED = int(os.environ.get("SKETCH_SEQUENCE_SEED", "20261128"))
GROUPS = 12
_tables = itertools.count()

# (kind, a group, a divisor): which rows a statement touches.
STEP = st.tuples(
    st.sampled_from(["insert", "delete", "update", "merge"]),
    st.integers(0, GROUPS - 1),
    st.integers(1, 5),
)


def statement(table: str, step: tuple[str, int, int], number: int) -> str:
    kind, group, divisor = step
    if kind == "insert":  # copies of a group's rows under new keys
        return f"""INSERT INTO lake.{table} SELECT key + {number * 1_000_000}, a, b, c, d, e, f, g, h, i, j
            FROM lake.{table} WHERE a = {group} AND key % {divisor} = 0"""
    if kind == "delete":
        return f"DELETE FROM lake.{table} WHERE a = {group} AND key % {divisor} = 0"
    if kind == "update":  # moves rows to the next group: both groups' results change
        return f"""UPDATE lake.{table} SET a = {(group + 1) % GROUPS}, b = b DIV 2
            WHERE a = {group} AND key % {divisor} = 0"""
    return f"""MERGE INTO lake.{table} t
        USING (SELECT key FROM lake.{table} WHERE a = {group} ORDER BY key LIMIT {divisor * 7}) s
        ON t.key = s.key
        WHEN MATCHED AND t.key % 2 = 0 THEN DELETE
        WHEN MATCHED THEN UPDATE SET t.c = t.c / 2, t.e = t.e + 1"""


def run_sequence(
    svc: SketchService, spark: SparkSession, namespace: str, mode: str, steps: list[tuple[str, int, int]]
) -> None:
    table = f"{namespace}.seq{next(_tables)}"
    svc.tables.create(table, synthetic_table(1200, GROUPS, seed=len(steps)), sort_by=["a"])
    if mode == "merge-on-read":
        spark.sql(f"ALTER TABLE lake.{table} SET TBLPROPERTIES ({MERGE_ON_READ})")
    reports = {f"{table.replace('.', '_')}_{i}": q.format(t=table) for i, q in enumerate((HAVING, TOPK))}
    for name, sql in reports.items():
        svc.capture(sql, name=name, attributes={table: "a"}, fragments=8)
    for number, step in enumerate(steps, start=1):
        spark.sql(statement(table, step, number))
        seq = svc.latest_sequence()
        for name, sql in reports.items():
            svc.maintain(name)
            assert maintained(svc, name) == fresh_fragments(svc, sql, name, seq), (step, name)
            plain = sorted_rows(svc.query(sql, use_sketches=False).table)
            used = svc.query(sql, use_sketches="always")
            assert used.sketch is not None and sorted_rows(used.table) == plain, (step, name)
            frame = svc.sketched(sql, snapshot=seq, use_sketches="always")
            assert sorted_rows(pa.Table.from_pandas(frame.toPandas(), preserve_index=False)) == plain


@pytest.mark.parametrize("mode", ["copy-on-write", "merge-on-read"])
@seed(SEQUENCE_SEED)
@settings(
    max_examples=SEQUENCES,
    deadline=None,
    derandomize="SKETCH_SEQUENCE_SEED" not in os.environ,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(STEP, min_size=1, max_size=3))
def test_sketches_follow_generated_spark_commits(
    spark_svc: SketchService, spark: SparkSession, ns: str, mode: str, steps: list[tuple[str, int, int]]
) -> None:
    run_sequence(spark_svc, spark, ns, mode, steps)
