"""Join Bloom filters (IMP 9.4.1): never a false negative, few false positives, stored and
restored with the state, and a join maintained with them equals one maintained without."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from sketch_core.algebra.frontend import to_ir
from sketch_core.incremental.bloom import KeyBloom, hashable, key_hashes
from sketch_core.incremental.engine import IncrementalSketch, RowDelta
from tests.incremental.test_engine_joins import PARTITIONS, SCHEMAS, SPARK_TYPES, generate, reader_of, remove


def test_every_added_key_is_found_and_few_others_are() -> None:
    rng = np.random.default_rng(1)
    keys = rng.choice(10**9, size=20_000, replace=False)
    bloom = KeyBloom(len(keys))
    bloom.add([pa.array(keys[:10_000]), pa.array(keys[:10_000] % 7)])
    assert bloom.might_contain([pa.array(keys[:10_000]), pa.array(keys[:10_000] % 7)]).all()
    others = bloom.might_contain([pa.array(keys[10_000:]), pa.array(keys[10_000:] % 7)])
    assert others.mean() < 0.02  # sized for 20,000 keys, holding 10,000
    # Same values in another column order are another key.
    assert bloom.might_contain([pa.array(keys[:10_000] % 7), pa.array(keys[:10_000])]).mean() < 0.02


def test_null_keys_are_never_found_and_dates_hash_like_their_days() -> None:
    bloom = KeyBloom(100)
    bloom.add([pa.array([1, None, 3], pa.int64())])
    assert bloom.added == 2
    assert bloom.might_contain([pa.array([1, None, 3], pa.int64())]).tolist() == [True, False, True]
    days = KeyBloom(100)
    days.add([pa.array([19000, 19001], pa.int32()).cast(pa.date32())])
    assert days.might_contain([pa.array([19000, 19001], pa.int32()).cast(pa.date32())]).all()
    assert hashable([pa.int32(), pa.date32(), pa.timestamp("us")])
    assert not hashable([pa.int64(), pa.string()]) and not hashable([pa.decimal128(12, 2)])


def test_a_filter_round_trips_through_its_table_and_goes_stale() -> None:
    bloom = KeyBloom(1000)
    bloom.add([pa.array(range(500))])
    bloom.note_deleted(100)
    again = KeyBloom.from_table(bloom.to_table())
    assert again is not None and (again.words == bloom.words).all()
    assert (again.capacity, again.added, again.deleted, again.dirty) == (1000, 500, 100, False)
    assert not again.stale
    again.note_deleted(200)  # most of what was added is gone: rebuild
    assert again.stale
    grown = KeyBloom(10)
    grown.add([pa.array(range(41))])
    assert grown.stale  # far past its capacity: too many false positives
    assert KeyBloom.from_table(KeyBloom(10).to_table().slice(0, 0)) is None


SQL = (
    "SELECT d.label, SUM(f.v) AS s FROM t.facts f JOIN t.dims d ON f.g = d.dg "
    "WHERE d.weight > 15 GROUP BY d.label HAVING SUM(f.v) > 0"
)


def _engine() -> IncrementalSketch:
    plan = to_ir(SQL, SPARK_TYPES).plan
    partitions = {"t.facts": PARTITIONS[("t.facts", "id")], "t.dims": PARTITIONS[("t.dims", "dg")]}
    return IncrementalSketch(plan, partitions, SCHEMAS)


@pytest.mark.parametrize("restart", ["whole", "layers"])
def test_join_maintained_with_filters_equals_without_and_probes_fewer_rows(restart: str) -> None:
    rng = np.random.default_rng(7)
    data = {t: generate(t, rng, np.arange(n)) for t, n in (("t.facts", 400), ("t.dims", 12))}
    with_bloom, without = _engine(), _engine()
    first = {t: RowDelta(d, d.schema.empty_table()) for t, d in data.items()}
    with_bloom.apply(first, reader_of(data))
    without.apply(first, reader_of(data), blooms=False)
    layers = [with_bloom.state_tables()]
    with_bloom.mark_stored()
    next_id = {"t.facts": 400, "t.dims": 12}
    for batch in range(8):
        deltas = {}
        for table in ("t.facts", "t.dims") if batch % 3 == 2 else ("t.facts",):
            deleted = data[table].take(rng.choice(data[table].num_rows, size=5, replace=False))
            inserted = generate(table, rng, np.arange(next_id[table], next_id[table] + 30))
            next_id[table] += 30
            data[table] = pa.concat_tables([remove(data[table], deleted), inserted])
            deltas[table] = RowDelta(inserted, deleted)
        if batch == 4:  # a later run continues from the stored state
            restored = _engine()
            restored.restore(layers if restart == "layers" else [with_bloom.state_tables()])
            (kept,), (loaded,) = with_bloom._joins, restored._joins
            assert kept.blooms[1] is not None and loaded.blooms[1] is not None  # the filter over dims
            assert (loaded.blooms[1].words == kept.blooms[1].words).all()
            assert loaded.blooms[1].added == kept.blooms[1].added
            with_bloom = restored
        with_bloom.apply(deltas, reader_of(data))
        without.apply(deltas, reader_of(data), blooms=False)
        assert with_bloom.sketch() == without.sketch()
        layers.append(with_bloom.state_tables(changes_only=True))
        with_bloom.mark_stored()
    probed, passed = with_bloom.bloom_counts()
    # Only dims with weight > 15 (about an eighth) reach the join: most fact rows are dropped.
    assert probed > 0 and passed < probed / 2
    assert without.bloom_counts() == (0, 0)


def test_a_side_whose_keys_come_from_a_cross_product_gets_no_filter(monkeypatch: pytest.MonkeyPatch) -> None:
    """Building a filter reads one table; keys drawn from two tables (here a cross product of
    dims and tags) give no filter, rather than a read of the whole product."""
    import sketch_core.incremental.join as join_module

    sql = (
        "SELECT dt.label, COUNT(*) AS n FROM (SELECT * FROM t.dims d CROSS JOIN t.tags t) dt "
        "JOIN t.facts f ON f.g = dt.dg AND f.id = dt.tid GROUP BY dt.label"
    )
    attributes = {"t.facts": "id"}
    plan = to_ir(sql, SPARK_TYPES).plan
    rng = np.random.default_rng(3)
    data = {t: generate(t, rng, np.arange(n)) for t, n in (("t.facts", 50), ("t.dims", 30), ("t.tags", 40))}
    engine = IncrementalSketch(plan, {t: PARTITIONS[(t, a)] for t, a in attributes.items()}, SCHEMAS)
    engine.apply({t: RowDelta(d, d.schema.empty_table()) for t, d in data.items()}, reader_of(data))
    (top, cross) = sorted(engine._joins, key=lambda j: len(j.keys))[::-1]
    assert not cross.keys  # dims x tags
    assert top.bloom_sources[0] is None and top.bloom_sources[1] is not None
    monkeypatch.setattr(join_module, "MAX_CROSS_PRODUCT_ROWS", 1000)  # the product has 1,200 pairs
    inserted = generate("t.facts", rng, np.arange(100, 110))
    data["t.facts"] = pa.concat_tables([data["t.facts"], inserted])
    engine.apply({"t.facts": RowDelta(inserted, SCHEMAS["t.facts"].empty_table())}, reader_of(data))


def test_added_keys_set_the_bits_their_positions_name() -> None:
    """The bits are set where the filter's positions say (word p // 64, bit p % 64): what
    ``might_contain`` reads, and what a stored filter holds for another process."""
    rng = np.random.default_rng(7)
    keys = pa.array(rng.integers(-(10**12), 10**12, 5_000))
    bloom = KeyBloom(4_000)
    bloom.add([keys.slice(0, 3_000)])
    bloom.add([keys.slice(3_000)])
    hashed, _ = key_hashes([keys])
    positions = bloom._positions(hashed).ravel()
    expected = np.zeros_like(bloom.words)
    np.bitwise_or.at(
        expected, (positions >> np.uint64(6)).astype(np.int64), np.uint64(1) << (positions & np.uint64(63))
    )
    assert np.array_equal(bloom.words, expected)
