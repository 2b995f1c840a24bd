"""The IR printed back and run on Spark, beside the original text run by Spark itself."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sketch_core.algebra.frontend import to_ir
from sketch_core.algebra.ir import Relation
from sketch_core.algebra.printer import to_sql
from sketch_core.algebra.query_text import bind_tables
from sketch_core.service import SketchService
from sketch_core.spark.views import register_view, table_schemas
from tests.oracles.results import rounded

Rows = list[tuple[Any, ...]]


def spark_and_printed(
    svc: SketchService,
    sql: str,
    tables: Sequence[str],
    forms: Sequence[Callable[[Relation], Relation]] = (lambda plan: plan,),
) -> tuple[Rows, list[Rows]]:
    """The rows Spark returns for ``sql``, and those of its IR (in each of ``forms``) printed
    back, in the order Spark returns them (floats rounded), over the current snapshots of
    ``tables``."""
    pins = {name: svc.tables.pin(name) for name in tables}
    parsed = to_ir(sql, table_schemas(pins))
    views = {name: register_view(svc.spark, pin) for name, pin in pins.items()}
    expected = rounded(svc.spark.sql(bind_tables(sql, views)).collect())
    printed = []
    for form in forms:
        plan = form(parsed.plan)
        text = to_sql(plan, source=lambda scan: views[scan.table], output_names=parsed.output_names)
        printed.append(rounded(svc.spark.sql(text).collect()))
    return expected, printed
