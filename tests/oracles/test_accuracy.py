"""Accuracy oracle: a captured sketch is exactly the set of fragments holding the provenance,
as computed by the brute-force lineage evaluator (a code path independent of the rewrites)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from sketch_core.algebra.frontend import to_ir
from sketch_core.service import SketchService
from sketch_core.spark.views import table_schemas
from tests.oracles.lineage import provenance

QUERIES = [
    # (query, attributes)
    ("SELECT g, SUM(v) AS s FROM acc.facts GROUP BY g ORDER BY s DESC, g LIMIT 3", {"acc.facts": "g"}),
    (
        "SELECT g, COUNT(*) AS n FROM acc.facts WHERE v > -20 GROUP BY g HAVING COUNT(*) > 55",
        {"acc.facts": "v"},
    ),
    ("SELECT g, MAX(v) AS m FROM acc.facts GROUP BY g HAVING MAX(v) > 40", {"acc.facts": "id"}),
    ("SELECT g, MIN(w) AS m FROM acc.facts GROUP BY g", {"acc.facts": "w"}),
    ("SELECT id, v FROM acc.facts WHERE w > 0 ORDER BY v DESC, id LIMIT 7", {"acc.facts": "id"}),
    (
        "SELECT d.label, COUNT(*) AS s FROM acc.facts f JOIN acc.dims d ON f.g = d.g "
        "WHERE d.weight > 2 GROUP BY d.label ORDER BY s DESC, d.label LIMIT 2",
        {"acc.facts": "g", "acc.dims": "g"},
    ),
    (
        "SELECT label FROM acc.dims WHERE g IN (SELECT g FROM acc.facts WHERE v > 45)",
        {"acc.facts": "v", "acc.dims": "g"},
    ),
    (
        "SELECT label FROM acc.dims d "
        "WHERE NOT EXISTS (SELECT 1 FROM acc.facts f WHERE f.g = d.g AND f.v > 48)",
        {"acc.dims": "weight"},
    ),
    ("SELECT DISTINCT g FROM acc.facts WHERE v < -45", {"acc.facts": "v"}),
    # The group key fixes the sketch attribute (capture keeps one id per group, MIN): directly,
    # renamed by a subquery, equated by a join, and under DISTINCT.
    (
        "SELECT k, COUNT(*) AS n FROM (SELECT g AS k, v FROM acc.facts WHERE v > 0) t "
        "GROUP BY k HAVING COUNT(*) > 50",
        {"acc.facts": "g"},
    ),
    (
        "SELECT d.g, SUM(f.v) AS s FROM acc.facts f JOIN acc.dims d ON f.g = d.g "
        "GROUP BY d.g HAVING SUM(f.v) > 100",
        {"acc.facts": "g", "acc.dims": "g"},
    ),
    ("SELECT DISTINCT g, v FROM acc.facts WHERE v > 48", {"acc.facts": "g"}),
    # A semi join on the attribute whose left side carries the same table's annotation (TPC-H
    # Q18's shape): the subquery's scan goes unannotated; its fragments are the outer rows'.
    (
        "SELECT d.label, f.g, SUM(f.v) AS s FROM acc.dims d JOIN acc.facts f ON d.g = f.g "
        "WHERE d.g IN (SELECT g FROM acc.facts GROUP BY g HAVING SUM(v) > 0) "
        "GROUP BY d.label, f.g ORDER BY s DESC, f.g LIMIT 4",
        {"acc.facts": "g"},
    ),
    (
        "SELECT g FROM acc.facts WHERE v > 40 INTERSECT SELECT g FROM acc.facts WHERE w > 15",
        {"acc.facts": "g"},
    ),
    # ... and not where the key is not the attribute.
    (
        "SELECT g, v FROM acc.facts WHERE g IN "
        "(SELECT d.weight FROM acc.facts f JOIN acc.dims d ON f.g = d.g WHERE f.v > 40)",
        {"acc.facts": "g"},
    ),
]


@pytest.fixture(scope="module")
def accuracy_svc(svc: SketchService, spark: SparkSession) -> Iterator[SketchService]:
    svc.context.spark_session = spark
    rng = np.random.default_rng(3)
    n = 3000
    facts = pa.table(
        {
            "id": np.arange(n, dtype=np.int64),
            "g": rng.integers(0, 30, n),
            "v": rng.integers(-50, 51, n),
            "w": rng.normal(0, 10, n),
        }
    )
    dims = pa.table(
        {
            "g": np.arange(30, dtype=np.int64),
            "label": [f"L{i % 7}" for i in range(30)],
            "weight": rng.integers(0, 6, 30),
        }
    )
    if svc.commit_log.get_table("acc.facts") is None:
        svc.tables.create("acc.facts", facts, sort_by=["id"])
        svc.tables.create("acc.dims", dims, sort_by=["g"])
    yield svc


@pytest.mark.parametrize(("sql", "attributes"), QUERIES, ids=[f"q{i}" for i in range(len(QUERIES))])
def test_captured_sketch_is_exactly_the_provenance_fragments(
    accuracy_svc: SketchService, sql: str, attributes: dict[str, str]
) -> None:
    svc = accuracy_svc
    version = svc.capture(sql, attributes=attributes, fragments=25)
    pins = {t: svc.tables.pin(t, version.sequence) for t in ("acc.facts", "acc.dims")}
    data = {t: svc.tables.read_arrow(t, version.sequence).to_pylist() for t in pins}
    plan = to_ir(sql, table_schemas(pins)).plan
    lineage = provenance(plan, data)
    assert lineage, "the query must have provenance, or the test proves nothing"
    for table, attribute in attributes.items():
        _, partition = svc.range_partition(table, attribute, 25)
        expected = {partition.fragment_of(data[table][i][attribute]) for t, i in lineage if t == table}
        assert set(version.fragments.get(table, [])) == expected, table
