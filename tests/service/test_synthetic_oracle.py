"""Soundness oracle on the synthetic workload: top-k and HAVING templates with varied parameters,
negative values, ties and NULLs; sketches on safe attributes give the full query's result."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from sketch_core.datasets.synthetic import synthetic_table
from sketch_core.errors import UnsafeAttributeError
from sketch_core.service import SketchService
from tests.oracles.results import sorted_rows

TEMPLATES = {
    "topk_sum": "SELECT a, SUM(b) AS s FROM {t} WHERE c > :low GROUP BY a ORDER BY s DESC, a LIMIT :k",
    "topk_count": "SELECT a, COUNT(*) AS n FROM {t} WHERE d BETWEEN :low AND :high GROUP BY a "
    "ORDER BY n DESC, a LIMIT :k",
    "having_count": "SELECT a, COUNT(*) AS n, AVG(e) AS avg_e FROM {t} WHERE b > :low GROUP BY a "
    "HAVING COUNT(*) > :k",
    "having_max": "SELECT a, MAX(f) AS top_f FROM {t} GROUP BY a HAVING MAX(f) > :low",
    "having_min": "SELECT a, MIN(b) AS low_b FROM {t} WHERE b IS NOT NULL GROUP BY a HAVING MIN(b) < :low",
    "topk_avg": "SELECT a, AVG(e) AS m FROM {t} GROUP BY a ORDER BY m DESC, a LIMIT :k",
    "topk_rows": "SELECT key, a, b FROM {t} WHERE b > :low ORDER BY b DESC, key LIMIT :k",
}
BINDINGS = [
    {"low": -50, "high": 10, "k": 3},
    {"low": 0, "high": 40, "k": 5},
    {"low": 25, "high": 100, "k": 1},
]


@pytest.fixture(scope="module")
def synthetic(svc: SketchService, spark: SparkSession) -> str:
    """40,000 rows in 40 groups, with NULLs in b and c and a tie-heavy group column."""
    data = synthetic_table(40_000, 40, seed=7)
    rng = np.random.default_rng(11)
    b = data.column("b").to_numpy().astype(object)
    b[rng.random(len(b)) < 0.02] = None
    c = data.column("c").to_numpy().astype(object)
    c[rng.random(len(c)) < 0.02] = None
    data = data.set_column(data.schema.get_field_index("b"), "b", pa.array(list(b), pa.int64()))
    data = data.set_column(data.schema.get_field_index("c"), "c", pa.array(list(c), pa.float64()))
    svc.context.spark_session = spark
    name = "syn_oracle.events"
    if svc.commit_log.get_table(name) is None:
        svc.tables.create(name, data, sort_by=["key"])
    return name


@pytest.mark.parametrize("template", sorted(TEMPLATES))
@pytest.mark.parametrize("binding", range(len(BINDINGS)))
def test_sketched_query_equals_full_query(
    spark_svc: SketchService, synthetic: str, template: str, binding: int
) -> None:
    sql = TEMPLATES[template].format(t=synthetic)
    params = {k: v for k, v in BINDINGS[binding].items() if f":{k}" in sql}
    name = f"syn_{template}_{binding}"
    spark_svc.capture(sql, name=name, params=params, fragments=50)
    full = spark_svc.query(sql, params=params, use_sketches=False)
    sketched = spark_svc.query(sql, params=params, use_sketches="always")
    # This binding's own sketch, or another binding's that the reuse check accepted.
    assert sketched.sketch is not None and sketched.sketch[0].startswith(f"syn_{template}_")
    assert sorted_rows(sketched.table) == sorted_rows(full.table)


@pytest.mark.parametrize(
    ("template", "attribute", "safe"),
    [
        ("topk_sum", "a", True),  # the group-by attribute is always safe
        ("topk_count", "key", True),  # count only shrinks on a sketch: safe for a descending top-k
        ("having_count", "key", True),  # a group passing HAVING count > k on a sketch passes in full
        ("topk_avg", "key", False),  # avg over part of a group is anything (PBDS Ex. 4)
        ("having_max", "f", True),  # max over part of a group only shrinks, and HAVING max > p
        ("having_min", "key", True),  # min over part of a group only grows, and HAVING min < p
    ],
)
def test_explicit_attributes_are_checked_for_safety(
    spark_svc: SketchService, synthetic: str, template: str, attribute: str, safe: bool
) -> None:
    sql = TEMPLATES[template].format(t=synthetic)
    params = {k: v for k, v in BINDINGS[1].items() if f":{k}" in sql}
    if not safe:
        with pytest.raises(UnsafeAttributeError) as info:
            spark_svc.capture(sql, params=params, attributes={synthetic: attribute}, fragments=50)
        assert info.value.attribute == attribute and info.value.reason
        return
    version = spark_svc.capture(sql, params=params, attributes={synthetic: attribute}, fragments=50)
    assert version.partitions[synthetic][0] == attribute
    full = spark_svc.query(sql, params=params, use_sketches=False)
    sketched = spark_svc.query(sql, params=params, use_sketches="always")
    assert sketched.sketch is not None
    assert sorted_rows(sketched.table) == sorted_rows(full.table)
