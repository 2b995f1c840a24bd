"""What the metastore keeps about a table besides its registration and commits, removed when
the table is dropped (inside the drop's transaction; see ``TableService.drop``)."""

from __future__ import annotations

from sqlalchemy import Connection, delete, select

from sketch_core.errors import TableInUseError
from sketch_core.metastore import schema as t


def forget_table(conn: Connection, table: str, table_id: int) -> list[str]:
    """Delete the table's partitions, samples, expectation suite and validation results;
    returns the paths of the sample files nothing refers to any more. Refused while a sketch
    version still refers to one of its partitions (a sketch captured since the caller checked)."""
    p, f, s = t.partitions.c, t.sketch_fragments.c, t.samples.c
    readers = conn.execute(
        select(t.sketches.c.name)
        .distinct()
        .select_from(
            t.sketch_fragments.join(t.partitions, p.partition_id == f.partition_id).join(
                t.sketches, t.sketches.c.sketch_id == f.sketch_id
            )
        )
        .where(p.table_id == table_id)
    ).scalars()
    in_use = list(readers)
    if in_use:
        raise TableInUseError(table, in_use)
    conn.execute(delete(t.partitions).where(p.table_id == table_id))
    paths = conn.execute(delete(t.samples).where(s.table_id == table_id).returning(s.path)).scalars()
    samples = [str(path) for path in paths]
    conn.execute(delete(t.delta_validations).where(t.delta_validations.c.table_id == table_id))
    conn.execute(delete(t.table_suites).where(t.table_suites.c.table_id == table_id))
    return samples
