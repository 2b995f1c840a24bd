"""Incremental joins (2-way and 3-way, under aggregation and top-k) against the lineage oracle,
with random inserts and deletes on every table in each batch."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sketch_core.algebra.frontend import to_ir
from sketch_core.incremental.engine import IncrementalSketch, RowDelta
from sketch_core.partitions import RangePartition
from tests.oracles.lineage import provenance

SCHEMAS = {
    "t.facts": pa.schema([("id", pa.int64()), ("g", pa.int64()), ("v", pa.int64())]),
    "t.dims": pa.schema([("dg", pa.int64()), ("label", pa.string()), ("weight", pa.int64())]),
    "t.tags": pa.schema([("tid", pa.int64()), ("tag", pa.string())]),
}
SPARK_TYPES = {
    t: [(f.name, "string" if f.type == pa.string() else "bigint") for f in s] for t, s in SCHEMAS.items()
}
PARTITIONS = {
    ("t.facts", "id"): RangePartition("t.facts", "id", tuple(range(10, 300, 10))),
    ("t.dims", "dg"): RangePartition("t.dims", "dg", (3, 6, 9)),
    ("t.tags", "tid"): RangePartition("t.tags", "tid", tuple(range(20, 300, 20))),
}

QUERIES = {
    "join_having": (
        "SELECT d.label, SUM(f.v) AS s FROM t.facts f JOIN t.dims d ON f.g = d.dg "
        "GROUP BY d.label HAVING SUM(f.v) > 0",
        {"t.facts": "id", "t.dims": "dg"},
    ),
    "join_topk": (
        "SELECT f.id, d.label, f.v FROM t.facts f JOIN t.dims d ON f.g = d.dg "
        "ORDER BY f.v DESC, f.id, d.label LIMIT 4",
        {"t.facts": "id", "t.dims": "dg"},
    ),
    "theta_join": (
        "SELECT d.label, COUNT(*) AS n FROM t.facts f JOIN t.dims d ON f.g = d.dg AND f.v > d.weight "
        "GROUP BY d.label HAVING COUNT(*) > 2",
        {"t.facts": "id"},
    ),
    "three_way": (
        "SELECT t.tag, MAX(f.v) AS hi FROM t.facts f JOIN t.dims d ON f.g = d.dg "
        "JOIN t.tags t ON t.tid = f.id WHERE d.weight < 8 GROUP BY t.tag",
        {"t.facts": "id", "t.dims": "dg", "t.tags": "tid"},
    ),
    "in_subquery": (
        "SELECT f.g, COUNT(*) AS n FROM t.facts f WHERE f.v > -30 AND f.g IN "
        "(SELECT d.dg FROM t.dims d WHERE d.weight > 0) GROUP BY f.g HAVING COUNT(*) > 2",
        {"t.facts": "id", "t.dims": "dg"},
    ),
    "exists_topk": (
        "SELECT f.id, f.v FROM t.facts f "
        "WHERE EXISTS (SELECT 1 FROM t.tags t WHERE t.tid = f.id AND t.tag <> 'p') "
        "ORDER BY f.v DESC, f.id LIMIT 5",
        {"t.facts": "id", "t.tags": "tid"},
    ),
    # Anti joins (NOT EXISTS on equalities; NOT IN, NULL-aware, with NULLs on both sides) and
    # left joins (the unmatched rows padded), each ΔL and ΔR changing which rows match.
    "not_exists": (
        "SELECT f.g, COUNT(*) AS n FROM t.facts f WHERE NOT EXISTS "
        "(SELECT 1 FROM t.dims d WHERE d.dg = f.g AND d.weight > 5) GROUP BY f.g HAVING COUNT(*) > 2",
        {"t.facts": "id"},
    ),
    "not_in": (
        "SELECT f.id, f.v FROM t.facts f WHERE f.g NOT IN (SELECT d.dg FROM t.dims d WHERE d.weight > 8) "
        "ORDER BY f.v DESC, f.id LIMIT 6",
        {"t.facts": "id"},
    ),
    "left_join": (
        "SELECT f.g, COUNT(d.label) AS matched, COUNT(*) AS n FROM t.facts f "
        "LEFT JOIN t.dims d ON f.g = d.dg AND d.weight > 0 GROUP BY f.g HAVING COUNT(*) > 8",
        {"t.facts": "id"},
    ),
    "left_join_unmatched": (
        "SELECT f.id, f.v FROM t.facts f LEFT JOIN t.dims d ON f.g = d.dg "
        "WHERE d.label IS NULL ORDER BY f.v DESC, f.id LIMIT 5",
        {"t.facts": "id"},
    ),
    # Uncorrelated scalar subqueries: a change of the value re-evaluates every row of the other
    # side (the subquery reads the same table in the second).
    "scalar_where": (
        "SELECT f.g, COUNT(*) AS n FROM t.facts f WHERE f.v > (SELECT AVG(d.weight) FROM t.dims d) "
        "GROUP BY f.g HAVING COUNT(*) > 2",
        {"t.facts": "id"},
    ),
    "scalar_having_same_table": (
        "SELECT f.g, SUM(f.v) AS s FROM t.facts f GROUP BY f.g "
        "HAVING SUM(f.v) > (SELECT SUM(v) * 0.1 FROM t.facts WHERE v > 0)",
        {"t.facts": "id"},
    ),
    "scalar_max_topk": (
        "SELECT f.id, f.v FROM t.facts f "
        "WHERE f.v < (SELECT MAX(d.weight) FROM t.dims d WHERE d.label <> 'x') "
        "ORDER BY f.v DESC, f.id LIMIT 4",
        {"t.facts": "id"},
    ),
    # Semi and anti joins whose condition relates the sides beyond equalities (TPC-H Q21's
    # EXISTS and NOT EXISTS with a <> on the same table), and a left join's.
    "exists_theta": (
        "SELECT f.g, COUNT(*) AS n FROM t.facts f "
        "WHERE EXISTS (SELECT 1 FROM t.dims d WHERE d.dg = f.g AND d.weight > f.v) "
        "GROUP BY f.g HAVING COUNT(*) > 2",
        {"t.facts": "id", "t.dims": "dg"},
    ),
    "not_exists_theta": (
        "SELECT f.id, f.v FROM t.facts f "
        "WHERE NOT EXISTS (SELECT 1 FROM t.dims d WHERE d.dg = f.g AND d.weight > f.v) "
        "ORDER BY f.v DESC, f.id LIMIT 5",
        {"t.facts": "id"},
    ),
    "q21_style": (
        "SELECT f.g, COUNT(*) AS n FROM t.facts f "
        "WHERE EXISTS (SELECT 1 FROM t.facts f2 WHERE f2.g = f.g AND f2.id <> f.id) "
        "AND NOT EXISTS (SELECT 1 FROM t.facts f3 WHERE f3.g = f.g AND f3.id <> f.id AND f3.v > 35) "
        "GROUP BY f.g ORDER BY n DESC, f.g LIMIT 3",
        {"t.facts": "id"},
    ),
    "left_join_theta": (
        "SELECT f.g, COUNT(d.label) AS matched, COUNT(*) AS n FROM t.facts f "
        "LEFT JOIN t.dims d ON f.g = d.dg AND d.weight > f.v GROUP BY f.g HAVING COUNT(*) > 6",
        {"t.facts": "id"},
    ),
    # INTERSECT and EXCEPT: NULL matches NULL (facts.g and dims.dg both hold NULLs).
    "intersect": (
        "SELECT g FROM t.facts WHERE v > 10 INTERSECT SELECT dg FROM t.dims WHERE weight > -5",
        {"t.facts": "id", "t.dims": "dg"},
    ),
    "except": (
        "SELECT g, v FROM t.facts WHERE v > 25 EXCEPT SELECT dg, weight FROM t.dims",
        {"t.facts": "id"},
    ),
    "join_on_aggregate": (
        "SELECT f.id, f.v FROM t.facts f JOIN (SELECT g, COUNT(*) AS n FROM t.facts GROUP BY g) c "
        "ON f.g = c.g WHERE c.n > 8 AND f.v > 30",
        {"t.facts": "id"},
    ),
}


def generate(table: str, rng: np.random.Generator, ids: np.ndarray) -> pa.Table:
    n = len(ids)
    if table == "t.facts":
        g = rng.integers(0, 12, n).astype(object)
        g[rng.random(n) < 0.05] = None
        columns = {"id": ids, "g": pa.array(list(g), pa.int64()), "v": rng.integers(-40, 41, n)}
    elif table == "t.dims":
        dg = rng.integers(0, 14, n).astype(object)
        dg[rng.random(n) < 0.03] = None  # a NULL makes a NOT IN hold for no row
        columns = {
            "dg": pa.array(list(dg), pa.int64()),  # duplicates: a fact row may join several dims
            "label": rng.choice(["x", "y", "z"], n),
            "weight": rng.integers(-20, 20, n),
        }
    else:
        columns = {"tid": rng.integers(0, 200, n), "tag": rng.choice(["p", "q", "r", "s"], n)}
    return pa.table(columns, schema=SCHEMAS[table])


def remove(current: pa.Table, deleted: pa.Table) -> pa.Table:
    doomed = Counter(tuple(r.values()) for r in deleted.to_pylist())
    keep = []
    for row in current.to_pylist():
        key = tuple(row.values())
        keep.append(not doomed[key])
        if doomed[key]:
            doomed[key] -= 1
    return current.filter(pa.array(keep, pa.bool_()))


def oracle(sql: str, attributes: dict[str, str], data: dict[str, pa.Table]) -> dict[str, set[int]]:
    plan = to_ir(sql, SPARK_TYPES).plan
    rows = {t: d.to_pylist() for t, d in data.items()}
    lineage = provenance(plan, rows)
    return {
        table: {
            PARTITIONS[(table, attribute)].fragment_of(rows[table][i][attribute])
            for t, i in lineage
            if t == table
        }
        for table, attribute in attributes.items()
    }


def reader_of(data: dict[str, pa.Table]):  # type: ignore[no-untyped-def]
    def read(table: str, columns: Sequence[str], keys: Mapping[str, pa.Array] | None) -> pa.Table:
        rows = data[table]
        for name, values in (keys or {}).items():
            rows = rows.filter(
                pc.is_in(rows.column(name), value_set=values.cast(rows.schema.field(name).type))
            )
        return rows.select(list(columns))

    return read


def run_history(name: str, seed: int, batches: int) -> None:
    sql, attributes = QUERIES[name]
    rng = np.random.default_rng(seed)
    sizes = {"t.facts": 80, "t.dims": 15, "t.tags": 60}
    data = {t: generate(t, rng, np.arange(n)) for t, n in sizes.items()}
    next_id = {t: n for t, n in sizes.items()}
    plan = to_ir(sql, SPARK_TYPES).plan
    partitions = {t: PARTITIONS[(t, a)] for t, a in attributes.items()}
    sketch = IncrementalSketch(plan, partitions, SCHEMAS)
    empty = {
        t: RowDelta(d, s.empty_table()) for (t, d), s in zip(data.items(), SCHEMAS.values(), strict=True)
    }
    sketch.apply(empty, reader_of(data))
    expected = oracle(sql, attributes, data)
    assert {t: sketch.sketch().get(t, set()) for t in attributes} == expected
    for batch in range(batches):
        if batch == batches // 2:  # continue from saved state, as a later maintenance run would
            restored = IncrementalSketch(plan, partitions, SCHEMAS)
            restored.restore([sketch.state_tables()])
            sketch = restored
        deltas = {}
        for table in SCHEMAS:
            if rng.random() < 0.4:
                continue  # this table has no delta in this batch
            current = data[table]
            doomed = min(int(rng.integers(0, 8)), current.num_rows)
            deleted = current.take(rng.choice(current.num_rows, size=doomed, replace=False))
            count = int(rng.integers(0, 8))
            inserted = generate(table, rng, np.arange(next_id[table], next_id[table] + count))
            next_id[table] += count
            data[table] = pa.concat_tables([remove(current, deleted), inserted])
            deltas[table] = RowDelta(inserted, deleted)
        sketch.apply(deltas, reader_of(data))
        expected = oracle(sql, attributes, data)
        assert {t: sketch.sketch().get(t, set()) for t in attributes} == expected


# Comma joins: the engine pushes the WHERE conjuncts into the joins; the oracle evaluates the
# cross product as written (slowly), so this one runs fewer histories.
COMMA_JOIN = (
    "SELECT d.label, t.tag, COUNT(*) AS n FROM t.facts f, t.dims d, t.tags t "
    "WHERE f.g = d.dg AND t.tid = f.id AND d.weight > -5 AND f.v < 20 GROUP BY d.label, t.tag",
    {"t.facts": "id", "t.tags": "tid"},
)


@settings(max_examples=3)
@given(seed=st.integers(0, 2**32 - 1))
def test_comma_joins_are_maintained_like_explicit_ones(seed: int) -> None:
    QUERIES["comma_join"] = COMMA_JOIN
    try:
        run_history("comma_join", seed, batches=2)
    finally:
        del QUERIES["comma_join"]


@pytest.mark.parametrize("name", sorted(QUERIES))
@given(seed=st.integers(0, 2**32 - 1))
def test_maintained_join_sketch_equals_the_provenance_after_every_batch(name: str, seed: int) -> None:
    run_history(name, seed, batches=5)
