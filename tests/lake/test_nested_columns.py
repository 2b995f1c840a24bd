"""A table Spark created with nested columns beside the ones reports read: a struct, an array
and a map, partitioned by ``days(ts)``, with column names in mixed case (``UserId``), which
reports name in any case, as Spark resolves them. The default capture sketches a column a range partition
can cut (never the nested ones, which it cannot order); naming a nested one is refused by its
type; a Spark DELETE (copy-on-write: whole files rewritten, their rows compared) is maintained
incrementally, equal to a fresh capture, and the sketched report equals the plain one."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from sketch_core.errors import QueryError
from sketch_core.service.facade import SketchService
from tests.oracles.results import sorted_rows
from tests.service.test_maintain import fresh_fragments, maintained

pytestmark = pytest.mark.spark

NESTED = ("payload", "tags", "props")
REPORTS = {
    "struct_group": "SELECT payload.a AS pa, SUM(amount) AS s FROM {t} GROUP BY payload.a "
    "HAVING SUM(amount) > 2000",
    "user_top": "SELECT userid, SUM(Amount) AS spent, MAX(ts) AS last FROM {t} "
    "WHERE array_contains(tags, 't1') GROUP BY UserId ORDER BY spent DESC, userid LIMIT 5",
}


def test_nested_columns_are_never_sketched_and_their_rows_are_maintained(
    spark_svc: SketchService, spark: SparkSession, ns: str
) -> None:
    svc, table = spark_svc, f"{ns}.events"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS lake.{ns}")
    spark.sql(
        f"""CREATE TABLE lake.{table} (id BIGINT, ts TIMESTAMP, UserId BIGINT, Amount DECIMAL(10,2),
        payload STRUCT<a: INT, b: STRING>, tags ARRAY<STRING>, props MAP<STRING, INT>)
        USING iceberg PARTITIONED BY (days(ts))"""
    )
    spark.sql(
        f"""INSERT INTO lake.{table} SELECT id,
        TIMESTAMP '2024-03-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id * 40),
        pmod(id * 7919, 300), CAST(pmod(id * 104729, 10000) / 100.0 AS DECIMAL(10,2)),
        IF(id % 11 = 0, NULL, named_struct('a', CAST(id % 13 AS INT), 'b', concat('x', id % 7))),
        slice(array('t0', 't1', 't2'), 1, CAST(id % 3 + 1 AS INT)), map('k', CAST(id % 5 AS INT))
        FROM range(12000)"""
    )
    reports = {f"{ns}_{label}": sql.format(t=table) for label, sql in REPORTS.items()}
    for name, sql in reports.items():
        version = svc.capture(sql, name=name, fragments=16, with_state=True)
        assert version.fragments and not set(a for a, _ in version.partitions.values()) & set(NESTED)
    named = svc.capture(reports[f"{ns}_user_top"], name=f"{ns}_named", attributes={table: "userid"})
    assert named.partitions[table][0] == "UserId"  # the name as the table spells it
    with pytest.raises(QueryError, match="struct"):
        svc.capture(
            REPORTS["struct_group"].format(t=table), name=f"{ns}_nested", attributes={table: "payload"}
        )

    spark.sql(f"DELETE FROM lake.{table} WHERE id % 97 = 3 OR payload IS NULL AND id < 2000")
    sequence = svc.latest_sequence()
    for name, sql in reports.items():
        assert [run.strategy for run in svc.maintain(name, strategy="incremental")] == ["incremental"]
        assert maintained(svc, name) == fresh_fragments(svc, sql, name, sequence)
        plain = svc.query(sql, use_sketches=False).table
        used = svc.query(sql, use_sketches="always")
        assert plain.num_rows > 0, "the report must return rows, or the oracle is vacuous"
        assert used.sketch is not None and sorted_rows(used.table) == sorted_rows(plain)


def test_a_report_filtering_on_a_flag_is_captured_on_another_column(
    spark_svc: SketchService, spark: SparkSession, ns: str
) -> None:
    """A boolean column is no sketch attribute (two values skip nothing, and Spark's range
    partitioning refuses them): the default choice for a report whose WHERE is a flag had
    picked it, and the capture failed with PartitionError. Naming it is refused by its type."""
    svc, table = spark_svc, f"{ns}.flagged"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS lake.{ns}")
    spark.sql(
        f"""CREATE TABLE lake.{table} (id BIGINT, ts TIMESTAMP, amount DECIMAL(10,2), region STRING,
        flag BOOLEAN) USING iceberg PARTITIONED BY (days(ts))"""
    )
    spark.sql(
        f"""INSERT INTO lake.{table} SELECT id,
        TIMESTAMP '2024-03-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id * 37),
        CAST(pmod(id * 104729, 10000) / 100.0 AS DECIMAL(10,2)), concat('r', pmod(id, 4)), pmod(id, 3) = 0
        FROM range(40000)"""
    )
    sql = (
        f"SELECT hour(ts) AS hr, SUM(amount) AS s FROM {table} WHERE flag AND NOT (region = 'r0') "
        "GROUP BY hour(ts) HAVING SUM(amount) > 7800"
    )
    version = svc.capture(sql, name=f"{ns}_flagged")
    assert version.partitions[table][0] != "flag"
    plain = svc.query(sql, use_sketches=False).table
    assert sorted_rows(svc.query(sql, use_sketches="always").table) == sorted_rows(plain)
    with pytest.raises(QueryError, match="bool"):
        svc.capture(sql, name=f"{ns}_on_flag", attributes={table: "flag"})
