"""The generator-style corpus under the default settings (the attribute strategy users get).

Every report is printed as SQL generators print it (``sketch_core.datasets.generator_style``):
the 22 TPC-H queries rewritten by :func:`generator_style`, and the synthetic reports written in
that style. For each one the oracle is differential:

1. captured with the default attribute choice, the query on its sketch (applied whatever it
   costs) equals the full query, through the service's file lists and (every other TPC-H
   query, every synthetic report) as ``svc.sketched``'s lazy frame through Iceberg's source;
   the top-k reports read fewer files than the full query;
2. (the synthetic reports and every other TPC-H query; test_maintenance_vs_capture.py maintains
   all 22) after inserts, deletes and updates of its tables, ``maintain(strategy="incremental")``
   succeeds (no refusal) and the maintained sketch equals a fresh capture on the same
   attributes at the same snapshot, and the query under the default settings (the sketch
   applied where it is expected to pay, with the reason either way) equals the full query.

The TPC-H queries the front end refuses must be refused with the construct named; the
hand-written texts are captured and maintained by tests/incremental/test_maintenance_vs_capture.py
and printed back from the IR by tests/algebra/test_tpch_roundtrip.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sketch_core.datasets import DeltaGenerator, load_tpch
from sketch_core.datasets.generator_style import SYNTHETIC_REPORTS, generator_style, tpch_schemas
from sketch_core.datasets.synthetic import sales_tables, synthetic_table
from sketch_core.datasets.tpch import TPCH_SORT_KEYS
from sketch_core.datasets.tpch_queries import TPCH_QUERIES
from sketch_core.errors import UnsupportedQueryError
from sketch_core.service import SketchService
from tests.conftest import small_files_written
from tests.oracles.results import sorted_rows

# The queries an earlier issue required to be captured and used.
REQUIRED = {1, 3, 4, 5, 6, 7, 8, 9, 10, 12, 14, 18, 19}
# Refused, and the construct the refusal must name.
REFUSED: dict[int, str] = {}
# Top-k reports must skip data even at this tiny scale. Not Q10: its top customers' orders
# spread over the whole order-key range, so whether a file is skipped depends on how the loads
# of the queries before it laid out the files (72 of 76 read on one machine, 76 of 76 on another).
SELECTIVE = {3, 18, 19}
TPCH_NS = "gen_tpch"
SYN_NS = "gen_syn"
SYNTHETIC_KEYS = {"sales": ("sale_id",), "stores": ("store_id",), "syn": ("key",)}
# Captured, but not maintained incrementally: the refusal names why, and auto recaptures.
NOT_INCREMENTAL: dict[int, str] = {}
# Tables a TPC-H query's maintenance changes (those it reads): the facts, as loads change them.
TPCH_CHANGED = ("lineitem", "orders", "partsupp")


def tpch_query(number: int, catalog: str) -> str:
    # Every other query back-quotes its identifiers, as BI tools print them; every third names
    # its tables with the catalog, as tools connected to Spark's catalog do.
    sql = TPCH_QUERIES[number].replace("tpch.", f"{TPCH_NS}.")
    qualifier = catalog if number % 3 == 0 else None
    return generator_style(sql, tpch_schemas(TPCH_NS), quoted=number % 2 == 0, catalog=qualifier)


@pytest.fixture(scope="module")
def corpus_svc(tpch_svc: SketchService, tpch_dir: Path) -> Iterator[SketchService]:
    svc = tpch_svc
    with small_files_written(svc):  # in several files each, as the tables of larger scales are
        load_tpch(svc.tables, 0.01, tpch_dir.parent.parent, namespace=TPCH_NS)
    if svc.commit_log.get_table(f"{SYN_NS}.sales") is None:
        retail = sales_tables(12_000, seed=5)
        svc.tables.create(f"{SYN_NS}.sales", retail["sales"], sort_by=["sale_id"])
        svc.tables.create(f"{SYN_NS}.stores", retail["stores"], sort_by=["store_id"])
        svc.tables.create(f"{SYN_NS}.syn", synthetic_table(12_000, 100, seed=6), sort_by=["key"])
    yield svc


def _change(svc: SketchService, tables: dict[str, tuple[str, ...]], seed: int) -> int:
    """Inserts and deletes on each table, then an update: the last commit's sequence."""
    sequence = 0
    for i, (table, keys) in enumerate(sorted(tables.items())):
        generator = DeltaGenerator(svc.tables, table, keys, seed=seed + i)
        generator.mixed(40).apply(svc.tables)
        sequence = generator.updates(10).apply(svc.tables)
    return sequence


def _check(
    svc: SketchService,
    name: str,
    sql: str,
    changed: dict[str, tuple[str, ...]],
    seed: int,
    refused_construct: str | None = None,
    *,
    through_frame: bool = True,
    maintained_too: bool = True,
    selective: bool = False,
) -> None:
    captured = svc.capture(sql, name=name, fragments=64)
    assert captured.fragments, "a capture must sketch at least one table"
    full = svc.query(sql, use_sketches=False)
    assert full.table.num_rows > 0, "a report over the corpus data must return rows"
    sketched = svc.query(sql, use_sketches="always")  # the sketched path, whatever it costs
    assert sketched.sketch == (name, captured.version)
    assert sorted_rows(sketched.table) == sorted_rows(full.table)
    assert sketched.files_read <= sketched.files_total == full.files_total
    if selective:  # top-k reports skip data even at this tiny scale
        assert sketched.files_read < sketched.files_total
    if through_frame:
        # The same report as a lazy frame through Iceberg's source, the sketch's ranges in its scans.
        frame = svc.sketched_frame(sql, use_sketches="always")
        assert frame.sketch == (name, captured.version)
        assert sorted_rows(frame.frame.toArrow()) == sorted_rows(full.table)
    if not maintained_too:
        return

    _change(svc, {t: k for t, k in changed.items() if t.split(".")[1] in sql}, seed)
    if refused_construct is None:
        runs = svc.maintain(name, strategy="incremental")
        assert [r.strategy for r in runs] == ["incremental"]
    else:
        with pytest.raises(UnsupportedQueryError) as info:
            svc.maintain(name, strategy="incremental")
        assert info.value.construct == refused_construct
        assert [r.strategy for r in svc.maintain(name)] == ["full"]
    maintained = svc.sketch(name)
    attributes = {table: attribute for table, (attribute, _) in maintained.partitions.items()}
    fresh = svc.capture(
        sql, name=f"{name}_fresh", attributes=attributes, fragments=64, snapshot=maintained.sequence
    )
    assert fresh.partitions == maintained.partitions
    assert {t: set(ids) for t, ids in maintained.fragments.items()} == {
        t: set(ids) for t, ids in fresh.fragments.items()
    }
    svc.drop_sketch(f"{name}_fresh")
    # The default path: the maintained sketch is applied when it is expected to pay, and the
    # result says which way it went and why.
    after = svc.query(sql)
    current = (name, maintained.version)
    assert after.sketch == current or after.sketch_skipped == current, after.sketch_reason
    assert after.sketch_reason.startswith("use" if after.sketch else "skip"), after.sketch_reason
    assert sorted_rows(after.table) == sorted_rows(svc.query(sql, use_sketches=False).table)


def test_required_queries_are_not_refused() -> None:
    assert not REQUIRED & set(REFUSED)


@pytest.mark.parametrize("number", sorted(TPCH_QUERIES))
def test_tpch_in_generator_style(corpus_svc: SketchService, number: int) -> None:
    sql = tpch_query(number, corpus_svc.settings.catalog_name)
    if number in REFUSED:
        with pytest.raises(UnsupportedQueryError) as info:
            corpus_svc.capture(sql, name=f"gen_tpch_q{number}", fragments=64)
        assert info.value.construct == REFUSED[number]
        return
    changed = {f"{TPCH_NS}.{t}": TPCH_SORT_KEYS[t] for t in TPCH_CHANGED}
    # Iceberg's source reads the queries with quoted identifiers (every other one; a third of
    # those name the catalog): the frame path differs from the file lists in how the sketch's
    # ranges reach each table's scan, not in the query's shape. The others are maintained
    # through the service here; every query's maintenance, operator by operator against a fresh
    # capture, is tests/incremental/test_maintenance_vs_capture.py's.
    _check(
        corpus_svc,
        f"gen_tpch_q{number}",
        sql,
        changed,
        number,
        NOT_INCREMENTAL.get(number),
        through_frame=number % 2 == 0,
        maintained_too=number % 2 == 1,
        selective=number in SELECTIVE,
    )


@pytest.mark.parametrize("label", sorted(SYNTHETIC_REPORTS))
def test_synthetic_report_in_generator_style(corpus_svc: SketchService, label: str) -> None:
    sql = SYNTHETIC_REPORTS[label].format(ns=SYN_NS)
    changed = {f"{SYN_NS}.{t}": keys for t, keys in SYNTHETIC_KEYS.items()}
    _check(corpus_svc, f"gen_{label}", sql, changed, len(label))
