"""Spark temp views over exactly the data files of pinned snapshots.

A pinned read lists the snapshot's Parquet files (planned once per snapshot by the table
service, and pruned by a sketch's fragments) and hands exactly those to Spark's Parquet reader,
which costs no manifest planning per query. A snapshot with merge-on-read deletes, or of a
table whose files store some column under an escaped name (``Event Id``) or under a name it
had before a rename (see :mod:`sketch_core.tables.file_columns`), is read through Iceberg's
Spark source at its snapshot id instead, which applies the deletes and finds columns by their
field ids.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from weakref import WeakKeyDictionary

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from sketch_core.errors import UnsupportedTableFeatureError
from sketch_core.lru import LruMap
from sketch_core.tables.file_columns import stored_as_named
from sketch_core.tables.pinned import PinnedSnapshot


def spark_schema(schema: pa.Schema) -> StructType:
    """``schema`` as Spark reads it: Iceberg's ``timestamp`` (no zone, an Arrow timestamp without
    one) as TIMESTAMP_NTZ, ``timestamptz`` as TIMESTAMP, as Spark's Iceberg source reads them
    (read as TIMESTAMP, a report's timestamps came back zoned where Spark's are not); ``uuid``
    (an Arrow extension type PySpark cannot convert) as STRING, as that source reads it."""
    fields = [pa.field(f.name, pa.string(), f.nullable) if is_uuid(f.type) else f for f in schema]
    return from_arrow_schema(pa.schema(fields), prefer_timestamp_ntz=True)


def is_uuid(kind: pa.DataType) -> bool:
    """Iceberg's ``uuid``, as PyIceberg gives it to Arrow."""
    return isinstance(kind, pa.BaseExtensionType) and kind.extension_name == "arrow.uuid"


def pinned_dataframe(spark: SparkSession, pinned: PinnedSnapshot) -> DataFrame:
    """The rows of ``pinned``. A pin whose files a sketch pruned is read with that sketch's range
    conditions (every caller does): through Iceberg's source, which reads the whole snapshot,
    the conditions alone leave exactly the rows of the kept files that hold them."""
    schema = spark_schema(pinned.schema)
    if not pinned.files:
        return spark.createDataFrame([], schema)
    if (
        pinned.has_deletes
        or not stored_as_named(pinned.schema)
        or any(is_uuid(f.type) for f in pinned.schema)
    ):
        # Iceberg's source applies the deletes, finds columns the files store under escaped
        # names (see file_columns) by their field ids, and reads a uuid as its text (Parquet's
        # reader gives its 16 bytes).
        return _iceberg_dataframe(spark, pinned)
    return spark.read.schema(schema).parquet(*[f.path for f in pinned.files])


def _iceberg_dataframe(spark: SparkSession, pinned: PinnedSnapshot) -> DataFrame:
    catalog = pinned.catalog
    if catalog is None or spark.conf.get(f"spark.sql.catalog.{catalog}", None) is None:
        why = "merge-on-read deletes" if pinned.has_deletes else "columns its files store under escaped names"
        raise UnsupportedTableFeatureError(
            f"{pinned.table} has {why} at snapshot {pinned.snapshot_id}, and this Spark session "
            f"has no Iceberg catalog {catalog or '(none named)'} to read them",
            hint="build the session with sketch_core.spark.lake.configure_lake(builder, settings), "
            "or use the service's own session (svc.spark)",
        )
    frame = spark.read.option("versionAsOf", str(pinned.snapshot_id)).table(
        f"{catalog}.{pinned.iceberg_name}"
    )
    # A snapshot is read with its own schema; the pin's is the table's current one (columns added
    # since read as NULLs, as the Parquet path does; renamed ones under their names then).
    present = set(frame.columns)
    names = pinned.snapshot_names
    columns = []
    for field in spark_schema(pinned.schema).fields:
        source = field.name if names is None else names.get(field.name)
        if source is not None and source in present:
            columns.append(F.col("`" + source.replace("`", "``") + "`").alias(field.name))
        else:
            columns.append(F.lit(None).cast(field.dataType).alias(field.name))
    return frame.select(*columns)


# The temp views this module made, per session, least recently used first, with what each was
# registered over. Building a view costs tens of milliseconds of py4j calls per table (a sizeable
# share of a sketched report), and a pinned snapshot never changes, so a view over the same files
# with the same schema is reused instead of rebuilt. But view names are per snapshot (and per
# sketch version), and each view keeps its plan, with its files' listing, in the driver's JVM: a
# long-lived service reporting at ever new snapshots would keep them all. So only the
# ``MAX_VIEWS`` most recently used are kept; older ones are dropped from the session.
MAX_VIEWS = 128
_registered: WeakKeyDictionary[SparkSession, LruMap[str, object]] = WeakKeyDictionary()
_lock = threading.Lock()


def _views_of(spark: SparkSession) -> LruMap[str, object]:
    with _lock:
        return _registered.setdefault(spark, LruMap(lambda: MAX_VIEWS))


def register_view(spark: SparkSession, pinned: PinnedSnapshot, *, name: str | None = None) -> str:
    """A temp view over exactly ``pinned``'s files (default name: :attr:`PinnedSnapshot.view_name`)."""
    view = name or pinned.view_name
    # (The schema's metadata too: the same names can stand for other field ids after a drop.)
    names = tuple(sorted((pinned.snapshot_names or {}).items()))
    files = tuple((f.path, f.deletes) for f in pinned.files)
    contents = (files, pinned.schema, pinned.schema.metadata, names)
    reusable = _views_of(spark).get(view) == contents
    if reusable and spark.catalog.tableExists(view):
        return view
    return keep_view(spark, view, pinned_dataframe(spark, pinned), contents)


def keep_view(spark: SparkSession, view: str, frame: DataFrame, contents: object = None) -> str:
    """Register ``frame`` as the temp view ``view`` (replacing one of that name), among the
    session's ``MAX_VIEWS`` most recently used; ``contents``: what makes it reusable by
    :func:`register_view` (None: never reused). Returns ``view``."""
    frame.createOrReplaceTempView(view)
    for old, _ in _views_of(spark).put(view, contents):
        spark.catalog.dropTempView(old)
    return view


def kept_views(spark: SparkSession) -> list[str]:
    """The temp views this module keeps in ``spark``, least recently used first."""
    with _lock:
        known = _registered.get(spark)
    return known.keys() if known is not None else []


def table_schemas(pins: Mapping[str, PinnedSnapshot]) -> dict[str, list[tuple[str, str]]]:
    """Each pinned table's columns with their Spark SQL types, as the SQL front end wants them."""
    return {
        name: [(f.name, f.dataType.simpleString()) for f in spark_schema(pin.schema).fields]
        for name, pin in pins.items()
    }
