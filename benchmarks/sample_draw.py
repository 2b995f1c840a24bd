"""Drawing the attribute choice's sample of a big table with many groups: Spark counting every
group first against the in-process look at the first files' groups
(:mod:`sketch_core.attribute_choice.group_probe`) that decides the same without the count; and
the draw of every column against the draw of the columns a report reads (``--columns``, by
default TPC-H Q3's `lineitem` columns), as a first capture draws it; and a uniform draw of
those columns (a report that groups by no column of the table, as Q10 of `lineitem`) counting
the table's rows on Spark against one told the count from the files' metadata, and against
the same draw read from the files in-process (:mod:`sketch_core.tables.file_sample`, as the
sample store draws uniform samples of local tables); where the draw is stratified (few groups),
also the stratified draw of those columns read from the files in-process. Each in-process draw
is timed again decoding every row of its string columns (as it did before string columns the
files store as dictionary indices were decoded in the drawn rows only): the same rows.

Per round, in one process, interleaved: the draw that counts (``draw_sample`` told nothing),
then the probe and the draw it informs, then the probe and the narrow draw. All must return
the same rows (the narrow one, those columns of them). Medians; results go to
benchmarks/results/sample_draw_sf<scale>.md.
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
from sketch_core.spark.sampling import OVERSAMPLE, draw_sample
from sketch_core.spark.views import pinned_dataframe
from sketch_core.tables.file_sample import groupable_here, stratified_file_sample, uniform_file_sample

RESULTS = Path(__file__).parent / "results"
DEFAULT_TABLE, DEFAULT_GROUPS = "tpch.lineitem", "l_orderkey"
DEFAULT_COLUMNS = "l_orderkey,l_extendedprice,l_discount,l_shipdate"  # what Q3 reads of lineitem


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--table", default=DEFAULT_TABLE)
    parser.add_argument("--groups", default=DEFAULT_GROUPS, help="group columns, comma-separated")
    parser.add_argument(
        "--columns",
        default=DEFAULT_COLUMNS,
        help="the columns of the narrow draw, comma-separated (default: what Q3 reads of lineitem)",
    )
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    columns = args.groups.split(",")
    narrow_columns = list(dict.fromkeys([*columns, *args.columns.split(",")]))
    counted_s, probe_s, probed_s, narrow_s, uniform_s, told_s, here_s = [], [], [], [], [], [], []
    grouped_here_s: list[float] = []
    # The in-process draws again, decoding every row of the string columns (see file_sample).
    decoded_s: list[float] = []
    grouped_decoded_s: list[float] = []
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
            began = time.perf_counter()
            many = more_groups_than(pin, columns, rate * pin.record_count)
            narrow, _ = draw_sample(
                frame.select(*narrow_columns), columns, rate, svc.samples.seed, too_many_groups=many
            )
            narrow_s.append(time.perf_counter() - began)
            if how != "stratified":  # whole groups and uniform draws are the same rows, by seed
                wanted = probed.select(narrow_columns).sort_by([(c, "ascending") for c in narrow_columns])
                got = narrow.select(narrow_columns).sort_by([(c, "ascending") for c in narrow_columns])
                assert wanted.equals(got), "the narrow draw kept other rows"
            if how == "stratified" and groupable_here(pin, columns):
                began = time.perf_counter()
                drawn = stratified_file_sample(
                    pin, columns[0], narrow_columns, rate, svc.samples.seed, OVERSAMPLE
                )
                grouped_here_s.append(time.perf_counter() - began)
                began = time.perf_counter()
                whole = stratified_file_sample(
                    pin, columns[0], narrow_columns, rate, svc.samples.seed, OVERSAMPLE, as_dictionaries=False
                )
                grouped_decoded_s.append(time.perf_counter() - began)
                # Other rows, the same quota of each group (Spark's falls short of a few, rarely).
                assert drawn is not None, "the in-process draw found too many groups"
                assert whole is not None and whole[0].equals(drawn[0]), "decoding whole drew other rows"
                assert abs(drawn[0].num_rows - narrow.num_rows) <= 0.01 * narrow.num_rows + 5
            narrow_frame = frame.select(*narrow_columns)
            began = time.perf_counter()
            uniform, _ = draw_sample(narrow_frame, [], rate, svc.samples.seed)
            uniform_s.append(time.perf_counter() - began)
            began = time.perf_counter()
            told, _ = draw_sample(narrow_frame, [], rate, svc.samples.seed, rows=pin.record_count)
            told_s.append(time.perf_counter() - began)
            assert told.equals(uniform), "the uniform draws disagree"
            began = time.perf_counter()
            here, live = uniform_file_sample(pin, narrow_columns, rate, svc.samples.seed)
            here_s.append(time.perf_counter() - began)
            began = time.perf_counter()
            whole, _ = uniform_file_sample(pin, narrow_columns, rate, svc.samples.seed, as_dictionaries=False)
            decoded_s.append(time.perf_counter() - began)
            assert whole.equals(here), "decoding whole drew other rows"
            # Other rows (another generator), as many within chance: Binomial(rows, rate).
            spread = 5 * (pin.record_count * rate * (1 - rate)) ** 0.5
            assert live == pin.record_count and abs(here.num_rows - told.num_rows) < 2 * spread
            print(
                f"round {round_number + 1}: counting {counted_s[-1]:.2f}s, probe {probe_s[-1]:.2f}s "
                f"(too many groups: {many}), with the probe {probed_s[-1]:.2f}s, "
                f"{len(narrow_columns)} columns {narrow_s[-1]:.2f}s; {how}, {counted.num_rows:,} rows; "
                f"uniform {uniform_s[-1]:.2f}s, told the count {told_s[-1]:.2f}s, from the files here "
                f"{here_s[-1]:.2f}s",
                flush=True,
            )
    counting, probing, narrowed = (statistics.median(x) for x in (counted_s, probed_s, narrow_s))
    on_spark, in_process = statistics.median(told_s), statistics.median(here_s)
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
        f"| the probe, then the draw of {len(narrow_columns)} of the {len(pin.schema)} columns "
        f"({', '.join(narrow_columns)}) | {narrowed:.2f} |",
        f"| every column over those | {probing / narrowed:.2f}x |",
        f"| a uniform draw of those columns, counting the rows on Spark "
        f"| {statistics.median(uniform_s):.2f} |",
        f"| the same draw told the count from the files' metadata | {on_spark:.2f} |",
        f"| the same draw read from the files in-process | {in_process:.2f} |",
        f"| on Spark (told the count) over in-process | {on_spark / in_process:.2f}x |",
        f"| the same in-process draw decoding its string columns whole "
        f"| {statistics.median(decoded_s):.2f} |",
        f"| decoding whole over decoding the drawn rows | {statistics.median(decoded_s) / in_process:.2f}x |",
    ]
    if grouped_here_s:
        grouped_here = statistics.median(grouped_here_s)
        lines += [
            f"| the stratified draw of those columns read from the files in-process | {grouped_here:.2f} |",
            f"| on Spark (with the probe) over in-process | {narrowed / grouped_here:.2f}x |",
            f"| the same stratified draw decoding its string columns whole "
            f"| {statistics.median(grouped_decoded_s):.2f} |",
            f"| decoding whole over decoding the drawn rows "
            f"| {statistics.median(grouped_decoded_s) / grouped_here:.2f}x |",
        ]
    lines += [
        "",
        "Reproduce: `python -m benchmarks.sample_draw " + " ".join(sys.argv[1:]) + "`",
    ]
    RESULTS.mkdir(parents=True, exist_ok=True)
    # Named by what was drawn when it is not the default (a run of another keeps the default's).
    stem = f"sample_draw_sf{args.scale:g}"
    if (args.table, args.groups) != (DEFAULT_TABLE, DEFAULT_GROUPS):
        stem += f"_{args.table.rsplit('.', 1)[-1]}_{args.groups.replace(',', '_')}"
    elif args.columns != DEFAULT_COLUMNS:
        stem += "_with_" + "_".join(c for c in args.columns.split(",") if c not in DEFAULT_COLUMNS.split(","))
    out = RESULTS / f"{stem}.md"
    out.write_text("\n".join(lines) + "\n")
    print(out.read_text())


if __name__ == "__main__":
    main()
