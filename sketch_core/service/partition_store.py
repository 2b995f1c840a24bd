"""The range partitions sketches are defined on: computed once per (table, attribute, fragment
count), stored in the metastore, and kept parsed in memory (a stored partition never changes:
a new computation gets a new id)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from pyroaring import BitMap
from pyspark.sql import SparkSession

from sketch_core.errors import SketchError
from sketch_core.metastore.sketches import PartitionRecord, SketchDefinition, SketchRepository, VersionRecord
from sketch_core.partitions import RangePartition
from sketch_core.partitions.local import local_range_partition, partitions_locally
from sketch_core.partitions.pruning import prune_files
from sketch_core.service.results import SketchVersion
from sketch_core.spark.partitioning import compute_range_partition, sampled_column
from sketch_core.spark.views import pinned_dataframe
from sketch_core.tables.deltas import read_files
from sketch_core.tables.pinned import PinnedSnapshot
from sketch_core.tables.service import TableService

# Tables up to this many rows are range-partitioned in-process (one column read, exact
# quantiles: milliseconds) rather than by two Spark jobs of about a second each. A column of
# this many values takes tens of megabytes at most. A bigger table is partitioned in-process
# from a sample of about this many of its values, drawn by one Spark scan: on the demo's 32M
# rows 1 s, where a distinct count and percentile_approx over every row took 6.6 s (and a
# distinct count over a key column of SF10's 60M rows far longer). A partition from a sample
# is as correct as any (its ranges cover every value); only its fragments' sizes vary more.
LOCAL_PARTITION_ROWS = 2_000_000

log = logging.getLogger(__name__)


class PartitionStore:
    """Stored range partitions, and what is read through them (sketch versions, shares)."""

    def __init__(
        self, sketches: SketchRepository, tables: TableService, spark: Callable[[], SparkSession]
    ) -> None:
        self.sketches = sketches
        self.tables = tables
        self.spark = spark
        # Parsing one (10,000 cuts: ~10 ms) is done once per service, not on every query.
        self.parsed: dict[int, tuple[PartitionRecord, RangePartition]] = {}

    def range_partition(
        self, table: str, attribute: str, fragments: int, *, sequence: int | None = None
    ) -> tuple[int, RangePartition]:
        """See :meth:`SketchService.range_partition`."""
        pinned = self.tables.pin(table, sequence)
        name = pinned.table
        found = self.sketches.find_partition(name, attribute, fragments)
        if found is None:
            computed = self.compute(pinned, attribute, fragments)
            if computed.fragment_count < fragments and pinned.record_count < fragments:
                # Stored for good (fragment ids stay comparable): the sketches on it stay this
                # coarse however the table grows. Said once, where it is decided.
                log.warning(
                    "%s has %d rows: its partition on %s has %d of the %d fragments asked for, and "
                    "every sketch on (%s, %d) keeps whole fragments of it as the table grows; capture "
                    "on loaded data, or ask for another fragment count later to get a new partition",
                    name,
                    pinned.record_count,
                    attribute,
                    computed.fragment_count,
                    fragments,
                    attribute,
                    fragments,
                )
            found = self.sketches.ensure_partition(
                name, attribute, fragments, computed.to_json(), pinned.sequence
            )
        return found.partition_id, self.get(found.partition_id)[1]

    def compute(self, pinned: PinnedSnapshot, attribute: str, fragments: int) -> RangePartition:
        """In-process from the column's values for a small table (no Spark job), from a sample
        Spark draws for a big one, else (types partitioned on Spark only) on Spark."""
        name, schema = pinned.table, pinned.schema
        local = attribute in schema.names and partitions_locally(schema.field(attribute).type)
        if local and pinned.record_count <= LOCAL_PARTITION_ROWS:
            values = read_files(pinned.files, schema, [attribute]).column(attribute)
            return local_range_partition(values, name, attribute, fragments)
        frame = pinned_dataframe(self.spark(), pinned)
        if local:
            sample = sampled_column(frame, attribute, LOCAL_PARTITION_ROWS / pinned.record_count)
            return local_range_partition(sample, name, attribute, fragments)
        return compute_range_partition(frame, name, attribute, fragments)

    def get(self, partition_id: int) -> tuple[PartitionRecord, RangePartition]:
        """The stored partition with this id: its record and the partition."""
        if partition_id not in self.parsed:
            stored = self.sketches.partition_by_id(partition_id)
            parsed = RangePartition.from_json(stored.table, stored.attribute, stored.boundaries)
            self.parsed[partition_id] = (stored, parsed)
        return self.parsed[partition_id]

    def records(self, definition: SketchDefinition) -> dict[str, PartitionRecord]:
        """Per table the stored record of the sketch's partition (attribute, fragment count)."""
        return {t: self.get(pid)[0] for t, pid in definition.partition_ids.items()}

    def identified(self, definition: SketchDefinition) -> dict[str, tuple[int, RangePartition]]:
        """Per table the sketch partitions: (partition id, partition)."""
        return {t: (pid, self.get(pid)[1]) for t, pid in definition.partition_ids.items()}

    def of(self, definition: SketchDefinition) -> dict[str, RangePartition]:
        """Per table the sketch's partition."""
        return {t: p for t, (_, p) in self.identified(definition).items()}

    def sketch_version(self, record: VersionRecord) -> SketchVersion:
        """A stored version as the public :class:`SketchVersion` (fragments per table)."""
        fragments: dict[str, list[int]] = {}
        partitions: dict[str, tuple[str, int]] = {}
        for partition_id, bitmap in record.bitmaps.items():
            partition, _ = self.get(partition_id)
            fragments[partition.table] = list(BitMap.deserialize(bitmap))
            partitions[partition.table] = (partition.attribute, partition.fragment_count)
        return SketchVersion(
            record.name, record.version, record.sequence, dict(record.table_snapshots), fragments, partitions
        )

    def sketch_share(self, name: str) -> float | None:
        """The largest share of a sketched table's rows that a query with the sketch's newest
        version reads: those of the data files that may hold its fragments (None: no version).

        Not the share of fragments it keeps: where the layout scatters them, a sketch keeping 1%
        of the fragments still reads every file (TPC-H Q20's at SF1 kept a few fragments, read
        169 of 169 files and ran slower than the plain query), and a cost model that expected
        it to read 1% kept applying it. A table that cannot be pinned any more (expired) falls
        back to the share of fragments."""
        record = self.sketches.version(name)
        if record is None or not record.bitmaps:
            return None
        shares = []
        for pid, bitmap in record.bitmaps.items():
            stored, partition = self.get(pid)
            fragments = BitMap.deserialize(bitmap)
            share = len(fragments) / partition.fragment_count
            try:
                pin = self.tables.pin(stored.table, record.sequence)
            except SketchError:
                shares.append(share)
                continue
            rows = sum(f.record_count for f in pin.files)
            if rows > 0:
                kept = sum(f.record_count for f in prune_files(pin.files, partition, fragments))
                share = max(share, kept / rows)
            shares.append(share)
        return max(shares)
