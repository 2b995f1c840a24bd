"""The service a benchmark runs against: the private PostgreSQL server, a database and a
warehouse of its own per benchmark and scale, with TPC-H loaded (kept between runs)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from sketch_core.config import Settings
from sketch_core.datasets.tpch import load_tpch
from sketch_core.localstack.postgres import PrivatePostgres
from sketch_core.service import SketchService


@contextmanager
def bench_service(
    scale: float,
    home: Path,
    prefix: str = "",
    fresh: bool = False,
    spark_conf: Mapping[str, str] | None = None,
) -> Iterator[SketchService]:
    """``prefix`` keeps benchmarks apart (``""``: capture and use; ``"maint_"``: maintenance);
    ``fresh``: start from a new database and warehouse (a benchmark that rewrites the tables);
    ``spark_conf``: settings of the session over the service's own (a benchmark's variant)."""
    server = PrivatePostgres.default()
    port, started = server.ensure_running()
    # float(): scale 1 and 1.0 must name the same database (the warehouse is named by {scale:g}).
    database = f"sketch_bench_{prefix}sf{str(float(scale)).replace('.', '_')}"
    warehouse = home / f"bench-{prefix.replace('_', '-')}warehouse-{scale:g}"
    if fresh:
        server.drop_database(port, database)
        shutil.rmtree(warehouse, ignore_errors=True)
    url = server.ensure_database(port, database)
    # Captures without attributes sketch the sort key first, as the capture, use and maintenance
    # reports describe their sketches; the attribute-choice benchmark picks its own strategy.
    # Delta validation is a step per commit, whatever maintains the sketches (README, "Delta
    # validation"): the figures compare maintenance strategies, so it is left out of them.
    settings = replace(
        Settings.from_env(),
        metastore_url=url,
        warehouse=warehouse,
        attribute_strategy="heuristic",
        validate_deltas=False,
    )
    if spark_conf:
        settings = replace(settings, extra={**settings.extra, **spark_conf})
    svc = SketchService.from_settings(settings)
    try:
        # From SF10 on Spark loads the tables (Arrow would sort lineitem in memory).
        load_tpch(svc.tables, scale, home, progress=print, spark=svc.spark if scale >= 10 else None)
        yield svc
    finally:
        svc.close()
        if started:
            server.stop_unless_in_use()
