"""svc.drop_table against the real metastore, catalog and warehouse: what goes, what stays, and
a table created again under the name."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from sqlalchemy import Table, func, select

from sketch_core.datasets import synthetic_table
from sketch_core.datasets.deltas import DeltaGenerator
from sketch_core.errors import (
    SketchNotFoundError,
    SnapshotNotFoundError,
    TableInUseError,
    TableNotFoundError,
)
from sketch_core.metastore import schema
from sketch_core.service import SketchService
from sketch_core.tables.orphans import filesystem_path
from tests.oracles.results import sorted_rows

HAVING = "SELECT a, SUM(b) AS s FROM {t} GROUP BY a HAVING SUM(b) > 300"


def rows(n: int, start: int = 0) -> pa.Table:
    return synthetic_table(n, groups=10, seed=start, key_start=start)


def notes(n: int, start: int = 0) -> pa.Table:
    """Rows of another shape than ``rows``."""
    return pa.table(
        {"key": pa.array(range(start, start + n), pa.int64()), "note": [f"n{i}" for i in range(n)]}
    )


def location(svc: SketchService, name: str) -> Path:
    return Path(filesystem_path(svc.catalog.load_table(name).location()))


def other_process(svc: SketchService) -> SketchService:
    """A second service on the same metastore and warehouse: its caches are its own."""
    return SketchService(svc.settings, svc.engine, svc.catalog, svc.context.spark_session)


def rows_of(svc: SketchService, store: Table, table_id: int) -> int:
    """How many rows of metastore table ``store`` are about table ``table_id``."""
    query = select(func.count()).select_from(store).where(store.c.table_id == table_id)
    with svc.engine.connect() as conn:
        return int(conn.execute(query).scalar_one())


def test_a_dropped_table_is_gone_with_its_files_and_its_name_is_free(svc: SketchService, ns: str) -> None:
    name = f"{ns}.d"
    svc.tables.create(name, rows(3000), sort_by=["key"])
    before_drop = svc.tables.append(name, rows(500, start=3000))
    directory = location(svc, name)
    assert any(directory.rglob("*.parquet"))
    other = other_process(svc)
    assert other.tables.pin(name).record_count == 3500  # cached there before the drop

    dropped = svc.drop_table(name)

    assert dropped > before_drop
    assert not svc.tables.exists(name) and name not in [t.name for t in svc.tables.list()]
    assert not directory.exists(), "its files are deleted"
    for attempt in (
        lambda: svc.tables.pin(name),
        lambda: svc.tables.append(name, rows(5, start=9000)),
        lambda: svc.tables.commits(name),
        lambda: other.tables.pin(name),
        lambda: other.tables.pin(name, before_drop),
        lambda: svc.drop_table(name),
    ):
        with pytest.raises(TableNotFoundError):
            attempt()
    history = [c for c in svc.tables.commits() if c.table == name]
    assert [c.operation for c in history] == ["create", "append", "drop"]
    assert history[-1].seq == dropped

    # The name again: a table with a history (and columns) of its own.
    created = svc.tables.create(name, notes(50), sort_by=["key"])
    assert [(c.seq, c.operation) for c in svc.tables.commits(name)] == [(created, "create")]
    for service in (svc, other):
        pinned = service.tables.pin(name)
        assert (pinned.sequence, pinned.record_count) == (created, 50)
        assert pinned.schema.names == ["key", "note"]
    with pytest.raises(SnapshotNotFoundError):
        svc.tables.pin(name, before_drop)  # the old table's sequence: before this one existed
    delta = svc.tables.delta(name, before_drop)
    assert (delta.inserted.num_rows, delta.deleted.num_rows) == (50, 0)
    svc.drop_table(name)  # and again, with another sort key, while `other` has it cached
    created = svc.tables.create(name, notes(50), sort_by=["note"])
    appended = other.tables.append(name, notes(7, start=6000))
    assert other.tables.record(name).sort_by == ("note",)
    assert svc.tables.pin(name).record_count == 57 and svc.tables.commits(name)[-1].seq == appended


def test_a_table_read_by_sketches_is_dropped_only_with_them(spark_svc: SketchService, ns: str) -> None:
    svc = spark_svc
    name = f"{ns}.facts"
    sql = HAVING.format(t=name)
    svc.tables.create(name, synthetic_table(4000, 40, seed=3), sort_by=["a"])
    sketch = f"{ns}_having"
    svc.capture(sql, name=sketch, attributes={name: "a"}, fragments=20)
    DeltaGenerator(svc.tables, name, ("key",), seed=4).mixed(40).apply(svc.tables)
    svc.maintain(sketch, strategy="incremental")  # validates the commit: a suite and a result
    table_id = svc.tables.record(name).table_id
    assert rows_of(svc, schema.delta_validations, table_id) > 0

    with pytest.raises(TableInUseError) as refused:
        svc.drop_table(name)
    assert refused.value.sketches == [sketch] and "--cascade" in str(refused.value.hint)
    kept = svc.query(sql, use_sketches="always")
    assert kept.sketch is not None and kept.sketch[0] == sketch, "nothing was dropped"

    svc.drop_table(name, cascade=True)
    with pytest.raises(SketchNotFoundError):
        svc.sketch(sketch)
    for store in (schema.partitions, schema.delta_validations, schema.table_suites, schema.samples):
        assert rows_of(svc, store, table_id) == 0, store.name

    # A table and a sketch under the same names again: nothing of the old ones leaks in.
    svc.tables.create(name, synthetic_table(3000, 30, seed=8), sort_by=["a"])
    svc.capture(sql, name=sketch, attributes={name: "a"}, fragments=20)
    DeltaGenerator(svc.tables, name, ("key",), seed=9).mixed(40).apply(svc.tables)
    (run,) = svc.maintain(sketch, strategy="incremental")
    assert (run.from_version, run.to_version) == (1, 2)
    used = svc.query(sql, use_sketches="always")
    assert used.sketch == (sketch, 2)
    assert sorted_rows(used.table) == sorted_rows(svc.query(sql, use_sketches=False).table)


def test_a_table_whose_files_are_gone_can_still_be_dropped(svc: SketchService, ns: str) -> None:
    name = f"{ns}.lost"
    svc.tables.create(name, rows(100), sort_by=["key"])
    shutil.rmtree(location(svc, name))  # metadata and data deleted behind the catalog's back
    svc.drop_table(name)
    assert not svc.tables.exists(name)
    svc.tables.create(name, rows(10), sort_by=["key"])
    assert svc.tables.pin(name).record_count == 10
