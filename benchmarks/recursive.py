"""Recursive view maintenance: absorption provenance against DRed and against recomputation
from scratch (in process, and on Spark as the service runs the query), each measured in the
same run.

Two views over a directed graph (each undirected edge is two links of one weight, 1 to 10),
written as users write them and compiled by the recursive front end: reachability from a few
sources (``--query reach``)::

    WITH RECURSIVE reach(src, dst) AS (
        SELECT src, dst FROM links WHERE src < {sources}
        UNION
        SELECT r.src, l.dst FROM reach r JOIN links l ON l.src = r.dst)
    SELECT * FROM reach

and least-cost paths from them (``--query least-cost``), which every approach evaluates with
aggregate selection (it derives from each pair's cheapest row only; without it the query
never ends on a graph with cycles)::

    WITH RECURSIVE paths(src, dst, cost) AS (
        SELECT src, dst, w FROM links WHERE src < {sources}
        UNION ALL
        SELECT p.src, l.dst, p.cost + l.w FROM paths p JOIN links l ON l.src = p.dst)
    SELECT src, dst, MIN(cost) AS cost FROM paths GROUP BY src, dst

Topologies (networkx): transit-stub (transit nodes on a small-world ring, each with stubs of 8
nodes, as the paper's GT-ITM setup), random (G(n, m)) and scale-free (Barabasi-Albert), at
several sizes. Workloads: single links deleted, single links inserted (links of the topology
held out of the first load: a link that comes back), and mixed batches of 10 of each. Per
workload and approach: the median time per operation and, for absorption provenance, the BDD
nodes of the view's formulas; for DRed, the rows it over-deleted. Spark recomputes the query
from scratch (``WITH RECURSIVE ... UNION``, semi-naively, as ``svc.query`` runs it) after
``--spark-operations`` of the operations (it takes seconds each).

Absorption provenance's first load gets ``--load-seconds`` and ``NODE_LIMIT`` BDD nodes; a
cell past either says so (the formulas of reachability over a random or scale-free graph are
network-reliability functions, whose BDDs grow exponentially with the graph's width).

    .venv/bin/python -m benchmarks.recursive [--query reach] [--sizes 100,300,1000,3000]

Results go to benchmarks/results/recursive.{json,md} and docs/images/recursive_deletes.png
(reachability) and recursive_least_cost_deletes.png; a run keeps the earlier results of the
queries, topologies and sizes it does not run.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import networkx as nx
import pyarrow as pa
from pyspark.sql import SparkSession

from sketch_core.recursive.absorption import AbsorptionView
from sketch_core.recursive.evaluate import fixpoint
from sketch_core.recursive.members import Members, compile_members
from sketch_core.recursive.query import split_recursive
from sketch_core.recursive.rule import FormulasTooLargeError
from sketch_core.recursive.view import RecursiveView
from sketch_core.spark.recursion import recursive_frame

RESULTS = Path(__file__).parent / "results"
IMAGES = Path(__file__).resolve().parents[1] / "docs" / "images"
SCHEMA = pa.schema([("src", pa.int64()), ("dst", pa.int64()), ("w", pa.int64())])
SOURCES = 5
QUERIES = {
    "reach": """WITH RECURSIVE reach(src, dst) AS (
    SELECT src, dst FROM links WHERE src < {sources}
    UNION
    SELECT r.src, l.dst FROM reach r JOIN links l ON l.src = r.dst)
SELECT * FROM reach""",
    "least-cost": """WITH RECURSIVE paths(src, dst, cost) AS (
    SELECT src, dst, w FROM links WHERE src < {sources}
    UNION ALL
    SELECT p.src, l.dst, p.cost + l.w FROM paths p JOIN links l ON l.src = p.dst)
SELECT src, dst, MIN(cost) AS cost FROM paths GROUP BY src, dst""",
}
APPROACHES = ("absorption", "dred", "recompute", "spark")
# BDD nodes absorption provenance may hold per view here (about 60 MB): past it a cell says so.
NODE_LIMIT = 2_000_000


@dataclass
class Measurement:
    topology: str
    nodes: int
    links: int
    workload: str
    approach: str
    ms_per_operation: float
    view_rows: int
    state: int  # absorption: BDD nodes over the view's formulas; DRed: rows over-deleted, summed
    note: str = ""  # why a cell has no time (absorption provenance gave up)
    query: str = "reach"


def transit_stub(nodes: int, seed: int) -> nx.Graph:
    """About ``nodes`` nodes: transit nodes on a small-world ring, three stubs of 8 per node."""
    rng = random.Random(seed)
    transit = max(4, nodes // 25)
    graph = nx.Graph(nx.connected_watts_strogatz_graph(transit, 2, 0.5, seed=seed).edges())
    nxt = transit
    for t in range(transit):
        for _ in range(3):
            stub = nx.connected_watts_strogatz_graph(8, 3, 0.3, seed=rng.randint(0, 10**6))
            graph.add_edges_from((nxt + a, nxt + b) for a, b in stub.edges())
            graph.add_edge(t, nxt)
            nxt += 8
    return graph


TOPOLOGIES: dict[str, Callable[[int, int], nx.Graph]] = {
    "transit-stub": transit_stub,
    "random": lambda n, seed: nx.gnm_random_graph(n, 2 * n, seed=seed),
    "scale-free": lambda n, seed: nx.barabasi_albert_graph(n, 2, seed=seed),
}


def _weight(a: int, b: int) -> int:
    """An edge's weight, 1 to 10, the same both ways and whenever it comes back."""
    low, high = min(a, b), max(a, b)
    return 1 + (low * 7919 + high * 104729) % 10


def _table(links: list[tuple[int, int]]) -> pa.Table:
    return pa.table(
        {"src": [s for s, _ in links], "dst": [d for _, d in links], "w": [_weight(s, d) for s, d in links]},
        schema=SCHEMA,
    )


def _recompute(members: Members, links: list[tuple[int, int]]) -> set[tuple[object, ...]]:
    table = _table(links)
    seeds = [s for s in members.seeds_of(table) if s is not None]
    edges = [e for e in members.edges_of(table) if e is not None]
    return fixpoint(members.rule, seeds, edges)


def _after(
    links: list[tuple[int, int]], added: list[tuple[int, int]], deleted: list[tuple[int, int]]
) -> list[tuple[int, int]]:
    gone = set(deleted)
    return [x for x in links if x not in gone] + added


def _spark_rows(spark: SparkSession, sql: str, links: list[tuple[int, int]], scratch: Path) -> int:
    spark.createDataFrame(_table(links)).createOrReplaceTempView("links")
    frame = recursive_frame(spark, sql, scratch)
    assert frame is not None
    return frame.count()


def run_cell(
    members: Members,
    topology: str,
    graph: nx.Graph,
    operations: int,
    seed: int,
    spark: SparkSession,
    options: argparse.Namespace,
) -> list[Measurement]:
    every = sorted({(a, b) for a, b in graph.edges()} | {(b, a) for a, b in graph.edges()})
    rng = random.Random(seed)
    # Links come and go as in a network: the inserted ones are links of the topology held out
    # of the first load (a link that comes back), not random pairs of nodes, which would
    # connect the graph as no network is and grow every formula.
    held_out = rng.sample(every, operations)
    out_now = set(held_out)
    links = [x for x in every if x not in out_now]
    Link = tuple[int, int]
    workloads: dict[str, list[tuple[list[Link], list[Link]]]] = {
        "delete one link": [([], [link]) for link in rng.sample(links, operations)],
        "insert one link": [([link], []) for link in held_out],
        "mixed batch of 20": [
            (rng.sample(held_out, min(10, operations)), rng.sample(links, 10))
            for _ in range(max(1, operations // 4))
        ],
    }
    out = []

    def measured(
        approach: str, workload: str, ms: float, rows: int, state: int, note: str = ""
    ) -> Measurement:
        return Measurement(
            topology, graph.number_of_nodes(), len(links), workload, approach, ms, rows, state, note, query
        )

    query = options.query
    sql = QUERIES[query].format(sources=SOURCES)

    gave_up: str | None = None  # absorption's first load, once it failed for this graph
    for workload, steps in workloads.items():
        for approach in APPROACHES:
            if approach == "spark":
                times = []
                for added, deleted in steps[: options.spark_operations]:
                    now = _after(links, added, deleted)
                    started = time.perf_counter()
                    spark_rows = _spark_rows(spark, sql, now, options.scratch)
                    times.append(time.perf_counter() - started)
                out.append(measured(approach, workload, 1000 * statistics.median(times), spark_rows, 0))
                print(
                    f"{topology:12s} {graph.number_of_nodes():6d} {workload:20s} {approach:10s} "
                    f"{out[-1].ms_per_operation:9.2f} ms/op  rows {spark_rows}",
                    flush=True,
                )
                continue
            view = (
                RecursiveView(
                    members, "dred" if approach == "dred" else "absorption", NODE_LIMIT, options.load_seconds
                )
                if approach != "recompute"
                else None
            )
            if approach == "absorption" and len(links) > options.absorption_links:
                # One BDD variable per link: at a million links CUDD's variable reordering
                # asked for 62 GB and aborted the process (it cannot be caught).
                gave_up = f"not run over {options.absorption_links:,} links"
            try:
                if approach == "absorption" and gave_up is not None:
                    raise FormulasTooLargeError(NODE_LIMIT)
                if view is not None:
                    view.insert({"links": _table(links)})
            except FormulasTooLargeError as exc:
                gave_up = gave_up or (
                    f"formulas over {NODE_LIMIT:,} nodes"
                    if exc.seconds is None
                    else f"first load over {options.load_seconds:.0f} s"
                )
                print(
                    f"{topology:12s} {graph.number_of_nodes():6d} {workload:20s} {approach:10s} {gave_up}",
                    flush=True,
                )
                out.append(measured(approach, workload, math.nan, 0, NODE_LIMIT, gave_up))
                continue
            times, state = [], 0
            for added, deleted in steps:
                # The graph after the step, for recomputation: made before the clock starts
                # (the views are handed the step's links only).
                now = _after(links, added, deleted) if view is None else []
                started = time.perf_counter()
                if view is not None:
                    change = view.delete({"links": _table(deleted)}) if deleted else None
                    if added:
                        view.insert({"links": _table(added)})
                    state += change.work.overdeleted if change is not None else 0
                if view is None:
                    rows: set[tuple[object, ...]] = _recompute(members, now)
                times.append(time.perf_counter() - started)
                # Undo, so every step starts from the same graph.
                if view is not None:
                    if added:
                        view.delete({"links": _table(added)})
                    if deleted:
                        view.insert({"links": _table(deleted)})
            if view is not None:
                rows_now = set(view.engine.best_rows())  # under a selection: each group's best
                if isinstance(view.engine, AbsorptionView):
                    state = view.engine.state_size()
            else:
                rows_now = rows
            out.append(measured(approach, workload, 1000 * statistics.median(times), len(rows_now), state))
            print(
                f"{topology:12s} {graph.number_of_nodes():6d} {workload:20s} {approach:10s} "
                f"{out[-1].ms_per_operation:9.2f} ms/op  rows {len(rows_now)}",
                flush=True,
            )
    return out


def report(results: list[Measurement], command: str) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "recursive.json").write_text(json.dumps([asdict(m) for m in results], indent=2))
    lines = [
        "# Recursive view maintenance: absorption provenance, DRed, recomputation",
        "",
        f"`{command}` (the last run; one run per query and topology; medians per operation; the views: "
        f"reachability and least-cost paths from {SOURCES} sources; Spark recomputes the query from "
        "scratch as `svc.query` runs it)",
        "",
        "| query | topology | nodes | links | workload | absorption ms | DRed ms | recompute ms | Spark ms "
        "| DRed / absorption | recompute / absorption | Spark / absorption | view rows | BDD nodes |",
        "| --- | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    cells: dict[tuple[str, str, int, str], dict[str, Measurement]] = {}
    for m in sorted(results, key=lambda m: (m.query != "reach", list(TOPOLOGIES).index(m.topology), m.nodes)):
        cells.setdefault((m.query, m.topology, m.nodes, m.workload), {})[m.approach] = m
    for (query, topology, nodes, workload), by in cells.items():
        a, d, r, k = by["absorption"], by["dred"], by["recompute"], by["spark"]
        others = f"{d.ms_per_operation:.2f} | {r.ms_per_operation:.2f} | {k.ms_per_operation:.0f}"
        if math.isnan(a.ms_per_operation):
            lines.append(
                f"| {query} | {topology} | {nodes} | {a.links} | {workload} | {a.note} | {others} | | | "
                f"| {d.view_rows} | |"
            )
            continue
        ratios = " | ".join(f"{x.ms_per_operation / a.ms_per_operation:.1f}x" for x in (d, r, k))
        lines.append(
            f"| {query} | {topology} | {nodes} | {a.links} | {workload} | {a.ms_per_operation:.2f} "
            f"| {others} | {ratios} | {a.view_rows} | {a.state} |"
        )
    markdown = RESULTS / "recursive.md"
    markdown.write_text("\n".join(lines) + "\n")
    for query, image in (
        ("reach", "recursive_deletes.png"),
        ("least-cost", "recursive_least_cost_deletes.png"),
    ):
        if any(m.query == query for m in results):
            _plot([m for m in results if m.query == query], image)
    return markdown


def _plot(results: list[Measurement], image: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    topologies = sorted({m.topology for m in results}, key=list(TOPOLOGIES).index)
    figure, axes = plt.subplots(1, len(topologies), figsize=(4 * len(topologies), 3.4), squeeze=False)
    for axis, topology in zip(axes[0], topologies, strict=True):
        for approach in APPROACHES:
            points = sorted(
                (m.links, m.ms_per_operation)
                for m in results
                if m.topology == topology and m.approach == approach and m.workload == "delete one link"
            )
            points = [p for p in points if not math.isnan(p[1])]
            axis.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=approach)
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.xaxis.set_minor_formatter(NullFormatter())
        gave_up = next(
            (m.note for m in results if m.topology == topology and m.approach == "absorption" and m.note), ""
        )
        if gave_up:
            axis.text(0.03, 0.03, f"absorption: {gave_up}", transform=axis.transAxes, fontsize=8)
        axis.set_title(topology)
        axis.set_xlabel("links")
        axis.set_ylabel("ms per deleted link")
    axes[0][0].legend()
    IMAGES.mkdir(parents=True, exist_ok=True)
    figure.suptitle(f"{results[0].query}: maintenance time per deleted link", fontsize=10)
    figure.tight_layout()
    figure.savefig(IMAGES / image, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="100,300,1000,3000", help="comma-separated node counts")
    parser.add_argument("--operations", type=int, default=20, help="single-link operations per workload")
    parser.add_argument("--spark-operations", type=int, default=3, help="of those, recomputed on Spark")
    parser.add_argument("--load-seconds", type=float, default=120.0, help="absorption's first load, at most")
    parser.add_argument("--topologies", default="transit-stub,random,scale-free")
    parser.add_argument("--query", default="reach", choices=sorted(QUERIES))
    parser.add_argument(
        "--absorption-links", type=int, default=100_000, help="graphs with more links: no absorption"
    )
    args = parser.parse_args()
    split = split_recursive(QUERIES[args.query].format(sources=SOURCES))
    assert split is not None
    members = compile_members(split, {"links": SCHEMA})
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    results = []
    with tempfile.TemporaryDirectory() as scratch:
        args.scratch = Path(scratch)
        for topology in args.topologies.split(","):
            for size in (int(s) for s in args.sizes.split(",")):
                graph = TOPOLOGIES[topology](size, 7)
                results += run_cell(members, topology, graph, args.operations, size, spark, args)
        del args.scratch
    command = "python -m benchmarks.recursive " + " ".join(
        f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items()
    )
    print(report(_with_earlier(results), command).read_text())


def _with_earlier(results: list[Measurement]) -> list[Measurement]:
    """``results`` and the earlier results' cells of the queries, topologies and sizes not run
    this time (so that each can be run on its own: ``--query least-cost --topologies random``)."""
    stored = RESULTS / "recursive.json"
    if not stored.exists():
        return results
    run = {(m.query, m.topology, m.nodes) for m in results}
    earlier = [Measurement(**m) for m in json.loads(stored.read_text())]
    return [m for m in earlier if (m.query, m.topology, m.nodes) not in run] + results


if __name__ == "__main__":
    main()
