"""Parsing a DAG that uses the provider, and importing the error types, load neither Spark nor
z3: the DAG processor parses every file every few seconds, and only a task that runs needs
them. Each check runs in a fresh interpreter (this one has loaded everything already)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.airflow.conftest import REPO

HEAVY = ("pyspark", "z3", "great_expectations")
CHECK = """
import json, runpy, sys
for target in sys.argv[1:]:
    if target.endswith(".py"):
        runpy.run_path(target)
    else:
        __import__(target)
print(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)))
"""


def _heavy_modules_after(*targets: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", CHECK.format(heavy=HEAVY), *targets],
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ.copy(),
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return list(json.loads(done.stdout.strip().splitlines()[-1]))


def test_parsing_the_example_dags_and_importing_the_provider_load_neither_spark_nor_z3() -> None:
    dags = [str(path) for path in sorted((REPO / "dags").glob("*.py"))]
    assert len(dags) >= 4
    modules = ["sketch_core", "sketch_core.errors", "sketch_core.config"]
    modules += [
        "sketch_airflow.operators.sketch",
        "sketch_airflow.sensors.policy",
        "sketch_airflow.hooks.submit",
    ]
    assert _heavy_modules_after(*modules, *dags) == []
