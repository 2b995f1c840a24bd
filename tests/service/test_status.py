"""``svc.status()`` reads every sketch's status in a dozen queries, whatever their number (the
sketches page and ``sketch status`` list them all), and shows what the per-sketch reads of the
metastore say of each: the oracle is those reads, one sketch at a time."""

from __future__ import annotations

import pytest

from sketch_core.datasets import synthetic_table
from sketch_core.errors import SketchNotFoundError
from sketch_core.policy import Policy
from sketch_core.service import SketchService
from sketch_core.status import SketchStatus
from tests.metastore.statements import counted_statements
from tests.service.test_maintain import HAVING, TOPK, captured

# status() of any number of sketches: a query per kind of record and the commit log's (15 in
# all when this was written; reading sketch by sketch took 19 per sketch).
MOST_STATEMENTS = 20


def read_one_by_one(svc: SketchService, shown: SketchStatus) -> None:
    """``shown`` agrees with what the metastore's per-sketch reads say of its sketch."""
    name = shown.name
    record = svc.sketches.version(name)
    assert record is not None, "every sketch here has a version"
    assert (shown.version, shown.sequence) == (record.version, record.sequence)
    assert shown.version_count == len(svc.sketches.versions(name))
    last = svc.sketches.runs(name)[-1]
    assert shown.last_run is not None
    assert (shown.last_run.strategy, shown.last_run.status) == (last["strategy"], last["status"])
    decisions = svc.policies.decisions(name, limit=1)
    assert shown.last_decision == (decisions[0] if decisions else None)
    assert shown.cost_decision == svc.costs.last_decision(name)
    assert shown.last_use == svc.costs.last_use(name)
    behind = [
        c for c in svc.commit_log.commits(after_seq=record.sequence) if c.table in record.table_snapshots
    ]
    assert (shown.commits_behind, shown.delta_rows_pending) == (
        len(behind),
        sum(c.added_rows + c.deleted_rows for c in behind),
    )
    sketch = svc.sketch(name)
    assert {s.table for s in shown.tables} == set(sketch.partitions)
    for table_status in shown.tables:
        # The ranges the partition has: as many as asked for, fewer on few distinct values.
        (partition,) = [
            p for p in map(svc.sketches.partition_by_id, record.bitmaps) if p.table == table_status.table
        ]
        ranges = len(partition.boundaries["cuts"]) + 1
        attribute, asked = sketch.partitions[table_status.table]
        assert (table_status.attribute, table_status.fragment_count) == (attribute, ranges)
        assert ranges <= asked
        assert table_status.fragments == len(sketch.fragments[table_status.table])


def test_status_of_many_sketches_in_a_few_queries_agrees_with_each_sketchs_records(
    spark_svc: SketchService, ns: str
) -> None:
    svc = spark_svc
    table, other = f"{ns}.facts", f"{ns}.other"
    svc.tables.create(table, synthetic_table(3000, 40, seed=11), sort_by=["a"])
    svc.tables.create(other, synthetic_table(2000, 30, seed=12), sort_by=["a"])
    # Sketches in different states: maintained with a policy and a decision, used by a query,
    # behind the tables by a commit, and captured only.
    maintained_name, _ = captured(svc, table, "maintained")
    svc.set_policy(maintained_name, Policy(delta_rows=10))
    svc.tables.append(table, synthetic_table(40, 40, seed=13, key_start=50_000))
    svc.check_policies([maintained_name])
    svc.maintain(maintained_name, "incremental")
    used_name, used_sql = captured(svc, other, "used", TOPK)
    svc.query(used_sql, use_sketches="always")
    behind_name, _ = captured(svc, other, "behind")
    only_name, _ = captured(svc, table, "only", HAVING)
    svc.tables.append(other, synthetic_table(25, 30, seed=14, key_start=60_000))
    names = [maintained_name, used_name, behind_name, only_name]

    with counted_statements(svc.engine) as statements:
        everything = svc.status()
    assert len(statements) <= MOST_STATEMENTS, f"{len(everything)} sketches: {len(statements)} statements"
    shown = {s.name: s for s in everything}
    assert [s.name for s in everything] == sorted(shown), "by name"
    for name in names:
        read_one_by_one(svc, shown[name])
        assert svc.status(name) == [shown[name]]
    assert shown[behind_name].commits_behind == 1 and shown[behind_name].delta_rows_pending == 25
    assert shown[maintained_name].version_count == 2 and shown[maintained_name].policy_explicit
    assert shown[used_name].last_use is not None
    assert shown[only_name].last_decision is None and shown[only_name].last_use is None


def test_status_of_an_unknown_sketch_says_so(spark_svc: SketchService) -> None:
    with pytest.raises(SketchNotFoundError):
        spark_svc.status("no_such_sketch_here")
