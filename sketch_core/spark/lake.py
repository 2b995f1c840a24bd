"""Spark's view of the project's Iceberg tables: one catalog for every engine.

The tables live in Iceberg's JDBC catalog, in the metastore's PostgreSQL: the same rows that
PyIceberg's SQL catalog reads and writes (``iceberg_tables``, schema V1), under one catalog name
(``lake`` by default, ``SKETCH_CATALOG``). A Spark session configured here addresses them as
``lake.<namespace>.<table>`` and writes them with Spark's own Iceberg writer; every commit, from
whichever engine, swaps the same pointer row, which is what numbers commits (see
``sql/0014_catalog_commits.sql``).

Use :func:`configure_lake` on your own builder, or pass :func:`lake_conf` and
:func:`sketch_core.spark.jars.spark_jars` to spark-submit (``--conf`` and ``--jars``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from sketch_core.errors import ConfigurationError
from sketch_core.spark.jars import check_pyspark_line, spark_jars

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from sketch_core.config import Settings

ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"


def jdbc_location(metastore_url: str) -> tuple[str, str | None, str | None]:
    """The JDBC URL, user and password of a PostgreSQL SQLAlchemy URL."""
    try:
        url = make_url(metastore_url)
    except ArgumentError as exc:
        raise ConfigurationError(f"the metastore URL {metastore_url!r} cannot be parsed") from exc
    if not url.drivername.startswith("postgresql"):
        raise ConfigurationError(
            f"the metastore URL names {url.drivername!r}; the Iceberg catalog needs PostgreSQL",
            hint="set SKETCH_METASTORE_URL to postgresql+psycopg://user@host:port/db",
        )
    host = url.host or "localhost"
    port = f":{url.port}" if url.port else ""
    query = "&".join(f"{k}={v}" for k, v in url.query.items() if isinstance(v, str))
    jdbc = f"jdbc:postgresql://{host}{port}/{url.database or ''}" + (f"?{query}" if query else "")
    return jdbc, url.username, url.password


def lake_conf(settings: Settings) -> dict[str, str]:
    """The Spark properties that register the lake catalog (and Iceberg's SQL extensions:
    ``MERGE INTO``, ``UPDATE``, ``DELETE FROM``, the procedures)."""
    jdbc, user, password = jdbc_location(settings.require_metastore_url())
    prefix = f"spark.sql.catalog.{settings.catalog_name}"
    conf = {
        "spark.sql.extensions": ICEBERG_EXTENSIONS,
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.type": "jdbc",
        f"{prefix}.uri": jdbc,
        # V1 is the schema PyIceberg's SQL catalog writes (with the iceberg_type column).
        f"{prefix}.jdbc.schema-version": "V1",
        f"{prefix}.warehouse": settings.warehouse.as_uri(),
        # Every read loads the table's current pointer: a cached table would hide the commits
        # of other engines and processes for up to 30 s.
        f"{prefix}.cache-enabled": "false",
    }
    if user:
        conf[f"{prefix}.jdbc.user"] = user
    if password:
        conf[f"{prefix}.jdbc.password"] = password
    return conf


def configure_lake(
    builder: SparkSession.Builder, settings: Settings, *, with_jars: bool = True
) -> SparkSession.Builder:
    """Configure a SparkSession builder (yours or the service's) for the project's tables:
    the Iceberg runtime and JDBC driver as jars, and the catalog. Call it before
    ``getOrCreate()``: jars reach a session only when its JVM starts.

    Raises ConfigurationError (no metastore URL, pyspark of another line, jars that cannot be
    fetched). ``with_jars=False``: the jars were given another way (spark-submit's
    ``--jars``, which a running driver needs: its classpath is fixed when its JVM starts)."""
    check_pyspark_line()
    if with_jars:
        builder = builder.config("spark.jars", ",".join(str(p) for p in spark_jars(settings.jars_dir)))
    for key, value in lake_conf(settings).items():
        builder = builder.config(key, value)
    return builder


def ensure_lake(spark: SparkSession, settings: Settings) -> None:
    """Make sure ``spark``'s catalog ``settings.catalog_name`` is this metastore's: register it
    when the session has no catalog of that name (catalogs load on first use, so a running
    session can take one), and refuse a session whose catalog of that name is another
    metastore's (its reads would find other tables, or none, under the same names)."""
    wanted = lake_conf(settings)
    prefix = f"spark.sql.catalog.{settings.catalog_name}"
    current = spark.conf.get(f"{prefix}.uri", None)
    if current is None:
        for key, value in wanted.items():
            if key.startswith(prefix):  # the extensions are fixed when the session starts
                spark.conf.set(key, value)
        return
    if current != wanted[f"{prefix}.uri"]:
        raise ConfigurationError(
            f"the Spark session's catalog {settings.catalog_name!r} is the metastore at {current}, "
            f"not this service's ({wanted[f'{prefix}.uri']})",
            hint="give each metastore its own catalog name in one session (SKETCH_CATALOG), or "
            "configure the session for this one with configure_lake",
        )


def iceberg_relation(catalog: str, table: str, snapshot_id: int | None) -> str:
    """Spark SQL's relation for ``table`` (``ns.table``) at one Iceberg snapshot: read through
    Iceberg's source, which plans the files from the manifests and pushes filters into the
    Parquet reader. A table pinned before its first snapshot has no rows."""
    if snapshot_id is None:
        return f"(SELECT * FROM {catalog}.{table} LIMIT 0)"
    return f"{catalog}.{table} VERSION AS OF {snapshot_id}"


def scan_metrics(frame: DataFrame) -> list[dict[str, int]]:
    """The Iceberg scans' metrics of an executed frame (one dict per scan, in plan order):
    ``resultDataFiles`` and ``skippedDataFiles`` say what the planning read and skipped."""
    found: list[dict[str, int]] = []

    def visit(node: Any) -> None:
        name = str(node.nodeName())
        if name == "AdaptiveSparkPlan":
            visit(node.finalPhysicalPlan())
            return
        if "QueryStage" in name:
            visit(node.plan())
            return
        if name.startswith("BatchScan"):
            metrics, entries = {}, node.metrics().iterator()
            while entries.hasNext():
                entry = entries.next()
                metrics[str(entry._1())] = int(entry._2().value())
            found.append(metrics)
        children = node.children().iterator()
        while children.hasNext():
            visit(children.next())

    visit(frame._jdf.queryExecution().executedPlan())
    return found
