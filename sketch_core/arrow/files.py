"""Arrow IPC files: how state and recorded rows are kept under the warehouse."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa


def write_arrow(path: Path, table: pa.Table) -> None:
    """Write ``table`` whole or not at all: a partial file is renamed into place at the end."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    with pa.OSFile(str(partial), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    partial.rename(path)


def read_arrow(path: Path) -> pa.Table:
    with pa.memory_map(str(path)) as source:
        return pa.ipc.open_file(source).read_all()
