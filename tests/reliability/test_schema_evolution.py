"""Schema evolution of a table under a sketch: an added column is adapted to (nothing the
sketch reads changed), a widened column makes maintenance recapture once (its stored state
holds the old type) and says why, renames and drops are refused (Spark's ALTER TABLE does them).
Reports stay equal to the plain query throughout."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest

from sketch_core.datasets import synthetic_table
from sketch_core.errors import InvalidDataError, StateMissingError
from sketch_core.service import SketchService
from tests.service.test_maintain import HAVING, fresh_fragments, maintained, sibling
from tests.tables.test_expire_snapshots import bag


@pytest.fixture
def evolving(spark_svc: SketchService, ns: str) -> tuple[SketchService, str, str, str]:
    """A table whose ``b`` is int32, and a HAVING sketch (summing b) with state."""
    svc = sibling(spark_svc)
    table = f"{ns}.facts"
    data = synthetic_table(3000, 40, seed=111)
    data = data.set_column(data.column_names.index("b"), "b", data.column("b").cast(pa.int32()))
    svc.tables.create(table, data, sort_by=["a"])
    name, sql = f"{ns}_evolving", HAVING.format(t=table)
    svc.capture(sql, name=name, attributes={table: "a"}, fragments=40, with_state=True)
    return svc, table, name, sql


def rows(n: int, seed: int, key_start: int, **extra: pa.Array) -> pa.Table:
    batch = synthetic_table(n, 40, seed=seed, key_start=key_start)
    for column, values in extra.items():
        batch = batch.append_column(column, values)
    return batch


def equal_to_plain(svc: SketchService, sql: str) -> bool:
    return bag(svc.query(sql).table) == bag(svc.query(sql, use_sketches=False).table)


def test_an_added_column_is_adapted_to(evolving: tuple[SketchService, str, str, str]) -> None:
    svc, table, name, sql = evolving
    seq = svc.tables.evolve_schema(table, add={"region": pa.string()})
    assert pa.types.is_large_string(svc.tables.schema(table).field("region").type)
    assert seq == svc.latest_sequence() == svc.sketch(name).sequence, "metadata only: no commit taken"
    assert sibling(svc).tables.schema(table).names[-1] == "region", "another process sees it"
    svc.tables.append(table, rows(40, 112, 5000, region=pa.array(["north"] * 40)))
    (run,) = svc.maintain(name, "incremental")
    assert run.strategy == "incremental" and run.to_version == 2, "adapted: nothing it reads changed"
    assert maintained(svc, name) == fresh_fragments(svc, sql, name, svc.latest_sequence())
    assert equal_to_plain(svc, sql)
    # The new column reads as NULL in the files written before it existed.
    regions = svc.query(f"SELECT region, COUNT(*) AS n FROM {table} GROUP BY region", use_sketches=False)
    assert dict(zip(*regions.table.to_pydict().values(), strict=True)) == {None: 3000, "north": 40}
    assert svc.quarantined([table]) == [], "the expectation suite followed the new column"


def test_a_widened_column_is_recaptured_once_and_says_why(
    evolving: tuple[SketchService, str, str, str],
) -> None:
    svc, table, name, sql = evolving
    svc.tables.evolve_schema(table, widen={"b": pa.int64()})
    svc.tables.append(table, rows(40, 113, 5000))
    with pytest.raises(StateMissingError) as info:
        svc.maintain(name, "incremental")
    assert "widened" in str(info.value) and f"{table}: b" in str(info.value)
    (run,) = svc.maintain(name, "auto")
    assert run.strategy == "full" and run.to_version == 2
    assert maintained(svc, name) == fresh_fragments(svc, sql, name, svc.latest_sequence())
    svc.tables.append(table, rows(20, 114, 6000))
    (after,) = svc.maintain(name, "auto")
    assert after.strategy == "incremental", "once recaptured, incremental again"
    assert maintained(svc, name) == fresh_fragments(svc, sql, name, svc.latest_sequence())
    assert equal_to_plain(svc, sql)
    assert svc.quarantined([table]) == []


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"add": {"a": pa.int64()}}, "a exists already"),
        ({"widen": {"nope": pa.int64()}}, "nope is not a column"),
        ({"widen": {"d": pa.int32()}}, "d cannot go from int64 to int32"),
        ({"widen": {"a": pa.string()}}, "a cannot go from int64 to string"),
        ({}, "no change asked"),
    ],
)
def test_changes_other_than_adding_and_widening_are_refused(
    evolving: tuple[SketchService, str, str, str], change: dict[str, dict[str, pa.DataType]], says: str
) -> None:
    svc, table, name, _ = evolving
    before = svc.tables.schema(table)
    with pytest.raises(InvalidDataError) as info:
        svc.tables.evolve_schema(table, **change)
    assert says in str(info.value) and "rename" in str(info.value)
    assert svc.tables.schema(table) == before and svc.sketch(name).version == 1


def test_a_decimals_precision_is_widened_at_its_scale(spark_svc: SketchService, ns: str) -> None:
    svc, table = spark_svc, f"{ns}.priced"
    svc.tables.create(
        table, pa.table({"id": [1, 2], "amt": pa.array([Decimal("1.25"), None], pa.decimal128(9, 2))})
    )
    svc.tables.evolve_schema(table, widen={"amt": pa.decimal128(14, 2)})
    assert svc.tables.schema(table).field("amt").type == pa.decimal128(14, 2)
    svc.tables.append(
        table, pa.table({"id": [3], "amt": pa.array([Decimal("123456789.99")], pa.decimal128(14, 2))})
    )
    total = svc.query(f"SELECT SUM(amt) AS s FROM {table}", use_sketches=False).table
    assert total.column("s").to_pylist() == [Decimal("123456791.24")]
    with pytest.raises(InvalidDataError, match="amt cannot go from decimal128"):
        svc.tables.evolve_schema(table, widen={"amt": pa.decimal128(16, 4)})  # another scale


def test_columns_added_and_widened_in_one_call_each_get_their_own_type(
    spark_svc: SketchService, ns: str
) -> None:
    """The types asked for are matched to their columns by name: converted together, the new
    fields had no ids yet, and the added column got the widened one's type."""
    table = f"{ns}.facts"
    data = pa.table({"id": pa.array([1, 2], pa.int64()), "small": pa.array([1, 2], pa.int32())})
    spark_svc.tables.create(table, data)
    spark_svc.tables.evolve_schema(
        table, add={"region": pa.string(), "weight": pa.float64()}, widen={"small": pa.int64()}
    )
    schema = spark_svc.tables.schema(table)
    assert pa.types.is_large_string(schema.field("region").type)
    assert schema.field("weight").type == pa.float64()
    assert schema.field("small").type == pa.int64()
    spark_svc.tables.append(
        table,
        pa.table(
            {
                "id": pa.array([3], pa.int64()),
                "small": pa.array([3], pa.int64()),
                "region": pa.array(["north"]),
                "weight": pa.array([0.5]),
            }
        ),
    )
    everything = spark_svc.query(f"SELECT id, region, weight FROM {table} ORDER BY id", use_sketches=False)
    assert everything.table.to_pylist()[-1] == {"id": 3, "region": "north", "weight": 0.5}
