"""Writers of every kind committing at once get each commit numbered exactly once, in the order
the catalog made them visible.

Two Spark applications (separate processes, each a user's own session configured with
``configure_lake``: its own JVM and JDBC catalog) and one PyIceberg writer (a plain SQL catalog,
not the service's) insert into the same table, and one Spark writer into another table as well.
The oracle is the catalog's own history: each table's commits, in sequence order, form one
chain (every commit's parent is the commit numbered before it), and every row written is there
once.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import textwrap
import threading
import time

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import CommitFailedException

from sketch_core.config import Settings
from sketch_core.service.facade import SketchService

pytestmark = pytest.mark.spark

ROUNDS = 4

SPARK_WRITER = textwrap.dedent(
    """
    import sys
    from pyspark.sql import SparkSession
    from sketch_core.config import Settings
    from sketch_core.spark.lake import configure_lake

    writer, rounds, tables = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
    builder = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
    spark = configure_lake(builder, Settings.from_env()).getOrCreate()
    print("ready", flush=True)
    for i in range(rounds):
        for table in tables:
            spark.sql(f"INSERT INTO lake.{table} VALUES ({writer * 1000 + i}, {writer})")
    print("done", flush=True)
    """
)


def _pyiceberg_writer(settings: Settings, table: str, rounds: int, errors: list[BaseException]) -> None:
    try:
        assert settings.metastore_url is not None
        catalog = SqlCatalog(
            settings.catalog_name, uri=settings.metastore_url, warehouse=settings.warehouse.as_uri()
        )
        for i in range(rounds):
            row = pa.table({"id": pa.array([3000 + i], pa.int64()), "writer": pa.array([3], pa.int64())})
            for _ in range(50):  # PyIceberg does not retry a lost compare-and-swap itself
                try:
                    catalog.load_table(table).append(row)
                    break
                except CommitFailedException:
                    time.sleep(0.05)
            else:
                raise AssertionError("the PyIceberg writer lost every race")
            time.sleep(0.2)
    except BaseException as exc:  # reported by the test
        errors.append(exc)


def test_spark_and_pyiceberg_writers_at_once_lose_no_commit_and_number_none_twice(
    svc: SketchService, settings: Settings, ns: str
) -> None:
    shared, other = f"{ns}.shared", f"{ns}.other"
    schema = pa.table({"id": pa.array([0], pa.int64()), "writer": pa.array([0], pa.int64())})
    start = svc.tables.create(shared, schema, sort_by=["id"])
    svc.tables.create(other, schema, sort_by=["id"])
    assert settings.metastore_url is not None
    env = {
        **os.environ,
        "SKETCH_METASTORE_URL": settings.metastore_url,
        "SKETCH_WAREHOUSE": str(settings.warehouse),
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", SPARK_WRITER, str(w), str(ROUNDS), *tables],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w, tables in ((1, [shared]), (2, [shared, other]))
    ]
    for writer in writers:  # both JVMs up before the rounds start, so the writes overlap
        assert writer.stdout is not None
        assert writer.stdout.readline().strip() == "ready", writer.stderr.read() if writer.stderr else ""
    errors: list[BaseException] = []
    thread = threading.Thread(target=_pyiceberg_writer, args=(settings, shared, ROUNDS, errors))
    thread.start()
    for writer in writers:
        out, err = writer.communicate(timeout=600)
        assert writer.returncode == 0 and "done" in out, err[-3000:]
    thread.join(timeout=600)
    assert not errors, errors

    rows = svc.tables.read_arrow(shared)
    expected = {0} | {w * 1000 + i for w in (1, 2, 3) for i in range(ROUNDS)}
    assert sorted(rows["id"].to_pylist()) == sorted(expected), "every row once"
    assert sorted(svc.tables.read_arrow(other)["id"].to_pylist()) == [0] + [2000 + i for i in range(ROUNDS)]

    for table, writes in ((shared, 3 * ROUNDS), (other, ROUNDS)):
        commits = svc.tables.commits(table)
        assert len(commits) == 1 + writes, "no commit lost"
        seqs = [c.seq for c in commits]
        assert seqs == sorted(set(seqs)), "numbered once each, in order"
        # Visibility order: each commit's parent is the one numbered before it.
        assert all(b.parent_snapshot_id == a.snapshot_id for a, b in itertools.pairwise(commits))
    every = [c.seq for c in svc.tables.commits() if c.seq >= start and c.table in (shared, other)]
    assert len(every) == len(set(every)) == 2 + 4 * ROUNDS
