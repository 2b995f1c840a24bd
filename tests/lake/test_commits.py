"""Every engine's commits get global sequence numbers, and the project follows them.

Spark (through Iceberg's runtime and the JDBC catalog) and PyIceberg used directly commit to the
same tables as the table service; the catalog's trigger numbers each commit in visibility order
and the service records it from its metadata. The oracles: each commit is listed once, in order,
with its operation and rows; the project's read of the table at each sequence equals Spark's
read of the same snapshot; a sketch maintained across them equals a fresh capture.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyspark.sql import SparkSession
from sqlalchemy import text

from sketch_core.datasets import synthetic_table
from sketch_core.errors import (
    ColumnsDroppedError,
    SketchTableDroppedError,
    TableError,
    UnsupportedTableFeatureError,
)
from sketch_core.service.facade import SketchService
from tests.oracles.results import sorted_rows
from tests.service.test_maintain import HAVING, fresh_fragments, maintained, sibling

pytestmark = pytest.mark.spark


def _spark_rows(spark: SparkSession, table: str, snapshot_id: int) -> list[tuple[object, ...]]:
    frame = spark.sql(f"SELECT * FROM lake.{table} VERSION AS OF {snapshot_id}")
    return sorted_rows(pa.Table.from_pandas(frame.toPandas(), preserve_index=False))


def test_spark_s_commits_are_numbered_recorded_and_read_at_their_snapshots(
    spark_svc: SketchService, spark: SparkSession, ns: str
) -> None:
    svc, table = spark_svc, f"{ns}.facts"
    created = svc.tables.create(table, synthetic_table(3000, 30, seed=7), sort_by=["a"])
    name = f"{ns}_having"
    sql = HAVING.format(t=table)
    svc.capture(sql, name=name, attributes={table: "a"}, fragments=20)

    statements = {
        "append": f"""INSERT INTO lake.{table}
            SELECT key + 1000000, a, b, c, d, e, f, g, h, i, j FROM lake.{table} WHERE a < 3""",
        "delete": f"DELETE FROM lake.{table} WHERE a = 5",
        "update": f"UPDATE lake.{table} SET b = b + 100 WHERE a = 7",
        "merge": f"""MERGE INTO lake.{table} t
            USING (SELECT key FROM lake.{table} WHERE a = 9 ORDER BY key LIMIT 3) s
            ON t.key = s.key
            WHEN MATCHED THEN DELETE""",
        # Dynamic overwrite of an unpartitioned table: every row replaced by the selected ones.
        "insert overwrite": f"INSERT OVERWRITE lake.{table} SELECT * FROM lake.{table} WHERE a <> 11",
    }
    seen = [created]
    for label, statement in statements.items():
        spark.sql(statement)
        seq = svc.latest_sequence()
        assert seq > seen[-1], f"{label}: numbered after the commit before it"
        seen.append(seq)
        (commit,) = svc.tables.commits(table)[-1:]
        assert commit.seq == seq
        rows = svc.tables.read_arrow(table, seq)
        assert commit.total_rows == rows.num_rows
        assert sorted_rows(rows) == _spark_rows(spark, table, commit.snapshot_id), label
        (run,) = svc.maintain(name)
        assert run.to_version == len(seen)
        assert maintained(svc, name) == fresh_fragments(svc, sql, name, seq), label
    commits = svc.tables.commits(table)
    assert [c.seq for c in commits] == seen
    assert [c.operation for c in commits][:2] == ["create", "append"]
    appended = commits[1]
    assert appended.added_rows == appended.total_rows - commits[0].total_rows > 0
    assert commits[2].total_rows == commits[1].total_rows - commits[2].deleted_rows + commits[2].added_rows


def test_a_table_spark_creates_is_registered_and_a_metadata_change_is_not_a_commit(
    spark_svc: SketchService, spark: SparkSession, ns: str
) -> None:
    svc, table = spark_svc, f"{ns}.events"
    spark.sql(f"CREATE TABLE lake.{table} (id BIGINT, kind STRING) USING iceberg")
    spark.sql(f"ALTER TABLE lake.{table} WRITE ORDERED BY id")
    spark.sql(f"INSERT INTO lake.{table} VALUES (2, 'b'), (1, 'a')")
    before = svc.latest_sequence()
    spark.sql(f"ALTER TABLE lake.{table} SET TBLPROPERTIES ('comment' = 'no rows change')")
    assert svc.latest_sequence() == before, "a property change changes no rows"
    commits = svc.tables.commits(table)
    assert [(c.operation, c.added_rows, c.total_rows) for c in commits] == [
        ("create", 0, 0),
        ("append", 2, 2),
    ]
    assert svc.tables.commit_log.get_table(table).sort_by == ("id",)  # type: ignore[union-attr]
    assert sorted(svc.tables.read_arrow(table)["id"].to_pylist()) == [1, 2]

    spark.sql(f"DROP TABLE lake.{table}")
    assert svc.tables.commits()[-1].operation == "drop"
    assert svc.tables.commit_log.get_table(table) is None, "the name is free again"


def test_pyiceberg_used_directly_commits_like_any_engine(svc: SketchService, ns: str) -> None:
    table = f"{ns}.facts"
    first = svc.tables.create(table, pa.table({"k": [1, 2, 3]}), sort_by=["k"])
    svc.catalog.load_table(table).append(pa.table({"k": [4, 5]}))
    (commit,) = svc.tables.commits(table)[1:]
    assert commit.seq > first and (commit.operation, commit.added_rows, commit.total_rows) == ("append", 2, 5)
    assert sorted(svc.tables.read_arrow(table)["k"].to_pylist()) == [1, 2, 3, 4, 5]
    assert sorted(svc.tables.read_arrow(table, first)["k"].to_pylist()) == [1, 2, 3]
    # The service's own writes carry on from there.
    assert svc.tables.append(table, pa.table({"k": [6]})) > commit.seq


def _sketched(svc: SketchService, table: str, name: str, rows: pa.Table, fragments: int) -> str:
    """``table`` created with ``rows`` and the HAVING report sketched on ``a``: its SQL."""
    svc.tables.create(table, rows, sort_by=["a"])
    sql = HAVING.format(t=table)
    svc.capture(sql, name=name, attributes={table: "a"}, fragments=fragments)
    return sql


def test_a_rollback_to_an_earlier_snapshot_is_a_commit_that_sketches_follow(
    spark_svc: SketchService, spark: SparkSession, ns: str
) -> None:
    """Spark's ``rollback_to_snapshot`` makes an earlier snapshot current again: a commit of its
    own (it once broke the commit log for every table: its snapshot id was recorded already)."""
    svc, table, name = spark_svc, f"{ns}.facts", f"{ns}_having"
    sql = _sketched(svc, table, name, synthetic_table(2000, 20, seed=3), fragments=10)
    spark.sql(f"DELETE FROM lake.{table} WHERE a < 6")
    svc.maintain(name)
    first, deleted = svc.tables.commits(table)
    spark.sql(f"CALL lake.system.rollback_to_snapshot('{table}', {first.snapshot_id})")
    seq = svc.latest_sequence()
    rolled_back = svc.tables.commits(table)[-1]
    assert (rolled_back.seq, rolled_back.snapshot_id) == (seq, first.snapshot_id)
    assert rolled_back.total_rows == first.total_rows
    read = svc.tables.read_arrow
    assert sorted_rows(read(table, seq)) == sorted_rows(read(table, first.seq))
    (run,) = svc.maintain(name)
    assert run.to_version == 3 and run.delta_rows == first.total_rows - deleted.total_rows > 0
    assert maintained(svc, name) == fresh_fragments(svc, sql, name, seq)
    used = svc.query(sql, use_sketches="always")
    assert used.sketch == (name, 3)
    assert sorted_rows(used.table) == sorted_rows(svc.query(sql, use_sketches=False).table)
    # The service goes on recording commits after it.
    spark.sql(f"DELETE FROM lake.{table} WHERE a = 7")
    assert svc.tables.commits(table)[-1].seq == svc.latest_sequence() > seq


def _two_sketched_tables(svc: SketchService, ns: str, changed: str) -> dict[str, str]:
    """Tables ``changed`` and ``kept``, each with a HAVING sketch (state stored): label to name."""
    names = {}
    for label in (changed, "kept"):
        table = f"{ns}.{label}"
        svc.tables.create(table, synthetic_table(600, 6, seed=1), sort_by=["a"])
        names[label] = f"{ns}_{label}"
        svc.capture(
            HAVING.format(t=table), name=names[label], attributes={table: "a"}, fragments=4, with_state=True
        )
    return names


def test_a_table_another_engine_drops_stops_its_sketches_not_the_others(
    spark_svc: SketchService, spark: SparkSession, ns: str
) -> None:
    svc = spark_svc
    names = _two_sketched_tables(svc, ns, "gone")
    spark.sql(f"DELETE FROM lake.{ns}.kept WHERE a = 2")
    spark.sql(f"DROP TABLE lake.{ns}.gone")
    dropped_at = svc.latest_sequence()
    runs = [r for r in svc.maintain() if r.name in names.values()]  # (other tests' sketches too)
    assert [(r.name, r.strategy != "none") for r in runs] == [(names["kept"], True)]
    svc.collect_garbage(list(names.values()))  # passes over the table that is gone
    (status,) = svc.status(names["gone"])
    assert status.blocked is not None and f"{ns}.gone was dropped" in status.blocked
    assert svc.status(names["kept"])[0].blocked is None
    with pytest.raises(SketchTableDroppedError) as raised:
        svc.maintain(names["gone"])
    assert (raised.value.table, raised.value.sequence) == (f"{ns}.gone", dropped_at)
    assert f"sketch drop {names['gone']}" in str(raised.value)
    # A table created again under the name is another table: the sketch stays stopped.
    spark.sql(f"CREATE TABLE lake.{ns}.gone (a BIGINT, b BIGINT) USING iceberg")
    spark.sql(f"INSERT INTO lake.{ns}.gone VALUES (1, 2)")
    assert [r.name for r in svc.maintain_each(list(names.values()))] == [names["kept"]]
    with pytest.raises(SketchTableDroppedError):
        svc.maintain(names["gone"])
    svc.drop_sketch(names["gone"])
    assert [d.name for d in svc.sketches.definitions() if d.name in names.values()] == [names["kept"]]


@pytest.mark.parametrize("renamer", ["spark", "pyiceberg"])
def test_a_table_another_engine_renames_is_known_under_its_new_name_at_once(
    spark_svc: SketchService, spark: SparkSession, ns: str, renamer: str
) -> None:
    """Spark's ALTER TABLE ... RENAME and PyIceberg's ``rename_table`` (its own SQL catalog on
    the same database, as another team's job opens it) both update the catalog's row."""
    svc = spark_svc
    names = _two_sketched_tables(svc, ns, "old")
    before = svc.tables.commits(f"{ns}.old")[-1]
    if renamer == "spark":
        spark.sql(f"ALTER TABLE lake.{ns}.old RENAME TO {ns}.new")  # the new name is in the same catalog
    else:
        settings = svc.settings
        assert settings.metastore_url is not None
        other = SqlCatalog(
            settings.catalog_name, uri=settings.metastore_url, warehouse=settings.warehouse.as_uri()
        )
        other.rename_table(f"{ns}.old", f"{ns}.new")
    renamed_at = svc.latest_sequence()
    # Two numbers for one change: the old name's history ends, the new name's begins.
    (created,) = svc.tables.commits(f"{ns}.new")
    assert (created.seq, created.operation, created.total_rows) == (renamed_at, "create", before.total_rows)
    assert svc.tables.commit_log.get_table(f"{ns}.old") is None, "the old name is free again"
    sql = HAVING.format(t=f"{ns}.new")
    spark_answer = sorted_rows(spark.sql(HAVING.format(t=f"lake.{ns}.new")).toArrow())
    assert sorted_rows(svc.query(sql, use_sketches=False).table) == spark_answer
    # Captured under the new name, and maintained across Spark's next commit to it.
    name = f"{ns}_new"
    svc.capture(sql, name=name, attributes={f"{ns}.new": "a"}, fragments=4)
    spark.sql(f"DELETE FROM lake.{ns}.new WHERE a = 3")
    (run,) = svc.maintain(name)
    assert run.strategy == "incremental"
    assert maintained(svc, name) == fresh_fragments(svc, sql, name, svc.latest_sequence())
    used = svc.query(sql, use_sketches="always")
    assert used.sketch is not None and used.sketch[0] == name
    assert sorted_rows(used.table) == sorted_rows(spark.sql(HAVING.format(t=f"lake.{ns}.new")).toArrow())
    # The sketch on the old name stops, and says the table was dropped or renamed.
    with pytest.raises(SketchTableDroppedError) as raised:
        svc.maintain(names["old"])
    assert (raised.value.table, raised.value.sequence) == (f"{ns}.old", renamed_at - 1)
    assert "renamed" in str(raised.value)


def test_a_column_another_engine_drops_stops_the_sketches_that_read_it(
    spark_svc: SketchService, spark: SparkSession, ns: str
) -> None:
    svc = spark_svc
    names = _two_sketched_tables(svc, ns, "narrowed")
    spark.sql(f"ALTER TABLE lake.{ns}.narrowed DROP COLUMN b")  # HAVING sums b
    spark.sql(f"DELETE FROM lake.{ns}.narrowed WHERE a = 1")
    spark.sql(f"DELETE FROM lake.{ns}.kept WHERE a = 2")
    at = svc.latest_sequence()
    # A fresh process (no engine kept) and the service that captured them (engines kept) alike.
    assert svc.kept_engine(names["narrowed"]) is not None
    for service in (sibling(svc), svc):
        runs = [r for r in service.maintain() if r.name in names.values()]
        assert [r.name for r in runs if r.strategy != "none"] in ([names["kept"]], [])
        with pytest.raises(ColumnsDroppedError) as raised:
            service.maintain(names["narrowed"])
        assert (raised.value.table, raised.value.columns) == (f"{ns}.narrowed", ["b"])
    assert svc.sketch(names["kept"]).sequence == at


@pytest.mark.parametrize("file_format", ["orc", "avro"])
def test_a_table_with_orc_or_avro_files_is_refused_by_name_until_rewritten_as_parquet(
    spark_svc: SketchService, spark: SparkSession, ns: str, file_format: str
) -> None:
    """Iceberg tables may hold ORC or Avro data files; pins hand files to Parquet readers. They
    once failed as a Spark job error said to be transient (a query), or an untyped Py4J error
    (a capture)."""
    svc, table, name = spark_svc, f"{ns}.{file_format}_facts", f"{ns}_{file_format}"
    sql = _sketched(svc, table, name, synthetic_table(800, 8, seed=4), fragments=4)
    spark.sql(f"ALTER TABLE lake.{table} SET TBLPROPERTIES ('write.format.default' = '{file_format}')")
    spark.sql(f"INSERT INTO lake.{table} SELECT key + 10000, a, b, c, d, e, f, g, h, i, j FROM lake.{table}")
    refused = f"{table} has {file_format.upper()} data files"
    for attempt in (
        lambda: svc.query(sql, use_sketches=False),
        lambda: svc.query(sql),
        lambda: svc.capture(sql, name=f"{name}_again", attributes={table: "a"}, fragments=4),
        lambda: svc.maintain(name),
    ):
        with pytest.raises(UnsupportedTableFeatureError, match=refused) as raised:
            attempt()
        assert "rewrite_data_files" in str(raised.value)
    assert svc.sketches.versions(name) == [1], "nothing published"
    # What the hint says to do makes the table readable again, and the sketch follows.
    spark.sql(f"ALTER TABLE lake.{table} SET TBLPROPERTIES ('write.format.default' = 'parquet')")
    spark.sql(
        f"CALL lake.system.rewrite_data_files(table => '{table}', options => map('rewrite-all', 'true'))"
    )
    (run,) = svc.maintain(name)
    assert run.published
    assert maintained(svc, name) == fresh_fragments(svc, sql, name, svc.latest_sequence())
    assert sorted_rows(svc.query(sql, use_sketches="always").table) == sorted_rows(
        svc.query(sql, use_sketches=False).table
    )


def test_a_commit_that_cannot_be_recorded_is_a_typed_error_and_recorded_on_a_later_read(
    spark_svc: SketchService, spark: SparkSession, ns: str
) -> None:
    """Any read first records other engines' commits; a database error there (a rollback once
    raised one) reached every caller untyped."""
    svc, table = spark_svc, f"{ns}.facts"
    svc.tables.create(table, pa.table({"k": [1, 2]}), sort_by=["k"])
    record = svc.tables.commit_log.get_table(table)
    assert record is not None
    refusal = f"refuse_{ns}"  # a real constraint violation, for this table's new commits only
    with svc.engine.begin() as conn:
        conn.execute(
            text(
                f"ALTER TABLE sketch.table_commits ADD CONSTRAINT {refusal} "
                f"CHECK (table_id <> {record.table_id}) NOT VALID"
            )
        )
    try:
        spark.sql(f"INSERT INTO lake.{table} VALUES (3)")
        with pytest.raises(TableError, match=f"of {table} .* could not be recorded") as raised:
            svc.latest_sequence()
        assert "every read retries it" in str(raised.value)
    finally:
        with svc.engine.begin() as conn:
            conn.execute(text(f"ALTER TABLE sketch.table_commits DROP CONSTRAINT {refusal}"))
    assert [c.operation for c in svc.tables.commits(table)] == ["create", "append"]
    assert sorted(svc.tables.read_arrow(table)["k"].to_pylist()) == [1, 2, 3]


def test_a_compaction_of_a_merge_on_read_table_changes_no_rows_to_validate(
    spark_svc: SketchService, spark: SparkSession, ns: str
) -> None:
    """Spark's ``rewrite_data_files`` writes its files without the rows position deletes had
    deleted, while those deletes stay counted in the table's totals until they are removed: the
    totals drop by rows no one deleted. The compaction changes no rows, so no batch is
    quarantined for it (every sketch of the table was blocked: "0 rows inserted, the commit's
    metadata says -N"), and the commits after it are checked by their own changes."""
    svc, table, name = spark_svc, f"{ns}.facts", f"{ns}_having"
    sql = _sketched(svc, table, name, synthetic_table(2000, 20, seed=3), fragments=10)
    spark.sql(f"ALTER TABLE lake.{table} SET TBLPROPERTIES ('write.delete.mode' = 'merge-on-read')")
    spark.sql(f"DELETE FROM lake.{table} WHERE a = 3")
    svc.maintain(name)
    spark.sql(
        f"CALL lake.system.rewrite_data_files(table => '{table}', options => map('rewrite-all', 'true'))"
    )
    deleted, compaction = svc.tables.commits(table)[-2:]
    assert compaction.operation == "replace" and (compaction.added_rows, compaction.deleted_rows) == (0, 0)
    assert compaction.total_rows < deleted.total_rows, "the premise: the totals drop by the deleted rows"
    spark.sql(f"INSERT INTO lake.{table} SELECT * FROM lake.{table} WHERE a = 5 LIMIT 7")
    seq = svc.latest_sequence()
    (run,) = svc.maintain(name)  # raised DeltaQuarantinedError
    assert run.published and run.delta_rows == 7
    assert maintained(svc, name) == fresh_fragments(svc, sql, name, seq)
    used = svc.query(sql, use_sketches="always")
    assert used.sketch == (name, run.to_version)
    assert sorted_rows(used.table) == sorted_rows(svc.query(sql, use_sketches=False).table)
