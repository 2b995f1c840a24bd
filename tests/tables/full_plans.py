"""Counting the snapshots a table service plans in full (reads every manifest of)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from sketch_core.tables.service import TableService


@contextmanager
def counting_full_plans(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The snapshot ids planned in full while the block runs."""
    planned: list[int] = []
    real_plan = TableService._planned_files

    def counting_plan(name: str, table: Any, snapshot_id: int) -> Any:
        planned.append(snapshot_id)
        return real_plan(name, table, snapshot_id)

    with monkeypatch.context() as patch:
        patch.setattr(TableService, "_planned_files", staticmethod(counting_plan))
        yield planned
