"""Arrow IPC files: how state and recorded rows are kept under the warehouse."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa


def write_arrow(path: Path, table: pa.Table, *, in_place: bool = False) -> None:
    """Write ``table`` whole or not at all: a partial file is renamed into place at the end.
    ``in_place``: written under its own name, in a directory that exists already (one nobody
    reads before the writer says it is complete)."""
    if in_place:
        target = path
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        target = path.with_suffix(".partial")
    with pa.OSFile(str(target), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    if not in_place:
        target.rename(path)


def read_arrow(path: Path) -> pa.Table:
    with pa.memory_map(str(path)) as source:
        return pa.ipc.open_file(source).read_all()
