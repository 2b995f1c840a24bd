"""``SketchService``: the public entry point (tables now; capture, use and maintenance later)."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession
from sqlalchemy import Engine

from sketch_core.config import Settings
from sketch_core.errors import SequenceOutOfRangeError
from sketch_core.metastore.commits import CommitLog
from sketch_core.metastore.engine import connect_metastore
from sketch_core.metastore.migrations import migrate
from sketch_core.metastore.sketches import SketchRepository
from sketch_core.partitions import RangePartition
from sketch_core.spark.partitioning import compute_range_partition
from sketch_core.spark.session import build_session
from sketch_core.spark.views import bind_tables, pinned_dataframe, referenced_tables, register_view
from sketch_core.tables.catalog import RecordingSqlCatalog, open_catalog
from sketch_core.tables.service import TableService

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class QueryResult:
    table: pa.Table
    sketch: tuple[str, int] | None
    files_read: int
    files_total: int
    seconds: float
    sequence: int
    table_sequences: Mapping[str, int]


class SketchService:
    """Tables, queries and (in later releases) sketches over one metastore and warehouse."""

    def __init__(
        self,
        settings: Settings,
        engine: Engine,
        catalog: RecordingSqlCatalog,
        spark: SparkSession | None = None,
    ) -> None:
        self.settings = settings
        self.engine = engine
        self.catalog = catalog
        self.commit_log = CommitLog(engine)
        self.tables = TableService(catalog, self.commit_log, settings)
        self.sketches = SketchRepository(engine)
        self._spark = spark

    @classmethod
    def from_env(cls, *, spark: SparkSession | None = None) -> SketchService:
        """Configure from SKETCH_METASTORE_URL, SKETCH_WAREHOUSE and SKETCH_SPARK_MASTER."""
        return cls.from_settings(Settings.from_env(), spark=spark)

    @classmethod
    def from_settings(cls, settings: Settings, *, spark: SparkSession | None = None) -> SketchService:
        url = settings.require_metastore_url()
        engine = connect_metastore(url)
        migrate(engine)
        settings.warehouse.mkdir(parents=True, exist_ok=True)
        catalog = open_catalog(
            engine.url.render_as_string(hide_password=False),
            settings.warehouse.as_uri(),
            name=settings.catalog_name,
        )
        return cls(settings, engine, catalog, spark)

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            self._spark = build_session(self.settings)
        return self._spark

    def range_partition(
        self, table: str, attribute: str, fragments: int, *, sequence: int | None = None
    ) -> tuple[int, RangePartition]:
        """The stored partition for (table, attribute, fragments), computed now if there is none.

        A new partition is computed on Spark over the table pinned at ``sequence`` (latest if
        None) and stored with that sequence. Stored partitions are reused as they are, so the
        fragment ids of every sketch on them stay comparable. Returns (partition id, partition).
        ``fragments`` is the requested count; a column with fewer distinct values gets fewer.
        """
        pinned = self.tables.pin(table, sequence)
        name = pinned.table
        found = self.sketches.find_partition(name, attribute, fragments)
        if found is None:
            computed = compute_range_partition(
                pinned_dataframe(self.spark, pinned), name, attribute, fragments
            )
            found = self.sketches.ensure_partition(
                name, attribute, fragments, computed.to_json(), pinned.sequence
            )
        return found.partition_id, RangePartition.from_json(name, attribute, found.boundaries)

    def latest_sequence(self) -> int:
        return self.commit_log.latest_sequence()

    def query(
        self,
        sql: str,
        params: Mapping[str, Any] | None = None,
        snapshot: int | None = None,
        use_sketches: bool = True,
    ) -> QueryResult:
        """Run Spark SQL over ``ns.table`` names, every table pinned at one commit sequence.

        ``snapshot`` is a global commit sequence number; None reads the latest, fixed once when
        the query starts so that commits landing meanwhile cannot change the answer.
        ``use_sketches`` has no effect until sketch capture exists; the plain query runs.
        """
        started = time.perf_counter()
        latest = self.latest_sequence()
        sequence = latest if snapshot is None else snapshot
        if not 0 < sequence <= latest:
            raise SequenceOutOfRangeError(sequence, latest)
        pins = [self.tables.pin(name, sequence) for name in referenced_tables(sql)]
        views = {pin.table: register_view(self.spark, pin) for pin in pins}
        bound = bind_tables(sql, views)
        frame = self.spark.sql(bound, args=dict(params) if params else None)
        result = frame.toArrow()
        files = sum(len(pin.files) for pin in pins)
        return QueryResult(
            table=result,
            sketch=None,
            files_read=files,
            files_total=files,
            seconds=time.perf_counter() - started,
            sequence=sequence,
            table_sequences={pin.table: pin.sequence for pin in pins},
        )

    def close(self) -> None:
        self.engine.dispose()
        self.catalog.engine.dispose()
