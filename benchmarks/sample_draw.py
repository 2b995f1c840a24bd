"""Drawing the attribute choice's sample of a big table with many groups: Spark counting every
group first against the in-process look at the first files' groups
(:mod:`sketch_core.attribute_choice.group_probe`) that decides the same without the count.

Per round, in one process, interleaved: the draw that counts (``draw_sample`` told nothing),
then the probe and the draw it informs. Both must return the same rows. Medians; results go
to benchmarks/results/sample_draw_sf<scale>.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from benchmarks.stack import bench_service
from sketch_core.attribute_choice.group_probe import more_groups_than
from sketch_core.attribute_choice.store import MAX_SAMPLE_ROWS, sample_rate
from sketch_core.config import Settings
from sketch_core.spark.sampling import draw_sample
from sketch_core.spark.views import pinned_dataframe

RESULTS = Path(__file__).parent / "results"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--table", default="tpch.lineitem")
    parser.add_argument("--groups", default="l_orderkey", help="group columns, comma-separated")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    columns = args.groups.split(",")
    counted_s, probe_s, probed_s = [], [], []
    home = Settings.from_env().warehouse.parent
    with bench_service(args.scale, home) as svc:
        pin = svc.tables.pin(args.table, svc.context.latest_sequence())
        frame = pinned_dataframe(svc.spark, pin)
        rate = sample_rate(svc.settings.sample_rate, pin.record_count, MAX_SAMPLE_ROWS)
        for round_number in range(args.repeat):
            began = time.perf_counter()
            counted, how = draw_sample(frame, columns, rate, svc.samples.seed)
            counted_s.append(time.perf_counter() - began)
            began = time.perf_counter()
            many = more_groups_than(pin, columns, rate * pin.record_count)
            probe_s.append(time.perf_counter() - began)
            probed, probed_how = draw_sample(frame, columns, rate, svc.samples.seed, too_many_groups=many)
            probed_s.append(time.perf_counter() - began)
            assert (probed_how, probed.num_rows) == (how, counted.num_rows), "the draws disagree"
            assert probed.sort_by(columns[0]).equals(counted.sort_by(columns[0])), "the draws disagree"
            print(
                f"round {round_number + 1}: counting {counted_s[-1]:.2f}s, probe {probe_s[-1]:.2f}s "
                f"(too many groups: {many}), with the probe {probed_s[-1]:.2f}s; {how}, "
                f"{counted.num_rows:,} rows",
                flush=True,
            )
    counting, probing = statistics.median(counted_s), statistics.median(probed_s)
    lines = [
        f"# Drawing the choice's sample of {args.table} by {', '.join(columns)} at TPC-H SF{args.scale:g}",
        "",
        f"{pin.record_count:,} rows in {len(pin.files)} files, rate {rate:g}; medians of "
        f"{args.repeat} interleaved rounds in one process.",
        "",
        "| draw | seconds |",
        "| --- | ---: |",
        f"| counting every group on Spark first | {counting:.2f} |",
        f"| the in-process probe | {statistics.median(probe_s):.2f} |",
        f"| the probe, then the draw it informs | {probing:.2f} |",
        f"| speedup | {counting / probing:.2f}x |",
        "",
        "Reproduce: `python -m benchmarks.sample_draw " + " ".join(sys.argv[1:]) + "`",
    ]
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"sample_draw_sf{args.scale:g}.md"
    out.write_text("\n".join(lines) + "\n")
    print(out.read_text())


if __name__ == "__main__":
    main()
