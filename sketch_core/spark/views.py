"""Spark temp views over exactly the data files of pinned snapshots.

Spark here has no Iceberg runtime (no jars can be downloaded), so a pinned read lists the
snapshot's Parquet files through PyIceberg and hands exactly those to Spark.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from weakref import WeakKeyDictionary

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from sketch_core.tables.pinned import PinnedSnapshot


def pinned_dataframe(spark: SparkSession, pinned: PinnedSnapshot) -> DataFrame:
    schema = from_arrow_schema(pinned.schema)
    if not pinned.files:
        return spark.createDataFrame([], schema)
    return spark.read.schema(schema).parquet(*[f.path for f in pinned.files])


# The temp views this module made, per session, least recently used first, with what each was
# registered over. Building a view costs tens of milliseconds of py4j calls per table (a sizeable
# share of a sketched report), and a pinned snapshot never changes, so a view over the same files
# with the same schema is reused instead of rebuilt. But view names are per snapshot (and per
# sketch version), and each view keeps its plan, with its files' listing, in the driver's JVM: a
# long-lived service reporting at ever new snapshots would keep them all. So only the
# ``MAX_VIEWS`` most recently used are kept; older ones are dropped from the session.
MAX_VIEWS = 128
_registered: WeakKeyDictionary[SparkSession, OrderedDict[str, object]] = WeakKeyDictionary()
_lock = threading.Lock()


def register_view(spark: SparkSession, pinned: PinnedSnapshot, *, name: str | None = None) -> str:
    """A temp view over exactly ``pinned``'s files (default name: :attr:`PinnedSnapshot.view_name`)."""
    view = name or pinned.view_name
    contents = (tuple(f.path for f in pinned.files), pinned.schema)
    with _lock:
        known = _registered.setdefault(spark, OrderedDict())
        reusable = known.get(view) == contents
        if reusable:
            known.move_to_end(view)
    if reusable and spark.catalog.tableExists(view):
        return view
    return keep_view(spark, view, pinned_dataframe(spark, pinned), contents)


def keep_view(spark: SparkSession, view: str, frame: DataFrame, contents: object = None) -> str:
    """Register ``frame`` as the temp view ``view`` (replacing one of that name), among the
    session's ``MAX_VIEWS`` most recently used; ``contents``: what makes it reusable by
    :func:`register_view` (None: never reused). Returns ``view``."""
    frame.createOrReplaceTempView(view)
    with _lock:
        known = _registered.setdefault(spark, OrderedDict())
        known[view] = contents
        known.move_to_end(view)
        evicted = [known.popitem(last=False)[0] for _ in range(len(known) - MAX_VIEWS)]
    for old in evicted:
        spark.catalog.dropTempView(old)
    return view


def kept_views(spark: SparkSession) -> list[str]:
    """The temp views this module keeps in ``spark``, least recently used first."""
    with _lock:
        return list(_registered.get(spark, ()))


def table_schemas(pins: Mapping[str, PinnedSnapshot]) -> dict[str, list[tuple[str, str]]]:
    """Each pinned table's columns with their Spark SQL types, as the SQL front end wants them."""
    return {
        name: [(f.name, f.dataType.simpleString()) for f in from_arrow_schema(pin.schema).fields]
        for name, pin in pins.items()
    }
