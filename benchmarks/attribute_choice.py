"""Attribute choice benchmark (issue 7): how well sample-based estimates pick the sketch attribute.

Queries: HAVING and top-k templates with varied parameters over TPC-H (``--scale``) and over a
synthetic table whose groups vary in size (``--rows``). For each query, side by side in one run:

- the choice a capture without attributes makes under ``cost-all`` (``svc.choose_attributes``:
  estimates, then safety checks of the picks in order): its time against the capture's (the
  overhead; the sample is drawn once per table and grouping and reused, so the first query of
  each pays for drawing it and is reported apart); and per safe candidate the expected
  selectivity (``svc.estimate_attributes``);
- the truth: a sketch captured on each safe candidate attribute of the sampled (largest) table,
  its selectivity (fragments kept / fragments), and the query's time with it (use speedup
  against the plain query);
- per strategy the selectivity and speedup of what it picks (random ones: the mean over their
  pool, what they pick on average).

Figures: relative size error (RSE) of the estimates, how often the cost-based strategy picks the
best attribute in hindsight or one within 10% of the best selectivity, and the overhead.
Results go to benchmarks/results/attribute_choice_*.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from benchmarks.stack import bench_service
from sketch_core.attribute_choice.strategies import STRATEGIES, preferences
from sketch_core.config import Settings
from sketch_core.datasets.synthetic import skewed_groups_table
from sketch_core.durations import median_seconds
from sketch_core.service import SketchService

RESULTS = Path(__file__).parent / "results"
FRAGMENTS = 1000
NEAR = 0.10  # a pick within 10% of the best selectivity is near-best
SLACK = 0.002  # ... or within 0.2% of the table (selectivities near zero)
SKEWED = "bench.skewed_groups"

# label -> (SQL template, the bindings it runs with)
Templates = dict[str, tuple[str, list[dict[str, int | str]]]]
TPCH_TEMPLATES: Templates = {
    # Top-k customers by revenue over a quarter (TPC-H Q10's core), varied quarter and k.
    "tpch_topk_customers": (
        "SELECT o_custkey, SUM(l_extendedprice * (1 - l_discount)) AS revenue "
        "FROM tpch.lineitem JOIN tpch.orders ON l_orderkey = o_orderkey "
        "WHERE o_orderdate >= DATE '{start}' AND o_orderdate < DATE '{start}' + INTERVAL 3 MONTHS "
        "GROUP BY o_custkey ORDER BY revenue DESC LIMIT {k}",
        [
            {"start": "1993-10-01", "k": 20},
            {"start": "1995-01-01", "k": 50},
            {"start": "1997-04-01", "k": 10},
        ],
    ),
    # Large orders (TPC-H Q18's core), varied quantity threshold.
    "tpch_having_quantity": (
        "SELECT l_orderkey, SUM(l_quantity) AS q FROM tpch.lineitem "
        "GROUP BY l_orderkey HAVING SUM(l_quantity) > {q}",
        [{"q": 300}, {"q": 250}, {"q": 200}],
    ),
    # Parts sold most (HAVING on a non-key grouping), varied threshold.
    "tpch_having_parts": (
        "SELECT l_partkey, COUNT(*) AS n, SUM(l_quantity) AS q FROM tpch.lineitem "
        "WHERE l_shipdate >= DATE '{start}' GROUP BY l_partkey HAVING COUNT(*) > {n}",
        [{"start": "1998-01-01", "n": 3}, {"start": "1997-01-01", "n": 8}],
    ),
}
SYNTHETIC_TEMPLATES: Templates = {
    "syn_having_count": (
        f"SELECT a, COUNT(*) AS n, MAX(b) AS top_b FROM {SKEWED} GROUP BY a HAVING COUNT(*) > {{n}}",
        [{"percentile": 90}, {"percentile": 98}],
    ),
    "syn_topk_sum": (
        f"SELECT a, SUM(c) AS s FROM {SKEWED} GROUP BY a ORDER BY s DESC LIMIT {{k}}",
        [{"k": 10}, {"k": 50}],
    ),
}


@dataclass
class Candidate:
    attribute: str
    estimated: float
    low: float
    high: float
    actual: float
    use_s: float

    @property
    def rse(self) -> float | None:
        return None if self.actual == 0 else abs(self.estimated - self.actual) / self.actual


@dataclass
class QueryResult:
    label: str
    sql: str
    table: str
    plain_s: float
    capture_s: float
    estimate_s: float  # choosing the attributes with cost-all (estimates included)
    sample_drawn: bool
    candidates: list[Candidate]
    picks: dict[str, list[str]] = field(default_factory=dict)  # strategy -> its pool, in order

    def best(self) -> float:
        return min(c.actual for c in self.candidates)

    def actual(self, attribute: str) -> float:
        return next(c.actual for c in self.candidates if c.attribute == attribute)

    def use(self, attribute: str) -> float:
        return next(c.use_s for c in self.candidates if c.attribute == attribute)

    def picked(self, strategy: str) -> list[str]:
        """What the strategy picks: its first preference, or for a random one every member of
        its pool (averaged over, what it picks on average); empty when its pool is."""
        pool = self.picks.get(strategy) or []
        return pool if strategy.startswith("random-") else pool[:1]

    def strategy_selectivity(self, strategy: str) -> float | None:
        chosen = self.picked(strategy)
        return float(np.mean([self.actual(a) for a in chosen])) if chosen else None

    def strategy_speedup(self, strategy: str) -> float | None:
        chosen = self.picked(strategy)
        return float(np.mean([self.plain_s / self.use(a) for a in chosen])) if chosen else None


def synthetic_queries(svc: SketchService) -> list[tuple[str, str]]:
    sizes = svc.query(f"SELECT a, COUNT(*) AS n FROM {SKEWED} GROUP BY a", use_sketches=False).table
    counts = sizes.column("n").to_numpy()
    out = []
    for label, (template, bindings) in SYNTHETIC_TEMPLATES.items():
        for binding in bindings:
            values = dict(binding)
            if "percentile" in values:
                percentile = values.pop("percentile")
                assert isinstance(percentile, int)
                values["n"] = int(np.percentile(counts, percentile))
            out.append(
                (f"{label}({', '.join(f'{k}={v}' for k, v in values.items())})", template.format(**values))
            )
    return out


def tpch_queries() -> list[tuple[str, str]]:
    return [
        (f"{label}({', '.join(f'{k}={v}' for k, v in binding.items())})", template.format(**binding))
        for label, (template, bindings) in TPCH_TEMPLATES.items()
        for binding in bindings
    ]


def measure(svc: SketchService, label: str, sql: str, repeat: int) -> QueryResult:
    # After a warm-up, as every use below is: the first query of a run would otherwise time a
    # cold JVM for its plain run (sketches keeping all rows came out 2.3x "faster").
    plain = median_seconds(lambda: svc.query(sql, use_sketches=False), repeat, warm_up=True)
    # What a capture without attributes adds under the cost-based strategy: the choice, first
    # (nothing about this query is cached yet). Every table counts as worth sketching, however
    # few its files (the quick size's tables have few).
    choosing = replace(svc.settings, attribute_strategy="cost-all", min_files_to_sketch=1)
    settings, svc.settings = svc.settings, choosing
    try:
        started = time.perf_counter()
        _, choice_estimates = svc.choose_attributes(sql, fragments=FRAGMENTS)
        choose_s = time.perf_counter() - started
    finally:
        svc.settings = settings
    # Every safe candidate's estimate, for the table of truths below (explain-choice's view).
    estimates = svc.estimate_attributes(sql, fragments=FRAGMENTS)
    assert estimates.estimation is not None, f"{label}: {estimates.reason}"
    table = estimates.sampled_table
    assert table is not None
    candidates = []
    captures = []
    for attribute in estimates.candidates[table]:
        name = f"bench_choice_{abs(hash((label, attribute)))}"
        started = time.perf_counter()
        version = svc.capture(sql, name=name, attributes={table: attribute}, fragments=FRAGMENTS)
        captures.append(time.perf_counter() - started)
        # The truth as CBS defines selectivity: the share of the table's rows the sketch keeps.
        _, partition = svc.range_partition(table, attribute, FRAGMENTS)
        values = (
            svc.tables.read_arrow(table, columns=(attribute,))
            .column(attribute)
            .to_numpy(zero_copy_only=False)
        )
        if values.dtype.kind == "M":  # dates as Python objects, as partitions hold them
            values = values.astype(object)
        kept = np.isin(partition.fragments_of(values), version.fragments[table])
        actual = float(kept.mean())
        use = median_seconds(lambda: svc.query(sql), repeat, warm_up=True)
        svc.drop_sketch(name)
        e = estimates.estimation.candidates[f"{table}.{attribute}"]
        candidates.append(Candidate(attribute, e.selectivity, e.low, e.high, actual, use))
    expected = estimates.expected_selectivities()
    pools = {table: estimates.tables[table]}
    picks = {s: preferences(s, pools, expected)[table] for s in STRATEGIES}
    for strategy in [s for s in STRATEGIES if s.startswith("random-")]:
        picks[strategy] = list(estimates.tables[table].pool(strategy.removeprefix("random-")))
    result = QueryResult(
        label,
        sql,
        table,
        plain,
        statistics.median(captures),
        choose_s,
        choice_estimates is not None and choice_estimates.sample_drawn,
        candidates,
        picks,
    )
    chosen = picks["cost-all"][0]
    print(
        f"{label:45s} candidates {len(candidates):2d}  choice {choose_s:5.2f}s / capture "
        f"{result.capture_s:5.2f}s  cost-all picks {chosen} "
        f"({result.actual(chosen):.2%}; best {result.best():.2%})",
        flush=True,
    )
    return result


def near_best(result: QueryResult, attribute: str) -> bool:
    return result.actual(attribute) <= result.best() * (1 + NEAR) + SLACK


def report(results: list[QueryResult], stem: str) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    payload = [
        {**asdict(r), "candidates": [{**asdict(c), "rse": c.rse} for c in r.candidates]} for r in results
    ]
    (RESULTS / f"{stem}.json").write_text(json.dumps(payload, indent=2))
    lines = [f"# Attribute choice ({stem})", ""]
    reused = [r.estimate_s / r.capture_s for r in results if not r.sample_drawn]
    drawn = [r.estimate_s / r.capture_s for r in results if r.sample_drawn]
    rses = [c.rse for r in results for c in r.candidates if c.rse is not None]
    lines += [
        "| strategy | best | near-best (10%) | mean selectivity | mean use speedup |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for strategy in STRATEGIES:
        rows = [r for r in results if r.strategy_selectivity(strategy) is not None]
        if not rows:
            continue
        # For a random strategy: the chance a uniform pick from its pool is (near-)best.
        best = np.mean([np.mean([r.actual(a) <= r.best() for a in r.picked(strategy)]) for r in rows])
        near = np.mean([np.mean([near_best(r, a) for a in r.picked(strategy)]) for r in rows])
        selectivity = np.mean([r.strategy_selectivity(strategy) for r in rows])
        speedup = np.mean([r.strategy_speedup(strategy) for r in rows])
        lines.append(f"| {strategy} | {best:.0%} | {near:.0%} | {selectivity:.2%} | {speedup:.2f}x |")
    lines += [
        "",
        f"- queries: {len(results)}; candidates per query: median "
        f"{statistics.median(len(r.candidates) for r in results):.0f}",
        f"- relative size error of the estimates: median {statistics.median(rses):.2f}, "
        f"90th percentile {np.percentile(rses, 90):.2f}"
        if rses
        else "- no RSE (no non-empty sketch)",
        f"- estimation overhead (a cost-all choice's time / capture time): median "
        f"{statistics.median(reused):.2f}x with a stored sample (target < 0.20x)"
        if reused
        else "- no query reused a stored sample",
        f"- the first query per table and grouping also draws its sample: median "
        f"{statistics.median(drawn):.2f}x"
        if drawn
        else "",
        "",
        "| query | candidate | estimated | 95% interval | actual | RSE | use speedup |",
        "| --- | --- | ---: | --- | ---: | ---: | ---: |",
    ]
    for r in results:
        for c in sorted(r.candidates, key=lambda c: c.actual):
            rse = "-" if c.rse is None else f"{c.rse:.2f}"
            lines.append(
                f"| {r.label} | {c.attribute} | {c.estimated:.2%} | {c.low:.2%} - {c.high:.2%} "
                f"| {c.actual:.2%} | {rse} | {r.plain_s / c.use_s:.2f}x |"
            )
    path = RESULTS / f"{stem}.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--scale", type=float, default=0.1, help="TPC-H scale factor (1 for the issue's targets)"
    )
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the synthetic table")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    home = Settings.from_env().warehouse.parent
    results = []
    with bench_service(args.scale, home, prefix="choice_") as svc:
        if svc.commit_log.get_table(SKEWED) is None:
            svc.tables.create(
                SKEWED,
                skewed_groups_table(args.rows, max(100, args.rows // 500), seed=11, c_high=1_000),
                sort_by=["key"],
            )
        for label, sql in synthetic_queries(svc) + tpch_queries():
            results.append(measure(svc, label, sql, args.repeat))
    print(report(results, f"attribute_choice_sf{args.scale:g}").read_text())


if __name__ == "__main__":
    main()
