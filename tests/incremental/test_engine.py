"""The incremental engine against the brute-force lineage evaluator (no Spark, no storage).

After every batch of random inserts and deletes, the maintained sketch must equal the set of
fragments holding the provenance of the query over the current rows, computed from scratch by
tests/oracles/lineage.py, which shares no code with the engine.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sketch_core.algebra.frontend import to_ir
from sketch_core.errors import IncrementalTooCostlyError, KeptValuesExhaustedError, UnsupportedQueryError
from sketch_core.incremental import engine as engine_module
from sketch_core.incremental.engine import IncrementalSketch, RowDelta
from sketch_core.partitions import RangePartition
from tests.oracles.lineage import provenance

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("g", pa.int64()),
        ("v", pa.int64()),
        ("w", pa.float64()),
        ("s", pa.string()),
    ]
)
SPARK_TYPES = [("id", "bigint"), ("g", "bigint"), ("v", "bigint"), ("w", "double"), ("s", "string")]
PARTITIONS = {
    "id": RangePartition("t.facts", "id", tuple(range(10, 400, 10))),
    "g": RangePartition("t.facts", "g", (2, 4, 6)),
    "v": RangePartition("t.facts", "v", (-20, 0, 20)),
}

QUERIES = {
    "having_sum": ("SELECT g, SUM(v) AS s FROM t.facts GROUP BY g HAVING SUM(v) > 10", "id"),
    "having_count": (
        "SELECT g, COUNT(*) AS n FROM t.facts WHERE v > -10 GROUP BY g HAVING COUNT(*) >= 4",
        "v",
    ),
    "having_avg": ("SELECT s, AVG(w) AS m FROM t.facts GROUP BY s HAVING AVG(w) < 0", "id"),
    "min_max": ("SELECT g, MIN(v) AS lo, MAX(v) AS hi FROM t.facts GROUP BY g", "id"),
    "global_max": ("SELECT MAX(v) AS hi FROM t.facts WHERE g < 5", "id"),
    "global_count": ("SELECT COUNT(*) AS n, SUM(w) AS total FROM t.facts", "g"),
    "group_on_attribute": ("SELECT g, SUM(v) AS s FROM t.facts GROUP BY g HAVING SUM(v) < 0", "g"),
    "projection_expression": (
        "SELECT k, COUNT(*) AS n FROM (SELECT g * 2 - v AS k FROM t.facts) GROUP BY k HAVING COUNT(*) > 3",
        "v",
    ),
    "distinct": ("SELECT DISTINCT g, s FROM t.facts WHERE v BETWEEN -5 AND 5", "id"),
    "union": (
        "SELECT g, COUNT(*) AS n FROM (SELECT g FROM t.facts WHERE v > 30 UNION ALL "
        "SELECT g FROM t.facts WHERE v < -30) GROUP BY g HAVING COUNT(*) > 1",
        "id",
    ),
    "nested_aggregate": (
        "SELECT n, COUNT(*) AS groups FROM (SELECT g, COUNT(*) AS n FROM t.facts GROUP BY g) GROUP BY n",
        "id",
    ),
    "min_only_with_filter": ("SELECT s, MIN(w) AS lo FROM t.facts WHERE g <> 3 GROUP BY s", "v"),
    # Top-k: ORDER BY ends with a unique column, so no two rows tie at the k-th place.
    "topk_rows": ("SELECT id, v FROM t.facts WHERE g > 1 ORDER BY v DESC, id LIMIT 5", "id"),
    "topk_groups": (
        "SELECT g, SUM(v) AS s FROM t.facts GROUP BY g ORDER BY s DESC NULLS LAST, g LIMIT 3",
        "id",
    ),
    "topk_ascending_nulls": ("SELECT g, id FROM t.facts ORDER BY g, id LIMIT 4", "v"),
    # DISTINCT aggregates, maintained as aggregates over DISTINCT rows (NULLs among the values).
    "count_distinct": (
        "SELECT g, COUNT(DISTINCT v) AS n FROM t.facts GROUP BY g HAVING COUNT(DISTINCT v) > 5",
        "id",
    ),
    "sum_distinct_topk": (
        "SELECT s, SUM(DISTINCT g) AS t FROM t.facts GROUP BY s ORDER BY t DESC, s LIMIT 2",
        "id",
    ),
    "count_distinct_global": ("SELECT COUNT(DISTINCT g) AS n FROM t.facts WHERE v > 20", "v"),
    "count_distinct_columns": (
        "SELECT g, COUNT(DISTINCT v, s) AS n FROM t.facts GROUP BY g HAVING COUNT(DISTINCT v, s) > 3",
        "id",
    ),
    # Split into one aggregation per DISTINCT argument and one for the rest, joined on g
    # (NULL groups matching with <=>).
    "distinct_beside_others": (
        "SELECT g, SUM(v) AS t, COUNT(DISTINCT s) AS ds, COUNT(DISTINCT v) AS dv FROM t.facts "
        "GROUP BY g HAVING COUNT(*) > 2",
        "id",
    ),
    "distinct_beside_others_global": (
        "SELECT COUNT(*) AS n, COUNT(DISTINCT g) AS dg FROM t.facts WHERE v > 0",
        "v",
    ),
    # The ALL forms number each copy of a row within its copies (a window over the whole row).
    "intersect_all": (
        "SELECT g FROM t.facts WHERE v > 0 INTERSECT ALL SELECT g FROM t.facts WHERE v < 10",
        "g",
    ),
    "except_all": (
        "SELECT g, s FROM t.facts WHERE v > -10 EXCEPT ALL SELECT g, s FROM t.facts WHERE v > 20",
        "g",
    ),
    # Correlated NOT IN as NOT EXISTS of an equal value, a NULL, or a NULL probe.
    "correlated_not_in": (
        "SELECT id FROM t.facts f WHERE f.g NOT IN (SELECT x.v FROM t.facts x WHERE x.s = f.s AND x.id < 30)",
        "id",
    ),
    "exists_over_aggregation": (
        "SELECT g, COUNT(*) AS n FROM t.facts f WHERE EXISTS "
        "(SELECT 1 FROM t.facts x WHERE x.s = f.s GROUP BY x.g HAVING SUM(x.v) > 30) GROUP BY g",
        "id",
    ),
    "not_exists_over_global_aggregation": (
        "SELECT id FROM t.facts f WHERE NOT EXISTS "
        "(SELECT 1 FROM t.facts x WHERE x.g = f.g HAVING MAX(x.v) > 35)",
        "id",
    ),
    # Windows: a row's provenance is its whole partition (NULL groups make a partition too).
    "top_n_per_group": (
        "SELECT id, g, v FROM (SELECT id, g, v, ROW_NUMBER() OVER (PARTITION BY g ORDER BY v DESC, id) AS rn "
        "FROM t.facts) WHERE rn <= 2",
        "id",
    ),
    "qualify_rank": (
        "SELECT g, v FROM t.facts WHERE v > -30 QUALIFY RANK() OVER (PARTITION BY g ORDER BY v) <= 2",
        "v",
    ),
    "dense_rank_whole_input": (
        "SELECT id, v FROM (SELECT id, v, DENSE_RANK() OVER (ORDER BY v DESC) AS d FROM t.facts WHERE g > 2) "
        "WHERE d <= 3",
        "id",
    ),
    "window_count_max": (
        "SELECT g, id FROM (SELECT g, id, COUNT(*) OVER (PARTITION BY g) AS n, "
        "MAX(v) OVER (PARTITION BY g ORDER BY id) AS m, MIN(s) OVER (PARTITION BY g) AS lo, "
        "SUM(v) OVER (PARTITION BY g ORDER BY v DESC) AS run FROM t.facts) "
        "WHERE n > 8 AND m > 30 AND lo = 'a' AND run > 0",
        "g",
    ),
    # SUM of doubles (with NaNs) and AVG, of columns and of expressions.
    "window_sum_avg": (
        "SELECT g, id, run FROM (SELECT g, id, SUM(w) OVER (PARTITION BY g ORDER BY v, id) AS run, "
        "AVG(v) OVER (PARTITION BY s) AS m, AVG(w) OVER (PARTITION BY g) AS mw, "
        "SUM(v * 2) OVER (PARTITION BY s ORDER BY id) AS e FROM t.facts) WHERE m > 0 AND e > 10",
        "id",
    ),
    # Explicit frames: sliding and one-sided ROWS frames, RANGE by value over a key with NULLs,
    # RANGE from the current row's peers to the end.
    "window_frames": (
        "SELECT g, id FROM (SELECT g, id, v, "
        "AVG(v) OVER (PARTITION BY g ORDER BY id ROWS BETWEEN 2 PRECEDING AND 1 FOLLOWING) AS near, "
        "MIN(v) OVER (PARTITION BY s ORDER BY id ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) AS low, "
        "SUM(v) OVER (PARTITION BY s ORDER BY g RANGE BETWEEN 1 PRECEDING AND 2 FOLLOWING) AS close, "
        "COUNT(*) OVER (PARTITION BY g ORDER BY v DESC RANGE BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) "
        "AS n, "
        "MAX(w) OVER (PARTITION BY g ORDER BY id ROWS BETWEEN 3 PRECEDING AND 1 PRECEDING) AS peak, "
        "SUM(w) OVER (PARTITION BY s ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND 1 FOLLOWING) AS upto "
        "FROM t.facts) WHERE v > near + 5 AND low > -35 AND close > 0 AND n > 2 AND (peak > 0 OR upto < 0)",
        "id",
    ),
    "window_range_by_value": (
        "SELECT g, v FROM (SELECT g, v, COUNT(*) OVER (PARTITION BY g ORDER BY v RANGE BETWEEN 3 PRECEDING "
        "AND 2 FOLLOWING) AS near, SUM(v) OVER (PARTITION BY g ORDER BY v DESC NULLS LAST RANGE BETWEEN "
        "5 PRECEDING AND 1 PRECEDING) AS above FROM t.facts) WHERE near >= 3 OR above > 60",
        "g",
    ),
    "window_under_aggregate": (
        "SELECT r, COUNT(*) AS n FROM "
        "(SELECT RANK() OVER (PARTITION BY s ORDER BY g DESC) AS r FROM t.facts) "
        "GROUP BY r HAVING COUNT(*) > 3",
        "id",
    ),
}


def rows(rng: np.random.Generator, ids: np.ndarray) -> pa.Table:
    n = len(ids)
    g = rng.integers(0, 8, n).astype(object)
    g[rng.random(n) < 0.05] = None  # NULL groups
    w = rng.normal(0, 5, n)
    w[rng.random(n) < 0.05] = np.nan
    return pa.table(
        {
            "id": ids,
            "g": pa.array(list(g), pa.int64()),
            "v": rng.integers(-40, 41, n),
            "w": w,
            "s": rng.choice(["a", "b", "c", "d"], n),
        },
        schema=SCHEMA,
    )


def facts(id: list[int], g: list[int], v: list[int]) -> pa.Table:
    n = len(id)
    return pa.table({"id": id, "g": g, "v": v, "w": [0.0] * n, "s": ["a"] * n}, SCHEMA)


def oracle(sql: str, attribute: str, current: pa.Table) -> set[int]:
    plan = to_ir(sql, {"t.facts": SPARK_TYPES}).plan
    data = current.to_pylist()
    lineage = provenance(plan, {"t.facts": data})
    partition = PARTITIONS[attribute]
    return {partition.fragment_of(data[i][attribute]) for _, i in lineage}


def new_sketch(
    sql: str, attribute: str, keep_top: int | None = None, columnar: bool = True
) -> IncrementalSketch:
    plan = to_ir(sql, {"t.facts": SPARK_TYPES}).plan
    return IncrementalSketch(
        plan, {"t.facts": PARTITIONS[attribute]}, {"t.facts": SCHEMA}, keep_top, columnar=columnar
    )


def through_ipc(tables: dict[str, pa.Table]) -> dict[str, pa.Table]:
    saved = {}
    for name, table in tables.items():
        sink = pa.BufferOutputStream()
        with pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        saved[name] = pa.ipc.open_file(sink.getvalue()).read_all()
    return saved


def canonical(state: dict[str, pa.Table]) -> dict[str, list[str]]:
    return {name: sorted(repr(row) for row in table.to_pylist()) for name, table in state.items()}


def restarted(
    sketch: IncrementalSketch, sql: str, attribute: str, layers: list[dict[str, pa.Table]]
) -> IncrementalSketch:
    """A new engine from stored layers (a whole state, then changes), written and read back as
    Arrow IPC; it must hold exactly the old engine's state. It keeps aggregation state the other
    way (arrays or objects): each reads the other's files. The engine returned goes on from its
    stored state as a cold run does (a top-k searched where it is stored): writing a whole state,
    as the check does with another one, reads every entry."""
    stored = [through_ipc(layer) for layer in layers]
    checked = new_sketch(sql, attribute, sketch.keep_top, columnar=not sketch.columnar)
    checked.restore(stored)
    assert canonical(checked.state_tables()) == canonical(sketch.state_tables())
    fresh = new_sketch(sql, attribute, sketch.keep_top, columnar=not sketch.columnar)
    fresh.restore(stored)
    assert fresh.sketch() == sketch.sketch()
    assert fresh.state_entries() == sketch.state_entries()
    return fresh


def run_history(sql: str, attribute: str, seed: int, batches: int, keep_top: int | None = None) -> int:
    """Random batches, the sketch checked against the oracle after each; with ``keep_top``, a
    batch that exhausts the kept values is answered by a recapture (a fresh engine), as
    maintenance does. Half the seeds start with aggregation state in arrays, half as objects;
    the restart halfway switches. Returns how many recaptures that took."""
    rng = np.random.default_rng(seed)
    current = rows(rng, np.arange(60))
    next_id = 60
    sketch = new_sketch(sql, attribute, keep_top, columnar=bool(seed % 2))

    def read(table: str, columns: Sequence[str], keys: Mapping[str, pa.Array] | None) -> pa.Table:
        """The table at the new snapshot (windows read their partitions' rows)."""
        return current.select(list(columns))

    sketch.apply({"t.facts": RowDelta(current, SCHEMA.empty_table())}, read)
    recaptures = 0
    assert sketch.sketch().get("t.facts", set()) == oracle(sql, attribute, current)
    layers = [sketch.state_tables()]  # stored whole once, then as changes after each batch
    sketch.mark_stored()
    for batch in range(batches):
        if batch == batches // 2:
            sketch = restarted(sketch, sql, attribute, layers)
        deleted = current.take(rng.choice(current.num_rows, size=int(rng.integers(0, 15)), replace=False))
        inserted = rows(rng, np.arange(next_id, next_id + int(rng.integers(0, 15))))
        if rng.random() < 0.3 and deleted.num_rows:  # updates: some deleted rows come back changed
            changed = deleted.slice(0, 3)
            inserted = pa.concat_tables(
                [inserted, changed.set_column(2, "v", pa.array(-changed["v"].to_numpy()))]
            )
        next_id += inserted.num_rows
        keep = np.ones(current.num_rows, bool)
        doomed = Counter(deleted.column("id").to_pylist())
        for i, key in enumerate(current.column("id").to_pylist()):
            if doomed[key]:
                keep[i], doomed[key] = False, doomed[key] - 1
        current = pa.concat_tables([current.filter(pa.array(keep)), inserted])
        try:
            sketch.apply({"t.facts": RowDelta(inserted, deleted)}, read)
        except KeptValuesExhaustedError:
            assert keep_top, "only top-m state runs out"
            recaptures += 1
            sketch = new_sketch(sql, attribute, keep_top, columnar=sketch.columnar)
            sketch.apply({"t.facts": RowDelta(current, SCHEMA.empty_table())}, read)
            layers = [sketch.state_tables()]
            sketch.mark_stored()
        assert sketch.sketch().get("t.facts", set()) == oracle(sql, attribute, current)
        layers.append(sketch.state_tables(changes_only=True))
        sketch.mark_stored()
    return recaptures


@pytest.mark.parametrize("name", sorted(QUERIES))
@given(seed=st.integers(0, 2**32 - 1))
def test_maintained_sketch_equals_the_provenance_after_every_batch(name: str, seed: int) -> None:
    sql, attribute = QUERIES[name]
    run_history(sql, attribute, seed, batches=6)


TOP_M_QUERIES = (
    "min_max",
    "global_max",
    "min_only_with_filter",
    "topk_rows",
    "topk_groups",
    "topk_ascending_nulls",
)


@pytest.mark.parametrize("name", TOP_M_QUERIES)
@given(seed=st.integers(0, 2**32 - 1), keep_top=st.sampled_from([1, 2, 6]))
def test_top_m_state_is_exact_until_it_runs_out(name: str, seed: int, keep_top: int) -> None:
    sql, attribute = QUERIES[name]
    run_history(sql, attribute, seed, batches=6, keep_top=keep_top)


def test_top_m_keeps_few_values_and_runs_out_when_deletions_take_them() -> None:
    sql = "SELECT g, MIN(v) AS lo FROM t.facts GROUP BY g"
    whole, kept = new_sketch(sql, "id"), new_sketch(sql, "id", keep_top=3)
    data = facts(list(range(100)), [1] * 100, list(range(100)))  # one group, values 0..99
    for engine in (whole, kept):
        engine.apply({"t.facts": RowDelta(data, SCHEMA.empty_table())})
    values = [
        len(n.operator.groups[(1,)].accumulators[0].values) for n in (whole._stateful[0], kept._stateful[0])
    ]
    assert values == [100, 3]
    # Deleting the two smallest leaves the third: still known exactly.
    kept.apply({"t.facts": RowDelta(SCHEMA.empty_table(), data.slice(0, 2))})
    assert kept.sketch() == {"t.facts": {PARTITIONS["id"].fragment_of(2)}}
    # A new value below the kept ones is tracked; one past them is not needed.
    kept.apply({"t.facts": RowDelta(facts([500, 501], [1, 1], [-5, 50]), SCHEMA.empty_table())})
    assert kept.sketch() == {"t.facts": {PARTITIONS["id"].fragment_of(500)}}
    # The partial state survives a store and restore.
    again = new_sketch(sql, "id", keep_top=3)
    again.restore([through_ipc(kept.state_tables())])
    assert again._stateful[0].operator.groups[(1,)].accumulators[0].partial
    # Deleting every kept value (-5, 2, 3... all that is left of them) leaves the minimum unknown.
    doomed = pa.concat_tables([facts([500], [1], [-5]), data.slice(2, 2)])
    with pytest.raises(KeptValuesExhaustedError):
        again.apply({"t.facts": RowDelta(SCHEMA.empty_table(), doomed)})


def test_top_m_top_k_drops_rows_past_the_kept_prefix_and_runs_out() -> None:
    sql = "SELECT id, v FROM t.facts ORDER BY v DESC, id LIMIT 2"
    data = facts(list(range(40)), [1] * 40, list(range(40)))
    kept = new_sketch(sql, "id", keep_top=3)
    kept.apply({"t.facts": RowDelta(data, SCHEMA.empty_table())})
    operator = kept._stateful[0].operator
    assert len(operator.rows) == 3 and operator.partial
    assert kept.sketch() == {"t.facts": {PARTITIONS["id"].fragment_of(39)}}  # ids 39 and 38
    again = new_sketch(sql, "id", keep_top=3)
    again.restore([through_ipc(kept.state_tables())])
    assert again._stateful[0].operator.partial
    with pytest.raises(KeptValuesExhaustedError):  # two of the three kept rows go: 1 < k left
        again.apply({"t.facts": RowDelta(SCHEMA.empty_table(), data.slice(38, 2))})


def test_deleting_the_current_minimum_moves_the_sketch_to_the_next_one() -> None:
    sql = "SELECT g, MIN(v) AS lo FROM t.facts GROUP BY g"
    sketch = new_sketch(sql, "id")
    data = pa.table(
        {"id": [5, 15, 25], "g": [1, 1, 1], "v": [-3, 7, -3], "w": [0.0] * 3, "s": ["a"] * 3}, SCHEMA
    )
    sketch.apply({"t.facts": RowDelta(data, SCHEMA.empty_table())})
    assert sketch.sketch()["t.facts"] == {0, 2}  # both rows holding the minimum -3
    delta = sketch.apply({"t.facts": RowDelta(SCHEMA.empty_table(), data.slice(0, 1))})
    assert delta.removed["t.facts"] == {0} and sketch.sketch()["t.facts"] == {2}
    delta = sketch.apply({"t.facts": RowDelta(SCHEMA.empty_table(), data.slice(2, 1))})
    assert delta.added["t.facts"] == {1} and sketch.sketch()["t.facts"] == {1}


def test_a_group_that_vanishes_and_comes_back() -> None:
    sql, attribute = QUERIES["having_count"]
    sketch = new_sketch(sql, attribute)
    group = pa.table(
        {"id": [1, 2, 3, 4], "g": [7] * 4, "v": [1, 2, 3, 25], "w": [0.0] * 4, "s": ["a"] * 4}, SCHEMA
    )
    sketch.apply({"t.facts": RowDelta(group, SCHEMA.empty_table())})
    assert sketch.sketch()["t.facts"] == {2, 3}  # v = 1, 2, 3 and 25 under cuts (-20, 0, 20)
    sketch.apply({"t.facts": RowDelta(SCHEMA.empty_table(), group)})
    assert sketch.sketch()["t.facts"] == set()
    sketch.apply({"t.facts": RowDelta(group, SCHEMA.empty_table())})
    assert sketch.sketch()["t.facts"] == {2, 3}


def test_empty_and_cancelling_deltas_change_nothing() -> None:
    sql, attribute = QUERIES["having_sum"]
    sketch = new_sketch(sql, attribute)
    data = rows(np.random.default_rng(1), np.arange(50))
    sketch.apply({"t.facts": RowDelta(data, SCHEMA.empty_table())})
    before = sketch.sketch()
    assert sketch.apply({}).is_empty
    assert sketch.apply({"t.facts": RowDelta(data.slice(0, 10), data.slice(0, 10))}).is_empty
    assert sketch.sketch() == before


def test_frames_not_evaluated_in_process_are_refused_by_name() -> None:
    with pytest.raises(UnsupportedQueryError) as info:
        new_sketch(
            "SELECT id, COUNT(*) OVER (PARTITION BY g ORDER BY s RANGE BETWEEN 1 PRECEDING AND CURRENT ROW) "
            "AS n FROM t.facts",
            "id",
        )
    assert "the frame RANGE BETWEEN 1 PRECEDING AND CURRENT ROW over other than one numeric" in str(
        info.value
    )


def test_deleting_a_top_k_member_brings_in_the_next_row() -> None:
    sketch = new_sketch("SELECT id, v FROM t.facts ORDER BY v DESC, id LIMIT 2", "id")
    data = facts(id=[5, 15, 25, 35], g=[1] * 4, v=[9, 8, 7, 1])
    sketch.apply({"t.facts": RowDelta(data, SCHEMA.empty_table())})
    assert sketch.sketch()["t.facts"] == {0, 1}
    delta = sketch.apply({"t.facts": RowDelta(SCHEMA.empty_table(), data.slice(0, 1))})
    assert (delta.added["t.facts"], delta.removed["t.facts"]) == ({2}, {0})


def test_delta_filters_come_from_selections_right_above_every_scan() -> None:
    filtered = new_sketch(QUERIES["having_count"][0], "v").delta_filters()
    rows = facts(id=[1, 2, 3], g=[1, 1, 1], v=[-20, -9, 5])
    assert rows.filter(filtered["t.facts"]).column("v").to_pylist() == [-9, 5]
    # Two filtered scans of one table: the OR of their filters.
    union = new_sketch(QUERIES["union"][0], "id").delta_filters()
    assert rows.filter(union["t.facts"]).column("v").to_pylist() == []
    # An unfiltered scan reads every delta row.
    assert new_sketch(QUERIES["having_sum"][0], "id").delta_filters() == {}


def test_a_delta_read_through_the_whole_selection_is_not_selected_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Rows read through :meth:`delta_filters`' filter pass the selection it was made from:
    a table named ``filtered`` skips that selection (one evaluation fewer per run), with the
    same sketch as the oracle's. Two scans of one table (a filter that is the OR of theirs)
    evaluate their selections still. (Each query has a HAVING selection besides.)"""
    evaluated: list[int] = []
    select = engine_module.stateless.select

    def counted(rows: object, condition: object) -> object:
        evaluated.append(1)
        return select(rows, condition)  # type: ignore[arg-type]

    monkeypatch.setattr(engine_module.stateless, "select", counted)
    rng = np.random.default_rng(11)
    current = rows(rng, np.arange(300))
    for name, attribute in (("having_count", "v"), ("union", "id")):
        sql = QUERIES[name][0]
        sketch = new_sketch(sql, attribute)
        read = current.filter(sketch.delta_filters()["t.facts"])
        evaluated.clear()
        sketch.apply({"t.facts": RowDelta(read, SCHEMA.empty_table())}, filtered={"t.facts"})
        assert sketch.sketch()["t.facts"] == oracle(sql, attribute, current)
        assert len(evaluated) == (1 if name == "having_count" else 3)
        unsaid = new_sketch(sql, attribute)
        evaluated.clear()  # not said to be filtered: evaluated
        unsaid.apply({"t.facts": RowDelta(read, SCHEMA.empty_table())})
        assert len(evaluated) == (2 if name == "having_count" else 3)


def test_a_window_whose_rows_carry_too_many_fragments_is_refused_unless_a_filter_drops_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each row of ``SUM(v) OVER (PARTITION BY g)`` carries its whole partition's fragments:
    rows times fragments ids. Above WINDOW_FRAGMENT_IDS for one delta (and
    WINDOW_FRAGMENTS_PER_ROW per row: a top-N per group carries a few) the run is refused with
    IncrementalTooCostlyError (``auto`` then recaptures). The rows a selection above the window
    drops (through the derived table's select list) are neither built nor counted: the same
    window under a selective filter is maintained, equal to the oracle."""
    monkeypatch.setattr(engine_module, "WINDOW_FRAGMENT_IDS", 600)
    monkeypatch.setattr(engine_module, "WINDOW_FRAGMENTS_PER_ROW", 10)
    rng = np.random.default_rng(5)
    current = rows(rng, np.arange(200))

    def read(table: str, columns: Sequence[str], keys: Mapping[str, pa.Array] | None) -> pa.Table:
        return current.select(list(columns))

    window = "SELECT id, g, t FROM (SELECT id, g, SUM(v) OVER (PARTITION BY g) AS t FROM t.facts) x"
    wide = new_sketch(window, "id")
    with pytest.raises(IncrementalTooCostlyError) as info:
        wide.apply({"t.facts": RowDelta(current, SCHEMA.empty_table())}, read)
    assert "carry their partition's fragments" in str(info.value)
    assert "SUM(...) OVER (PARTITION BY g)" in str(info.value)

    filtered = f"{window} WHERE id < 15"
    narrow = new_sketch(filtered, "id")
    narrow.apply({"t.facts": RowDelta(current, SCHEMA.empty_table())}, read)
    assert narrow.sketch()["t.facts"] == oracle(filtered, "id", current)
    inserted = rows(rng, np.arange(200, 210))
    current = pa.concat_tables([current, inserted])
    narrow.apply({"t.facts": RowDelta(inserted, SCHEMA.empty_table())}, read)
    assert narrow.sketch()["t.facts"] == oracle(filtered, "id", current)


def test_a_window_over_small_partitions_carrying_a_few_fragments_per_row_is_not_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A window over many small partitions (or a top-N per group) carries a few fragments per
    row: many ids over a big first load, few per row; not refused, equal to the oracle."""
    monkeypatch.setattr(engine_module, "WINDOW_FRAGMENT_IDS", 50)
    monkeypatch.setattr(engine_module, "WINDOW_FRAGMENTS_PER_ROW", 10)
    current = rows(np.random.default_rng(6), np.arange(300))

    def read(table: str, columns: Sequence[str], keys: Mapping[str, pa.Array] | None) -> pa.Table:
        return current.select(list(columns))

    sql = "SELECT id, v, t FROM (SELECT id, v, SUM(w) OVER (PARTITION BY v) AS t FROM t.facts) x"
    sketch = new_sketch(sql, "id")
    sketch.apply({"t.facts": RowDelta(current, SCHEMA.empty_table())}, read)
    assert sketch.sketch()["t.facts"] == oracle(sql, "id", current)
