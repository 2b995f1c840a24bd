"""The example DAGs' data and report: a synthetic fact table and a top-k report over it.

Shared by the DAGs in ``dags/`` and by ``make demo``, so the story they tell is one: loads
append and delete rows of ``demo.facts``; the report ranks groups by the sum of ``b``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sketch_core.service import SketchService

DEMO_TABLE = "demo.facts"
DEMO_SKETCH = "demo_top_groups"
DEMO_REPORT = "demo_daily_report"
DEMO_GROUPS = 400
REPORT_SQL = (
    "SELECT a, SUM(b) AS total, COUNT(*) AS n FROM demo.facts "
    "WHERE c > :min_c GROUP BY a ORDER BY total DESC, a LIMIT 10"
)
REPORT_PARAMETERS: dict[str, Any] = {"min_c": -100}
# Maintain once 2,000 rows changed, or an hour after the last version with anything pending,
# and before the daily report.
DEMO_POLICY: dict[str, Any] = {
    "delta_rows": 2000,
    "elapsed_seconds": 3600,
    "before_reports": [DEMO_REPORT],
    "combine": "any",
}


def load_batch(
    svc: SketchService, table: str, *, initial_rows: int, inserts: int, deletes: int, seed: int
) -> dict[str, Any]:
    """One load: creates ``table`` (sorted on the group column) the first time, then appends
    ``inserts`` fresh rows and deletes ``deletes`` existing ones, each its own commit."""
    from sketch_core.datasets import synthetic_table  # when a load runs, not when DAGs are parsed
    from sketch_core.datasets.deltas import DeltaGenerator

    commits = []
    if not svc.tables.exists(table):
        commits.append(svc.tables.create(table, synthetic_table(initial_rows, DEMO_GROUPS, seed=seed), ["a"]))
    else:
        generator = DeltaGenerator(svc.tables, table, ("key",), seed=seed)
        if inserts:
            commits.append(generator.inserts(inserts).apply(svc.tables))
        if deletes:
            commits.append(generator.deletes(deletes).apply(svc.tables))
    return {"table": table, "commits": commits}
