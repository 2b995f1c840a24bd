"""One Iceberg catalog for every engine: the service's tables are Spark SQL's ``lake.*`` tables.

Tables written through the service (PyIceberg's SQL catalog) are read by Spark's Iceberg source
at the same rows, and tables Spark creates and writes are read by PyIceberg. (Users' own
sessions, configured with ``configure_lake`` in processes of their own, are the writers of
``test_concurrent_writers``.)
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from sketch_core.config import Settings
from sketch_core.errors import ConfigurationError
from sketch_core.service.facade import SketchService
from tests.conftest import Databases
from tests.oracles.results import sorted_rows

pytestmark = pytest.mark.spark


def test_a_table_the_service_writes_is_spark_sql_s_lake_table(
    spark_svc: SketchService, spark: SparkSession, ns: str
) -> None:
    data = pa.table({"k": list(range(500)), "v": [i % 7 for i in range(500)]})
    spark_svc.tables.create(f"{ns}.facts", data, sort_by=["k"])
    spark_svc.tables.delete(f"{ns}.facts", "k < 100")
    catalog = spark_svc.settings.catalog_name
    assert catalog == "lake"
    through_spark = pa.Table.from_pandas(spark.sql(f"SELECT k, v FROM {catalog}.{ns}.facts").toPandas())
    assert sorted_rows(through_spark) == sorted_rows(spark_svc.tables.read_arrow(f"{ns}.facts"))
    # The sort order the service declared is on the key (Spark's writers follow it).
    props = {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES {catalog}.{ns}.facts").collect()}
    assert props["sort-order"] == "k ASC NULLS FIRST"


def test_a_table_spark_creates_and_writes_is_read_by_pyiceberg(
    spark_svc: SketchService, spark: SparkSession, ns: str
) -> None:
    spark.sql(f"CREATE TABLE lake.{ns}.events (id BIGINT, kind STRING) USING iceberg")
    spark.sql(f"INSERT INTO lake.{ns}.events VALUES (1, 'a'), (2, 'b'), (3, NULL)")
    table = spark_svc.catalog.load_table(f"{ns}.events").scan().to_arrow()
    assert sorted(zip(table["id"].to_pylist(), table["kind"].to_pylist(), strict=True)) == [
        (1, "a"),
        (2, "b"),
        (3, None),
    ]


def test_a_session_whose_catalog_is_another_metastore_s_is_refused_by_name(
    settings: Settings, databases: Databases, spark: SparkSession, tmp_path: Path
) -> None:
    other = replace(settings, metastore_url=databases.create(), warehouse=tmp_path / "w")
    svc = SketchService.from_settings(other, spark=spark)
    try:
        with pytest.raises(ConfigurationError, match="catalog 'lake' is the metastore at"):
            _ = svc.spark
        # Under a catalog name of its own the same session serves it.
        named = SketchService.from_settings(replace(other, catalog_name="other_lake"), spark=spark)
        named.tables.create("ns.t", pa.table({"k": [1, 2]}), sort_by=["k"])
        assert named.sketched("SELECT SUM(k) AS s FROM ns.t").toPandas()["s"].tolist() == [3]
        named.close()
    finally:
        svc.close()


def test_a_relative_warehouse_is_taken_from_the_working_directory_and_an_unwritable_one_is_named(
    settings: Settings, databases: Databases, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    url = databases.create()
    svc = SketchService.from_settings(
        replace(settings, metastore_url=url, warehouse=Path("wh"), catalog_name="relative_lake")
    )
    try:
        assert svc.settings.warehouse == tmp_path / "wh"
        svc.tables.create("ns.t", pa.table({"k": [1, 2]}), sort_by=["k"])
        assert any((tmp_path / "wh").rglob("*.parquet")), "the data lies under the working directory"
    finally:
        svc.close()
    blocked = tmp_path / "a_file"
    blocked.write_text("not a directory")
    with pytest.raises(ConfigurationError, match=r"cannot create the warehouse directory .*a_file/wh"):
        SketchService.from_settings(replace(settings, metastore_url=url, warehouse=blocked / "wh"))
