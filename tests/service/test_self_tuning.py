"""Self-tuning (PBDS Sec. 8): a query without a sketch gets one captured, at once (eager) or
once its template has missed often enough (adaptive); a query whose own sketch was left
behind is not captured a second time."""

from __future__ import annotations

from sketch_core.algebra.query_text import template_key
from sketch_core.datasets import synthetic_table
from sketch_core.service import SketchService
from tests.oracles.results import sorted_rows
from tests.service.test_costs import pinned_model
from tests.service.test_maintain import HAVING, TOPK, sibling


def test_adaptive_self_tuning_captures_once_the_template_has_missed_enough(
    spark_svc: SketchService, ns: str
) -> None:
    svc = sibling(spark_svc, self_tuning="adaptive", adaptive_after=2)
    table = f"{ns}.facts"
    svc.tables.create(table, synthetic_table(3000, 40, seed=21), sort_by=["a"])
    sql = HAVING.format(t=table)
    plain = sorted_rows(svc.query(sql, use_sketches=False).table)
    first = svc.query(sql)
    assert first.sketch is None and not svc.sketches.definitions(template_key(sql))
    second = svc.query(sql)  # the second miss: captured, and used at once
    assert second.sketch is not None and sorted_rows(second.table) == plain
    assert second.files_read <= second.files_total
    assert len(svc.sketches.definitions(template_key(sql))) == 1


def test_eager_self_tuning_recaptures_a_stale_sketch_unless_the_cost_model_left_it_behind(
    spark_svc: SketchService, ns: str
) -> None:
    svc = sibling(spark_svc, self_tuning="eager", maintain_on_query="off")
    table = f"{ns}.facts"
    svc.tables.create(table, synthetic_table(3000, 40, seed=22), sort_by=["a"])
    sql = TOPK.format(t=table)
    first = svc.query(sql)
    assert first.sketch is not None and first.sketch[1] == 1
    assert sorted_rows(first.table) == sorted_rows(svc.query(sql, use_sketches=False).table)
    name = first.sketch[0]
    # A load leaves the sketch behind; maintenance on query is off: eager self-tuning
    # recaptures it (a new version of the same sketch, not a second sketch).
    svc.tables.append(table, synthetic_table(50, 40, seed=23, key_start=10_000))
    later = svc.query(sql)
    assert later.sketch == (name, 2)
    assert sorted_rows(later.table) == sorted_rows(svc.query(sql, use_sketches=False).table)
    # With the cost model in charge, a sketch it chose to leave behind stays behind.
    costed = sibling(svc, maintain_on_query="cost")
    pinned_model(costed, name, full=(9.0, 0.0), incremental=(5.0, 0.0), use=(0.1, 0.0), plain=(0.5, 0.0))
    svc.tables.append(table, synthetic_table(50, 40, seed=24, key_start=20_000))
    skipped = costed.query(sql)
    assert skipped.sketch is None and svc.sketch(name).version == 2
    assert sorted_rows(skipped.table) == sorted_rows(svc.query(sql, use_sketches=False).table)
    assert len(svc.sketches.definitions(template_key(sql))) == 1
