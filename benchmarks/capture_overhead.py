"""Capture overhead: what capturing a sketch costs against running the report plainly.

For each TPC-H report (and, with ``--synthetic ROWS``, a top-10 and a HAVING report over a
synthetic table sorted by its row id), in one process and interleaved rounds (medians of ``--repeat``): the
plain query (``svc.query(..., use_sketches=False)``), a capture with the default attribute
choice (as a new user runs ``svc.capture(sql)``; the choice's sample stored after the first
round, as it is between a deployment's captures), and a capture with the attributes that choice
picked given. Both captures must find the same fragments. Before each query's first round
one default capture runs untimed (the process's first run of the capture plan is slower, and is
not the choice's cost); then samples are forgotten and the file cache emptied, so that the first
timed default capture draws a sample (where the choice needs one) and reads the joined tables'
files as a new deployment's first capture does (reported on its own, with whether it drew one). Results go to
benchmarks/results/capture_overhead_sf<scale>.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from sqlalchemy import text

from benchmarks.layouts import SYNTHETIC_GROUPS, synthetic_queries
from benchmarks.stack import bench_service
from sketch_core.config import DEFAULT_ATTRIBUTE_STRATEGY, Settings
from sketch_core.datasets import synthetic_table
from sketch_core.datasets.tpch_queries import TPCH_QUERIES
from sketch_core.service import SketchService
from sketch_core.tables.file_cache import FileCache

RESULTS = Path(__file__).parent / "results"
QUERIES = (3, 10, 18)
FRAGMENTS = 10_000
SCRATCH = "capture_overhead"


@dataclass
class Overhead:
    query: str
    attributes: dict[str, str]
    plain_s: list[float] = field(default_factory=list)
    default_s: list[float] = field(default_factory=list)
    given_s: list[float] = field(default_factory=list)
    # Whether the first default capture drew a sample (a top-k report over tables sorted for it
    # is chosen from the files' bounds alone).
    drew_sample: bool = False

    def ratio(self, runs: list[float]) -> float:
        return statistics.median(runs) / statistics.median(self.plain_s)

    @property
    def first_ratio(self) -> float:
        """The first default capture (it drew the sample) over the plain query's median."""
        return self.default_s[0] / statistics.median(self.plain_s)


def _forget_samples(svc: SketchService) -> None:
    """No stored sample left: the next default capture draws its own, as a new deployment's."""
    with svc.samples.repository.engine.begin() as conn:
        paths = conn.execute(text("DELETE FROM sketch.samples RETURNING path")).scalars().all()
    for path in paths:
        Path(path).unlink(missing_ok=True)


def _samples_stored(svc: SketchService) -> int:
    with svc.samples.repository.engine.begin() as conn:
        return int(conn.execute(text("SELECT count(*) FROM sketch.samples")).scalar_one())


def _empty_file_cache(svc: SketchService) -> None:
    """No table file's columns kept in memory from earlier estimates."""
    if svc.tables.file_cache is not None:
        svc.tables.file_cache = FileCache(svc.tables.settings.file_cache_bytes)


def _drop(svc: SketchService) -> None:
    if any(d.name == SCRATCH for d in svc.sketches.definitions()):
        svc.drop_sketch(SCRATCH)


def _timed_capture(
    svc: SketchService, sql: str, attributes: dict[str, str] | None
) -> tuple[float, dict[str, set[int]]]:
    _drop(svc)
    began = time.perf_counter()
    version = svc.capture(sql, name=SCRATCH, fragments=FRAGMENTS, attributes=attributes)
    seconds = time.perf_counter() - began
    return seconds, {t: set(ids) for t, ids in version.fragments.items()}


def synthetic_reports(svc: SketchService, rows: int) -> dict[str, str]:
    """The layouts benchmark's top-10 and HAVING reports grouped by ``a``, over a table of
    ``rows`` rows sorted by its row id (``key``), as tables loaded in arrival order are: the
    choice leaves such a table to the estimates, over a sample stratified by ``a``."""
    table = f"bench.facts_{rows}_by_key"
    if not svc.tables.exists(table):
        svc.tables.create(table, synthetic_table(rows, SYNTHETIC_GROUPS, seed=3), sort_by=["key"])
    return synthetic_queries(svc, table)


def measure(svc: SketchService, label: str, sql: str, repeat: int) -> Overhead:
    svc.query(sql, use_sketches=False)  # the JVM's first run of the query is not the report's
    # Nor is the process's first run of the capture plan the choice's cost (at SF10 it took
    # Q10's capture job 18 s against 13 s the next time): a default capture runs it first. Its
    # sample is then forgotten and the files its estimate read are dropped from the file cache,
    # so that the first timed default capture draws and reads as a new deployment's does.
    _timed_capture(svc, sql, None)
    _forget_samples(svc)
    _empty_file_cache(svc)
    result = Overhead(label, {})
    for round_number in range(repeat):
        began = time.perf_counter()
        svc.query(sql, use_sketches=False)
        result.plain_s.append(time.perf_counter() - began)
        seconds, chosen_fragments = _timed_capture(svc, sql, None)
        result.default_s.append(seconds)
        if round_number == 0:
            result.drew_sample = _samples_stored(svc) > 0
        result.attributes = {t: a for t, (a, _) in svc.sketch(SCRATCH).partitions.items()}
        seconds, given_fragments = _timed_capture(svc, sql, result.attributes)
        result.given_s.append(seconds)
        assert given_fragments == chosen_fragments, f"{label}: the captures disagree"
        print(
            f"{time.strftime('%H:%M:%S')} {label} round {round_number + 1}: "
            f"plain {result.plain_s[-1]:.2f}s, default choice {result.default_s[-1]:.2f}s, "
            f"given {result.given_s[-1]:.2f}s",
            flush=True,
        )
    _drop(svc)
    return result


def report(
    results: list[Overhead],
    scale: float,
    command: str,
    queries: tuple[int, ...] = QUERIES,
    synthetic_rows: int = 0,
) -> Path:
    """The JSON and Markdown reports: ``capture_overhead_sf10``, or with the queries run when
    they are not the default ones (``_q5_q7``, ``_syn2000000`` for the synthetic reports), so a
    run of others keeps the default's report."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = f"capture_overhead_sf{scale:g}"
    if tuple(queries) != QUERIES or synthetic_rows:
        stem += "".join(f"_q{q}" for q in queries)
    if synthetic_rows:
        stem += f"_syn{synthetic_rows}"
    payload = [
        {
            **asdict(r),
            "default_ratio": r.ratio(r.default_s),
            "given_ratio": r.ratio(r.given_s),
            "first_default_ratio": r.first_ratio,
        }
        for r in results
    ]
    (RESULTS / f"{stem}.json").write_text(json.dumps({"scale": scale, "results": payload}, indent=2))
    lines = [
        f"# Capture overhead at TPC-H SF{scale:g}",
        "",
        f"{FRAGMENTS:,} fragments; medians of interleaved rounds in one process, as multiples of the",
        "plain query's median. The default choice's sample, where it needs one, is drawn in the",
        "first round and stored; the first default capture (after an untimed capture ran the",
        "capture plan once and its sample was forgotten) is also shown on its own, with whether it",
        "drew a sample (a top-k report over tables sorted for it is chosen from the files' bounds).",
        "",
        "| query | plain s | default choice | first default capture | sample drawn | attributes given "
        "| attributes |",
        "| --- | ---: | ---: | ---: | --- | ---: | --- |",
    ]
    for r in results:
        picked = ", ".join(f"{t.split('.')[-1]}.{a}" for t, a in sorted(r.attributes.items()))
        lines.append(
            f"| {r.query} | {statistics.median(r.plain_s):.2f} | {r.ratio(r.default_s):.2f}x | "
            f"{r.first_ratio:.2f}x | {'yes' if r.drew_sample else 'no'} | {r.ratio(r.given_s):.2f}x | "
            f"{picked} |"
        )
    lines += ["", f"Reproduce: `{command}`"]
    markdown = RESULTS / f"{stem}.md"
    markdown.write_text("\n".join(lines) + "\n")
    return markdown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--queries", default=",".join(map(str, QUERIES)))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--synthetic",
        type=int,
        default=0,
        metavar="ROWS",
        help="also the synthetic top-10 and HAVING reports over a table of ROWS rows sorted by its id",
    )
    args = parser.parse_args()
    home = Settings.from_env().warehouse.parent
    with bench_service(args.scale, home) as svc:
        # The benchmark stack sketches sort keys first; a new user's captures choose by default.
        svc.settings = replace(svc.settings, attribute_strategy=DEFAULT_ATTRIBUTE_STRATEGY)
        queries = tuple(int(q) for q in args.queries.split(",") if q)
        reports = {f"tpch_q{q}": TPCH_QUERIES[q] for q in queries}
        if args.synthetic:
            reports.update(synthetic_reports(svc, args.synthetic))
        results = [measure(svc, label, sql, args.repeat) for label, sql in reports.items()]
    command = "python -m benchmarks.capture_overhead " + shlex.join(sys.argv[1:])
    print(report(results, args.scale, command, queries, args.synthetic).read_text())


if __name__ == "__main__":
    main()
