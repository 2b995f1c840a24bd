"""`make demo` end to end at SF0.01: its own metastore database and warehouse, real Spark."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

from pyspark.sql import SparkSession
from rich.console import Console

from sketch_core.config import Settings
from sketch_core.demo import run_demo
from tests.conftest import Databases


def test_demo_captures_uses_and_recaptures_a_sketch_soundly(
    settings: Settings, databases: Databases, spark: SparkSession, tpch_dir: Path, tmp_path: Path
) -> None:
    # The demo reads TPC-H from <warehouse>/../tpch: share the session's generated files.
    shutil.copytree(tpch_dir.parent, tmp_path / "tpch")
    # A metastore of its own in this process's one Spark session: a catalog name of its own.
    demo_settings = replace(
        settings, metastore_url=databases.create(), warehouse=tmp_path / "warehouse", catalog_name="demo_lake"
    )
    console = Console(record=True, width=160)
    outcome = run_demo(demo_settings, scale=0.01, delta_rows=200, console=console)
    output = console.export_text()
    assert outcome.sketch_sound, output
    assert outcome.pinned_unchanged, output
    assert outcome.after_sequence > outcome.before_sequence
    assert outcome.speedup > 0
    assert "fragments hold the provenance" in output and "Report speedup with the sketch" in output
    assert "pinned old: use" in output or "pinned old: skip" in output, output  # the default's why
