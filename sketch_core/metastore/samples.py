"""Repository for stratified samples (sql/0009_samples.sql): which sample of which table exists,
drawn at which commit, and where its Parquet file is."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Engine, func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert

from sketch_core.errors import TableNotFoundError
from sketch_core.metastore import schema as t
from sketch_core.metastore.engine import reading


@dataclass(frozen=True)
class SampleRecord:
    table: str
    group_columns: tuple[str, ...]
    rate: float
    drawn_at_seq: int
    table_rows: int
    sample_rows: int
    strata: int
    path: str


class SampleRepository:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def find(self, table: str, group_columns: Sequence[str], rate: float) -> SampleRecord | None:
        s, tb = t.samples.c, t.tables.c
        query = (
            select(
                s.group_columns,
                s.rate,
                s.drawn_at_seq,
                s.table_rows,
                s.sample_rows,
                s.strata,
                s.path,
            )
            .select_from(t.samples.join(t.tables, tb.table_id == s.table_id))
            .where(tb.name == table, t.LIVE_TABLES, s.group_columns == list(group_columns), s.rate == rate)
        )
        with reading(self.engine) as conn:
            row = conn.execute(query).first()
        if row is None:
            return None
        return SampleRecord(
            table,
            tuple(row.group_columns),
            float(row.rate),
            int(row.drawn_at_seq),
            int(row.table_rows),
            int(row.sample_rows),
            int(row.strata),
            str(row.path),
        )

    def record(self, sample: SampleRecord) -> str | None:
        """Store ``sample``, replacing the one for the same (table, columns, rate); returns the
        replaced sample's path (its file is no longer referenced), if there was one."""
        s = t.samples
        with self.engine.begin() as conn:
            table_id = conn.execute(
                select(t.tables.c.table_id).where(t.tables.c.name == sample.table, t.LIVE_TABLES)
            ).scalar()
            if table_id is None:
                raise TableNotFoundError(sample.table)
            key = (
                s.c.table_id == table_id,
                s.c.group_columns == list(sample.group_columns),
                s.c.rate == sample.rate,
            )
            previous = conn.execute(select(s.c.path).where(*key).with_for_update()).scalar()
            values = {
                "drawn_at_seq": sample.drawn_at_seq,
                "table_rows": sample.table_rows,
                "sample_rows": sample.sample_rows,
                "strata": sample.strata,
                "path": sample.path,
            }
            statement = pg_insert(s).values(
                table_id=table_id, group_columns=list(sample.group_columns), rate=sample.rate, **values
            )
            conn.execute(
                statement.on_conflict_do_update(
                    index_elements=[s.c.table_id, s.c.group_columns, s.c.rate],
                    set_={**values, "drawn_at": func.clock_timestamp()},
                )
            )
        return str(previous) if previous is not None and previous != sample.path else None
