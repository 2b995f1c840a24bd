"""Delta validation before maintenance, on real sketches: a failing batch blocks the sketches
it feeds at their last good version (queries stay correct without them), until a later commit
fixes it or an operator overrides it; nothing published is lost."""

from __future__ import annotations

import pyarrow as pa
import pytest
from sqlalchemy import update

from sketch_core.datasets import synthetic_table
from sketch_core.errors import (
    ConfigurationError,
    DeltaQuarantinedError,
    TableNotFoundError,
    ValidationOverrideError,
)
from sketch_core.metastore import schema as t
from sketch_core.service import SketchService
from tests.service.test_maintain import TOPK, captured, fresh_fragments, maintained, sibling


def rows(n: int, seed: int, key_start: int, **changes: list[object]) -> pa.Table:
    """``n`` synthetic rows, with some columns' leading values replaced."""
    batch = synthetic_table(n, 40, seed=seed, key_start=key_start)
    for column, values in changes.items():
        kept = batch.column(column).to_pylist()[len(values) :]
        index = batch.column_names.index(column)
        batch = batch.set_column(index, column, pa.array(values + kept, batch.schema.field(column).type))
    return batch


def same_rows(svc: SketchService, sql: str) -> bool:
    sketched, plain = svc.query(sql), svc.query(sql, use_sketches=False)
    return sorted(map(repr, sketched.table.to_pylist())) == sorted(map(repr, plain.table.to_pylist()))


def sketched_table(svc: SketchService, ns: str, rows_: int, seed: int, suffix: str) -> tuple[str, str, str]:
    """A synthetic table sorted by ``a`` and a HAVING sketch on it: (table, sketch, sql)."""
    table = f"{ns}.facts"
    svc.tables.create(table, synthetic_table(rows_, 40, seed=seed), sort_by=["a"])
    name, sql = captured(svc, table, suffix)
    return table, name, sql


def maintains_to(svc: SketchService, name: str, sql: str, version: int, strategy: str = "auto") -> None:
    """Maintaining publishes ``version``, equal to a fresh capture at the newest commit."""
    (run,) = svc.maintain(name, strategy)
    assert run.to_version == version and run.strategy != "none"
    assert maintained(svc, name) == fresh_fragments(svc, sql, name, svc.latest_sequence())


@pytest.fixture
def svc(spark_svc: SketchService) -> SketchService:
    return sibling(spark_svc, validate_deltas=True)


def test_a_good_batch_passes_and_a_null_sort_key_blocks_until_a_later_commit_fixes_it(
    svc: SketchService, ns: str
) -> None:
    table, name, sql = sketched_table(svc, ns, 3000, 41, "gated")
    behind, behind_sql = captured(svc, table, "behind", template=TOPK)  # left at version 1

    good = svc.tables.append(table, rows(30, 42, 10_000))
    (run,) = svc.maintain(name, "incremental")
    assert run.to_version == 2
    assert [(v.seq, v.status) for v in svc.validations.results(table, after=good - 1)] == [(good, "passed")]

    bad = svc.tables.append(table, rows(20, 43, 20_000, a=[None, None]))
    with pytest.raises(DeltaQuarantinedError) as info:
        svc.maintain(name, "incremental")
    assert info.value.sketch == name and [(tb, s) for tb, s, _ in info.value.batches] == [(table, bad)]
    assert "2 NULL values" in str(info.value) and "override" in str(info.value)
    with pytest.raises(DeltaQuarantinedError):
        svc.maintain(name, "full")  # a recapture would take the batch in just the same
    assert svc.maintain_each([name]) == [], "in a batch of sketches a blocked one waits"
    assert (blocked := svc.blocked(name)) is not None and blocked.batches == info.value.batches
    assert svc.sketch(name).version == 2, "stays at its last good version"
    (status,) = svc.status(name)
    assert status.blocked is not None and f"{table}@{bad}" in status.blocked and "NULL" in status.blocked
    assert [b.seq for b in svc.quarantined([table])] == [bad]
    # A query at the newest snapshot runs without the blocked sketch, and is right.
    on_query = sibling(svc, maintain_on_query="incremental")
    result = on_query.query(sql)
    assert result.sketch is None and same_rows(on_query, sql)

    # The loader repairs its batch: the net delta passes, the batch counts as fixed.
    svc.tables.delete(table, "a IS NULL")
    (run,) = svc.maintain(name, "incremental")
    assert run.to_version == 3 and run.strategy == "incremental"
    (fixed,) = [v for v in svc.validations.results(table) if v.seq == bad]
    assert fixed.status == "fixed" and "net delta" in (fixed.resolution or "")
    assert svc.status(name)[0].blocked is None and svc.blocked(name) is None
    assert maintained(svc, name) == fresh_fragments(svc, sql, name, svc.latest_sequence())
    assert same_rows(svc, sql)
    # Fixed from the repairing commit on only: a query pinned between the bad batch and the
    # fix still finds the batch in its delta, and runs without the sketch.
    pinned = on_query.query(behind_sql, snapshot=bad)
    assert pinned.sketch is None and svc.sketch(behind).version == 1
    plain = svc.query(behind_sql, snapshot=bad, use_sketches=False)
    assert pinned.table.to_pylist() == plain.table.to_pylist()
    maintains_to(svc, behind, behind_sql, 2, "incremental")  # to the newest snapshot: past the fix


def test_an_outlier_is_quarantined_until_overridden_and_then_widens_the_domain(
    svc: SketchService, ns: str
) -> None:
    table, name, sql = sketched_table(svc, ns, 3000, 51, "outlier")
    sentinel = svc.tables.append(table, rows(10, 52, 10_000, b=[-999_999_999]))
    # Validated right after the load (a DAG's step), so maintenance only reads the result.
    (checked,) = svc.validate_deltas([table])
    assert (checked.seq, checked.status, checked.inserted_rows) == (sentinel, "failed", 10)
    assert svc.validate_deltas([table]) == [checked], "each batch is validated once"
    with pytest.raises(DeltaQuarantinedError) as info:
        svc.maintain(name)
    assert "outside the learned domain" in str(info.value) and "-999999999" in str(info.value)

    with pytest.raises(ConfigurationError):
        svc.override_validation(table, sentinel, "  ")
    with pytest.raises(ValidationOverrideError) as refused:
        svc.override_validation(table, sentinel - 1, "not a batch")
    assert refused.value.seq == sentinel - 1
    with pytest.raises(TableNotFoundError):
        svc.override_validation(f"{ns}.nothing", sentinel, "no such table")

    svc.override_validation(table, sentinel, "a legacy default the report tolerates")
    (run,) = svc.maintain(name)
    assert run.to_version == 2
    (accepted,) = svc.validations.results(table, sentinel - 1, sentinel)
    assert accepted.status == "overridden" and accepted.resolution == "a legacy default the report tolerates"
    # Learned: the same value again passes now.
    svc.tables.append(table, rows(10, 53, 11_000, b=[-999_999_999]))
    maintains_to(svc, name, sql, 3)


def test_declared_nullable_columns_and_counts_that_disagree_with_the_commit(
    svc: SketchService, ns: str
) -> None:
    table, name, _ = sketched_table(svc, ns, 2000, 61, "counts")
    with pytest.raises(ConfigurationError):
        svc.declare_nullable(table, ["no_such_column"])
    svc.declare_nullable(table, ["a"])
    svc.tables.append(table, rows(10, 62, 10_000, a=[None]))
    (run,) = svc.maintain(name)
    assert run.to_version == 2, "a declared nullable column may hold NULLs"

    # The commit's metadata says the table grew by 7 rows; the batch holds 10.
    seq = svc.tables.append(table, rows(10, 63, 11_000))
    c = t.table_commits.c
    with svc.engine.begin() as conn:
        conn.execute(update(t.table_commits).where(c.seq == seq).values(total_rows=c.total_rows - 3))
    other = sibling(svc)  # a fresh commit log reads the changed metadata
    with pytest.raises(DeltaQuarantinedError) as info:
        other.maintain(name)
    assert "10 rows inserted" in str(info.value) and "says 7" in str(info.value)
    assert other.sketch(name).version == 2


def test_off_maintains_without_validating(svc: SketchService, ns: str) -> None:
    table, name, _ = sketched_table(svc, ns, 2000, 71, "unchecked")
    seq = svc.tables.append(table, rows(10, 72, 10_000, a=[None]))
    (run,) = sibling(svc, validate_deltas=False).maintain(name)
    assert run.to_version == 2 and svc.validations.results(table, seq - 1, seq) == []
