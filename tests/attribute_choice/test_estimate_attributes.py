"""Sample-based estimates of each candidate attribute's sketch selectivity, checked against the
true selectivity of a sketch captured on that attribute (the differential oracle of issue 7)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from typer.testing import CliRunner

from sketch_core.cli import app
from sketch_core.datasets.synthetic import sales_tables, skewed_groups_table
from sketch_core.datasets.tpch_queries import TPCH_QUERIES
from sketch_core.service import SketchService
from tests.oracles.results import sorted_rows

pytestmark = pytest.mark.spark


def true_selectivity(svc: SketchService, sql: str, table: str, attribute: str, fragments: int) -> float:
    """The share of the table's rows in the fragments of a sketch captured on ``attribute``."""
    version = svc.capture(sql, name=None, attributes={table: attribute}, fragments=fragments)
    _, partition = svc.range_partition(table, attribute, fragments)
    values = svc.tables.read_arrow(table).column(attribute).to_numpy(zero_copy_only=False)
    return float(np.isin(partition.fragments_of(values), version.fragments[table]).mean())


def skewed_table(svc: SketchService, ns: str, rows: int, groups: int, seed: int) -> tuple[str, int]:
    """A table of skewed group sizes sorted by key, and the size only a tenth of groups exceed."""
    table = f"{ns}.facts"
    data = skewed_groups_table(rows, groups, seed=seed, c_high=1_000_000)
    svc.tables.create(table, data, sort_by=["key"])
    sizes = np.bincount(data.column("a").to_numpy())
    return table, int(np.percentile(sizes[sizes > 0], 90))


def test_estimates_rank_the_candidates_of_a_having_query_like_their_sketches(
    small_files: None, spark_svc: SketchService, ns: str
) -> None:
    table, threshold = skewed_table(spark_svc, ns, 40_000, 200, seed=5)
    sql = (
        f"SELECT a, COUNT(*) AS n, MAX(b) AS top_b, MIN(c) AS low_c FROM {table} "
        f"GROUP BY a HAVING COUNT(*) > {threshold}"
    )
    estimates = spark_svc.estimate_attributes(sql, fragments=100, replicates=30)
    assert estimates.estimation is not None and estimates.sampled_table == table
    assert estimates.sample_drawn
    # COUNT(*) > n only loses groups when rows go missing: the attributes are all safe.
    assert set(estimates.candidates[table]) == {"key", "a", "b", "c"}

    truth = {a: true_selectivity(spark_svc, sql, table, a, 100) for a in estimates.candidates[table]}
    found = estimates.estimation.candidates
    for attribute, actual in truth.items():
        estimate = found[f"{table}.{attribute}"]
        assert 0 <= estimate.low <= estimate.selectivity <= estimate.high <= 1
        # Within a quarter of the truth, or 0.05 of the table for small sketches.
        assert abs(estimate.selectivity - actual) <= max(0.05, actual / 4), (attribute, estimate, actual)
    best, _ = estimates.ranked(table)[0]
    assert truth[best] <= min(truth.values()) * 1.1 + 0.01
    # The large groups' rows are a good half of the table: a sketch on the group attribute
    # keeps just them, while their rows are spread over every fragment of key and c.
    assert truth["a"] < 0.65 and min(truth["key"], truth["c"]) > 0.95

    again = spark_svc.estimate_attributes(sql, fragments=100, replicates=30)
    assert not again.sample_drawn  # the stored sample is reused


def test_tpch_top_k_over_joins_gets_estimates_for_every_table(tpch_svc: SketchService) -> None:
    estimates = tpch_svc.estimate_attributes(TPCH_QUERIES[10], fragments=100, replicates=20)
    assert estimates.estimation is not None and estimates.sampled_table == "tpch.lineitem"
    assert {"tpch.lineitem", "tpch.orders", "tpch.customer"} <= set(estimates.candidates)
    for key, estimate in estimates.estimation.candidates.items():
        assert 0 <= estimate.selectivity <= 1, key
    # 20 customers in the result: a sketch on the customer key keeps about 20 of 100 fragments.
    customer = estimates.estimation.candidates["tpch.customer.c_custkey"]
    assert 0.1 <= customer.selectivity <= 0.25
    # The result's 20 groups come from the sample's estimates in every replicate.
    assert estimates.estimation.groups.in_result.sum() == pytest.approx(20)


def test_a_query_without_an_aggregation_has_candidates_but_no_estimates(tpch_svc: SketchService) -> None:
    estimates = tpch_svc.estimate_attributes(
        "SELECT l_orderkey, l_quantity FROM tpch.lineitem WHERE l_quantity > 49"
    )
    assert estimates.estimation is None and "not an aggregation" in (estimates.reason or "")
    assert "l_orderkey" in estimates.candidates["tpch.lineitem"]


def test_a_cost_based_capture_records_its_estimates_and_their_error(
    spark_svc: SketchService, ns: str
) -> None:
    table, threshold = skewed_table(spark_svc, ns, 20_000, 100, seed=9)
    sql = f"SELECT a, COUNT(*) AS n FROM {table} GROUP BY a HAVING COUNT(*) > {threshold}"
    cost_based = replace(spark_svc.settings, attribute_strategy="cost-all")
    previous, spark_svc.settings = spark_svc.settings, cost_based
    try:
        version = spark_svc.capture(sql, name=f"{ns}_cost", fragments=50)
    finally:
        spark_svc.settings = previous
    attribute, _ = version.partitions[table]
    # The table is one file, so every candidate's sketch reads it: those the query does not read
    # (b, c; the key only where its files' ranges part) are not estimated, nor drawn into the
    # sample, and the group attribute is.
    assert attribute == "a"
    choice = spark_svc.choices.get(f"{ns}_cost")
    assert choice is not None and choice.strategy == "cost-all"
    assert "a" in choice.estimates[table] and not {"b", "c"} & set(choice.estimates[table])
    explained = spark_svc.estimate_attributes(sql)
    assert explained.estimation is not None
    assert set(explained.candidates[table]) == {"key", "a", "b", "c"}
    assert all("the query does not read it" in explained.estimation.unestimated[f"{table}.{c}"] for c in "bc")
    outcome = choice.outcome[table] if choice.outcome else {}
    assert outcome["attribute"] == attribute
    _, partition = spark_svc.range_partition(table, attribute, 50)
    assert outcome["actual"] == len(version.fragments[table]) / partition.fragment_count
    assert outcome["estimated"] == choice.estimates[table][attribute]["fragment_share"]
    assert outcome["rse"] == pytest.approx(abs(outcome["estimated"] - outcome["actual"]) / outcome["actual"])


def test_explain_choice_lists_candidates_estimates_and_unsafe_attributes(
    spark_svc: SketchService, ns: str, env: dict[str, str]
) -> None:
    table = f"{ns}.facts"
    spark_svc.tables.create(table, skewed_groups_table(10_000, 50, seed=3, c_high=1_000_000), sort_by=["key"])
    sql = f"SELECT a, AVG(c) AS m FROM {table} GROUP BY a HAVING AVG(c) > 500000"
    shown = CliRunner().invoke(app, ["explain-choice", sql, "--fragments", "20"], env=env, terminal_width=250)
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    # AVG over a subset of a group's rows can cross the threshold either way: only `a` is safe
    # (PBDS Ex. 4), and it is the pick.
    assert shown.output.count("unsafe") == 3 and "estimated from a" in shown.output
    assert any(" a " in line and "first" in line for line in lines)


def test_choose_attributes_names_what_a_capture_without_attributes_sketches(
    spark_svc: SketchService, ns: str
) -> None:
    table, threshold = skewed_table(spark_svc, ns, 20_000, 100, seed=13)
    sql = f"SELECT a, SUM(c) AS s FROM {table} GROUP BY a HAVING COUNT(*) > {threshold}"
    previous = spark_svc.settings
    spark_svc.settings = replace(previous, attribute_strategy="cost-all")
    try:
        chosen, estimates = spark_svc.choose_attributes(sql, fragments=50)
        version = spark_svc.capture(sql, fragments=50)
    finally:
        spark_svc.settings = previous
    assert estimates is not None and estimates.estimation is not None
    assert version.partitions[table][0] == chosen[table]
    # The pick reads the fewest files (to the percent), then keeps the smallest expected sketch,
    # among the candidates estimated: b, which the query does not read, reads every file (the
    # table is one file), and is not.
    assert "the query does not read it" in estimates.estimation.unestimated[f"{table}.b"]
    expected = estimates.expected_selectivities() or {}
    files = {a: round(estimates.files_read[f"{table}.{a}"], 2) for a in ("a", "c")}
    fewest = min(files.values())
    assert files[chosen[table]] == fewest
    assert expected[f"{table}.{chosen[table]}"] == min(
        expected[f"{table}.{a}"] for a, read in files.items() if read == fewest
    )
    spark_svc.settings = replace(previous, attribute_strategy="heuristic")
    try:
        heuristic, none = spark_svc.choose_attributes(sql, fragments=50)
    finally:
        spark_svc.settings = previous
    assert none is None and heuristic[table] == "key"  # the heuristic: sort key first


def test_candidates_the_query_does_not_read_and_that_skip_no_file_are_not_estimated(
    small_files: None, spark_svc: SketchService, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dimension sorted by its key over ten files: ``tier`` and ``slot`` take every value in
    each file, so a sketch on either reads every file however little it keeps. Where the query
    does not read them they are never estimated (their columns not read), and the pick is the
    one estimating everything makes. Where it reads one (``tier``, grouped on), it is estimated
    with the others, in one evaluation. The sampled fact table's candidates are estimated where
    the query reads them (a, b) or their sketch may skip files (key), and c, neither, is not:
    its column is not even drawn into the sample."""
    from sketch_core.service import attributes as attributes_module

    facts = f"{ns}.facts"
    fact_rows = skewed_groups_table(40_000, 200, seed=6, c_high=1_000_000)
    spark_svc.tables.create(facts, fact_rows, sort_by=["key"])
    dim = f"{ns}.groups"
    gid = np.arange(200)
    groups = pa.table({"gid": gid, "tier": gid % 10, "slot": (gid * 7) % 20})
    spark_svc.tables.create(dim, groups.slice(0, 20), sort_by=["gid"])
    for start in range(20, 200, 20):
        spark_svc.tables.append(dim, groups.slice(start, 20))
    join = f"FROM {facts} f JOIN {dim} g ON f.a = g.gid"
    top = f"SELECT g.gid, SUM(f.b) AS s {join} GROUP BY g.gid ORDER BY s DESC LIMIT 5"
    estimates = spark_svc.estimate_attributes(top, fragments=100, replicates=20)
    assert estimates.estimation is not None
    assert {f"{dim}.gid", f"{facts}.key", f"{facts}.a", f"{facts}.b"} <= set(estimates.estimation.candidates)
    assert "the query does not read it" in estimates.estimation.unestimated[f"{facts}.c"]
    for attribute in ("tier", "slot"):
        why = estimates.estimation.unestimated[f"{dim}.{attribute}"]
        assert "the query does not read it" in why and "reads every file" in why
        assert estimates.files_read[f"{dim}.{attribute}"] == 1.0
    picked, _ = spark_svc.choose_attributes(top, fragments=100)
    assert picked[dim] == "gid"

    monkeypatch.setattr(attributes_module, "reads_every_file", lambda *args: False)
    everything = spark_svc.estimate_attributes(top, fragments=100, replicates=20)
    assert everything.estimation is not None
    assert {f"{dim}.{a}" for a in ("gid", "tier", "slot")} <= set(everything.estimation.candidates)
    assert spark_svc.choose_attributes(top, fragments=100)[0] == picked
    monkeypatch.undo()

    # Only the smallest tier passes: the key's sketch would skip files, but it is unsafe for a
    # HAVING on a count below a bound (a tier's count over part of its groups is smaller). The
    # query reads tier (it groups on it): estimated in the one evaluation, and picked.
    counts = np.sort(np.bincount(fact_rows.column("a").to_numpy() % 10, minlength=10))
    smallest = f"SELECT g.tier, COUNT(*) AS n {join} GROUP BY g.tier HAVING COUNT(*) < {counts[1]}"
    evaluations: list[int] = []
    evaluate = attributes_module.evaluate_plan

    def counted(*args: Any, **kwargs: Any) -> Any:
        evaluations.append(1)
        return evaluate(*args, **kwargs)

    monkeypatch.setattr(attributes_module, "evaluate_plan", counted)
    chosen, chosen_estimates = spark_svc.choose_attributes(smallest, fragments=100)
    assert chosen[dim] == "tier" and len(evaluations) == 1, evaluations
    assert chosen_estimates is not None and f"{dim}.tier" in chosen_estimates.estimation.candidates
    monkeypatch.setattr(attributes_module, "reads_every_file", lambda *args: False)
    assert spark_svc.choose_attributes(smallest, fragments=100)[0] == chosen
    monkeypatch.undo()

    # The top 150 of 200 groups lie in every file: the key's sketch skips no file either, and
    # every candidate the query reads is estimated; tier and slot, not read, are not.
    wide = f"SELECT g.gid, SUM(f.b) AS s {join} GROUP BY g.gid ORDER BY s DESC LIMIT 150"
    spread = spark_svc.estimate_attributes(wide, fragments=100, replicates=20)
    assert spread.estimation is not None
    assert f"{dim}.gid" in spread.estimation.candidates
    assert {f"{dim}.{a}" for a in ("tier", "slot")} <= set(spread.estimation.unestimated)


def test_a_failing_in_process_estimate_falls_back_to_spark(
    spark_svc: SketchService, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The in-process evaluation is a shortcut: an error of its own costs a Spark job, not the
    capture (no exception of another type reaches the user)."""
    from sketch_core.service import attributes as attributes_module

    table, size = skewed_table(spark_svc, ns, 20_000, 100, seed=4)
    sql = f"SELECT a, COUNT(*) AS n FROM {table} GROUP BY a HAVING COUNT(*) > {size}"
    expected = spark_svc.estimate_attributes(sql, fragments=50, replicates=20)
    assert expected.estimation is not None
    picked = spark_svc.choose_attributes(sql, fragments=50)[0]

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise KeyError("a bug of the in-process path")

    monkeypatch.setattr(attributes_module, "evaluate_plan", broken)
    fallback = spark_svc.estimate_attributes(sql, fragments=50, replicates=20)
    assert fallback.estimation is not None
    assert set(fallback.estimation.candidates) == set(expected.estimation.candidates)
    assert spark_svc.choose_attributes(sql, fragments=50)[0] == picked

    # The sample's file deleted under it (another process drew a wider one and replaced it):
    # Spark estimates from the rows this process holds.
    def broken_and_replaced(*args: Any, **kwargs: Any) -> Any:
        record = spark_svc.samples.repository.find(table, ["a"], spark_svc.settings.sample_rate)
        assert record is not None
        Path(record.path).unlink()
        raise KeyError("a bug of the in-process path")

    monkeypatch.setattr(attributes_module, "evaluate_plan", broken_and_replaced)
    replaced = spark_svc.estimate_attributes(sql, fragments=50, replicates=20)
    assert replaced.estimation is not None
    assert replaced.estimation.candidates.keys() == fallback.estimation.candidates.keys()
    for key, estimate in replaced.estimation.candidates.items():
        assert estimate.selectivity == pytest.approx(fallback.estimation.candidates[key].selectivity)

    # Replaced while Spark reads it: the file is there when looked for, and gone when the
    # estimate's job runs (Spark has listed it and read its footer by then).
    real_keep_view = attributes_module.keep_view
    vanished: list[str] = []

    def keep_and_replace(spark: Any, name: str, frame: Any) -> Any:
        record = spark_svc.samples.repository.find(table, ["a"], spark_svc.settings.sample_rate)
        assert record is not None
        if Path(record.path).exists():
            Path(record.path).unlink()
            vanished.append(record.path)
        return real_keep_view(spark, name, frame)

    monkeypatch.setattr(attributes_module, "evaluate_plan", broken)
    monkeypatch.setattr(attributes_module, "keep_view", keep_and_replace)
    raced = spark_svc.estimate_attributes(sql, fragments=50, replicates=20)
    assert vanished, "the file was there when the estimate looked, and went"
    assert raced.estimation is not None
    for key, estimate in raced.estimation.candidates.items():
        assert estimate.selectivity == pytest.approx(fallback.estimation.candidates[key].selectivity)


def test_min_max_and_count_over_dates_and_strings_are_estimated(spark_svc: SketchService, ns: str) -> None:
    """A report's ``MIN(sale_date)``, ``MAX(channel)`` and ``COUNT(note)`` beside its measure, as
    BI tools print them: estimated (dates by their day number, strings by their rank), where an
    Arrow cast to doubles used to escape as an ArrowNotImplementedError; ordered by the latest
    sale, the top-k's estimate ranks the groups as the dates do. A HAVING that compares such a
    value with a literal is not estimated: the choice falls back, and the capture succeeds."""
    table = f"{ns}.sales"
    spark_svc.tables.create(table, sales_tables(20_000, seed=4)["sales"], sort_by=["sale_id"])
    measures = "MIN(sale_date) AS first_sale, MAX(channel) AS last_channel, COUNT(note) AS notes"
    reports = {
        "having": f"SELECT customer_id, SUM(amount) AS spent, {measures} FROM {table} "
        "GROUP BY customer_id HAVING SUM(amount) > 1500",
        "top": f"SELECT store_id, MAX(sale_date) AS latest, {measures} FROM {table} "
        "GROUP BY store_id ORDER BY latest DESC, store_id LIMIT 3",
    }
    for label, sql in reports.items():
        estimates = spark_svc.estimate_attributes(sql, fragments=50, replicates=10)
        assert estimates.estimation is not None, (label, estimates.reason)
        version = spark_svc.capture(sql, name=f"{ns}_{label}", fragments=50)
        sketched = spark_svc.query(sql, use_sketches="always")
        assert sketched.sketch == (f"{ns}_{label}", version.version)
        assert sorted_rows(sketched.table) == sorted_rows(spark_svc.query(sql, use_sketches=False).table)
    dated = (
        f"SELECT store_id, SUM(amount) AS s FROM {table} GROUP BY store_id "
        "HAVING MAX(sale_date) > DATE '2024-12-01'"
    )
    estimates = spark_svc.estimate_attributes(dated, fragments=50, replicates=10)
    assert estimates.estimation is None and "HAVING" in (estimates.reason or "")
    assert spark_svc.capture(dated, name=f"{ns}_dated", fragments=50).fragments
