"""``sketch demo``: the stack end to end on TPC-H, with progress and a report.

Start the metastore, load TPC-H into Iceberg, capture a provenance sketch for a top-k report,
run the report with and without it (same answer, fewer files), commit a delta, and show that
the old snapshot still uses its sketch while the new one gets a fresh capture (incremental
maintenance arrives with a later release).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from sketch_core.config import Settings
from sketch_core.datasets import TPCH_SORT_KEYS, DeltaGenerator, load_tpch
from sketch_core.localstack.stack import resolve
from sketch_core.service import QueryResult, SketchService

# TPC-H Q3 (shipping priority): a top-k report over lineitem, orders and customer.
DEMO_SKETCH = "demo_q3"
REPORT_SQL = """
SELECT l.l_orderkey,
       sum(l.l_extendedprice * (1 - l.l_discount)) AS revenue,
       o.o_orderdate,
       o.o_shippriority
FROM tpch.customer c
JOIN tpch.orders o ON c.c_custkey = o.o_custkey
JOIN tpch.lineitem l ON l.l_orderkey = o.o_orderkey
WHERE c.c_mktsegment = :segment
  AND o.o_orderdate < DATE '1995-03-15'
  AND l.l_shipdate > DATE '1995-03-15'
GROUP BY l.l_orderkey, o.o_orderdate, o.o_shippriority
ORDER BY revenue DESC, o.o_orderdate, l.l_orderkey
LIMIT 10
"""


@dataclass
class DemoOutcome:
    before_sequence: int
    after_sequence: int
    pinned_unchanged: bool
    results_differ: bool
    sketch_sound: bool = False
    speedup: float = 0.0


@contextmanager
def step(console: Console, label: str) -> Iterator[None]:
    started = time.perf_counter()
    with console.status(f"[bold]{label}[/]..."):
        yield
    console.print(f"[green]✓[/] {label} [dim]({time.perf_counter() - started:.1f}s)[/]")


def run_demo(
    settings: Settings, scale: float = 0.1, delta_rows: int = 1000, console: Console | None = None
) -> DemoOutcome:
    console = console or Console()
    home = settings.warehouse.parent
    with step(console, "metastore ready"):
        stack = resolve(settings, database="sketch_demo")
    try:
        with step(console, "schema migrated, Iceberg catalog open"):
            svc = SketchService.from_settings(stack.settings)
        console.print(f"  metastore: {svc.engine.url.render_as_string(hide_password=True)}")
        console.print(f"  warehouse: {stack.settings.warehouse}")
        with step(console, f"TPC-H SF{scale:g} in Iceberg"):
            load_tpch(svc.tables, scale, home, progress=lambda msg: console.print(f"  {msg}"))
        for record in svc.tables.list():
            pin = svc.tables.pin(record.name)
            console.print(f"  {record.name:<15} {pin.record_count:>9,} rows in {len(pin.files):>3} files")
        with step(console, "Spark session started"):
            _ = svc.spark
        params = {"segment": "BUILDING"}
        before = svc.latest_sequence()
        svc.query(REPORT_SQL, params=params, use_sketches=False)  # warm-up: JIT and file caches
        with step(console, f"report at sequence {before} without a sketch"):
            first = svc.query(REPORT_SQL, params=params, snapshot=before, use_sketches=False)
        # The demo owns its sketch: a rerun (perhaps with other settings, such as the fragment
        # count) starts it afresh instead of tripping over the previous run's definition.
        if any(d.name == DEMO_SKETCH for d in svc.sketches.definitions()):
            svc.drop_sketch(DEMO_SKETCH)
        with step(console, "provenance sketch captured (one Spark job)"):
            version = svc.capture(REPORT_SQL, name=DEMO_SKETCH, params=params)
        for table, (attribute, count) in version.partitions.items():
            kept = len(version.fragments[table])
            console.print(f"  {table:<15} on {attribute}: {kept:>5} of {count} fragments hold the provenance")
        with step(console, f"report at sequence {before} with the sketch"):
            # Applied whatever the cost model would choose: the demo shows what a sketch does.
            sketched = svc.query(REPORT_SQL, params=params, snapshot=before, use_sketches="always")
        with step(console, f"delta committed to tpch.lineitem ({delta_rows} rows: inserts and deletes)"):
            generator = DeltaGenerator(svc.tables, "tpch.lineitem", TPCH_SORT_KEYS["lineitem"], seed=before)
            after = generator.mixed(delta_rows).apply(svc.tables)
        # As a report runs by default: the sketch applied where it is expected to pay (said why).
        with step(console, f"report again at the old sequence {before} (pinned, its sketch still valid)"):
            pinned = svc.query(REPORT_SQL, params=params, snapshot=before)
        with step(console, f"sketch recaptured for sequence {after}"):
            svc.capture(REPORT_SQL, name=DEMO_SKETCH, params=params, snapshot=after)
        with step(console, f"report at the new sequence {after} with the new sketch version"):
            latest = svc.query(REPORT_SQL, params=params, snapshot=after, use_sketches="always")
        plain_latest = svc.query(REPORT_SQL, params=params, snapshot=after, use_sketches=False)
        _print_report(console, latest)
        outcome = DemoOutcome(
            before_sequence=before,
            after_sequence=after,
            pinned_unchanged=pinned.table.equals(first.table),
            results_differ=not latest.table.equals(first.table),
            sketch_sound=sketched.table.equals(first.table) and latest.table.equals(plain_latest.table),
            speedup=_median_speedup(svc, params, before),
        )
        _print_summary(
            console,
            [
                ("no sketch", first),
                ("with sketch", sketched),
                ("pinned old", pinned),
                ("after delta, no sketch", plain_latest),
                ("after delta, sketch", latest),
            ],
            outcome,
        )
        svc.close()
        return outcome
    finally:
        stack.shutdown()


SPEEDUP_RUNS = 3


def _median_speedup(svc: SketchService, params: dict[str, str], sequence: int) -> float:
    """Plain time / sketched time, medians of runs taken in turn (one run alone is noisy)."""
    plain, sketched = [], []
    for _ in range(SPEEDUP_RUNS):
        plain.append(svc.query(REPORT_SQL, params=params, snapshot=sequence, use_sketches=False).seconds)
        # The sketched way timed as itself, whatever the cost model would choose for the report.
        with_sketch = svc.query(REPORT_SQL, params=params, snapshot=sequence, use_sketches="always")
        sketched.append(with_sketch.seconds)
    return statistics.median(plain) / statistics.median(sketched)


def _print_report(console: Console, result: QueryResult) -> None:
    table = Table(title=f"TPC-H Q3, top 10 unshipped orders (sequence {result.sequence})")
    for name in result.table.column_names:
        table.add_column(name, justify="right")
    for row in result.table.to_pylist():
        table.add_row(*[str(v) for v in row.values()])
    console.print(table)


def _print_summary(console: Console, runs: list[tuple[str, QueryResult]], outcome: DemoOutcome) -> None:
    table = Table(title="Report runs")
    for column in ("run", "sequence", "sketch", "seconds", "files read / total", "rows"):
        table.add_column(column, justify="right")
    for label, result in runs:
        table.add_row(
            label,
            str(result.sequence),
            f"{result.sketch[0]} v{result.sketch[1]}" if result.sketch else "-",
            f"{result.seconds:.2f}",
            f"{result.files_read} / {result.files_total}",
            str(result.table.num_rows),
        )
    console.print(table)
    for label, result in runs:
        if result.sketch_reason:  # why a report applied its sketch by default, or did not
            console.print(f"  {label}: {result.sketch_reason}")
    verdict = "[green]yes[/]" if outcome.pinned_unchanged else "[red]NO[/]"
    console.print(f"Pinned read at sequence {outcome.before_sequence} unchanged by the delta: {verdict}")
    sound = "[green]yes[/]" if outcome.sketch_sound else "[red]NO[/]"
    console.print(f"Results with the sketch equal results without it: {sound}")
    console.print(
        f"Report speedup with the sketch at sequence {outcome.before_sequence} "
        f"(median of {SPEEDUP_RUNS} runs each, same session): {outcome.speedup:.2f}x"
    )
