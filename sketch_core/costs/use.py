"""Whether a query is to use a valid sketch, before the sketch has been timed.

A sketch makes a query read fewer files, but not for free: the sketched plan carries range
conditions (evaluated per row where they are applied, pushed into every Parquet file read),
the pruned file lists are registered as views of their own, and Spark plans a different query.
When the files it lets the scan skip are few, those costs win and the report runs slower with
the sketch than without it (on a TPC-H Q19-style report at SF1 a sketch that read 89 of 148
files made the query 1.9 times slower). Until the query has run with the sketch, the choice is
made from what the sketch would skip:

- the share of the query's input bytes (every table it reads, sketched or not) in files the
  sketch prunes away; at least ``MIN_SKIPPED_SHARE`` of them pays for the sketch;
- or a row condition that drops rows before a join (``row_condition_pays``): a smaller join
  input pays even when no file is skipped.

Otherwise the query runs plain. Once the query has been timed with the sketch, the recorded
runs decide (:func:`sketch_core.costs.choose.exploring_rule` and the cost model), as for
maintenance.

Example: lineitem 148 files (9.0 GB), the sketch keeps 89 (5.4 GB), part (0.2 GB) read in full:
skipped 3.6 / 9.2 = 39% of the input, so the sketch is used untimed; had it kept 140 files, 5%
would be skipped and the query would run plain, "skip: the sketch skips 8 of 148 files of
tpch.lineitem (5% of the query's input bytes) ...".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sketch_core.costs.choose import Choice, exploring_rule
from sketch_core.costs.model import CostModel

# The least share of a query's input bytes a sketch must let the scan skip to be used before
# it has been timed: below it the sketch's conditions and a differently planned query cost
# about what the skipped reading saves.
MIN_SKIPPED_SHARE = 0.10

# A current sketch is left unused only when the query is expected to run this much faster
# without it: estimates that close are noise, and flipping between them costs both ways.
PLAIN_MARGIN = 0.05


@dataclass(frozen=True)
class ScanFootprint:
    """What a query reads of one table with the sketch and without it."""

    table: str
    files_total: int
    files_read: int
    bytes_total: int
    bytes_read: int
    sketched: bool  # the sketch has fragments of this table
    # The sketch's row condition is applied to a scan of it that feeds a join.
    drops_rows_before_join: bool = False


def untimed_use_choice(footprints: Sequence[ScanFootprint]) -> Choice:
    """``use`` or ``skip`` for a sketch never timed with this query, from what it skips."""
    total = sum(f.bytes_total for f in footprints)
    read = sum(f.bytes_read for f in footprints)
    skipped = 1.0 - read / total if total > 0 else 0.0
    estimates = {"plain_bytes": float(total), "use_bytes": float(read)}  # not yet seconds
    sketched = [f for f in footprints if f.sketched]
    files = "; ".join(
        f"skips {f.files_total - f.files_read} of {f.files_total} files of {f.table}" for f in sketched
    )
    share = f"{skipped:.0%} of the query's input bytes"
    joins = [f.table for f in sketched if f.drops_rows_before_join]
    if skipped >= MIN_SKIPPED_SHARE:
        return Choice("use", estimates, f"use, untimed: the sketch {files} ({share})")
    if joins:
        return Choice(
            "use",
            estimates,
            f"use, untimed: the sketch drops rows of {', '.join(joins)} before a join ({files}, {share})",
        )
    return Choice(
        "skip",
        estimates,
        f"skip, untimed: the sketch {files} ({share}), less than the {MIN_SKIPPED_SHARE:.0%} "
        "that pays for its conditions, and drops no rows before a join",
    )


def timed_use_choice(model: CostModel, rows: int) -> Choice:
    """``use`` or ``skip`` for a sketch timed with the query, by the cost model over tables of
    ``rows`` rows: skip when running plain is expected faster by more than ``PLAIN_MARGIN``;
    the other way when it is seldom timed and close (see
    :func:`sketch_core.costs.choose.exploring_rule`)."""
    estimates = {"use": model.estimate("use", rows), "plain": model.estimate("plain", rows)}
    faster = estimates["plain"] * (1 + PLAIN_MARGIN) < estimates["use"]
    figures = f"without it {estimates['plain']:.3g}s, with it {estimates['use']:.3g}s per run"
    reason = (
        f"skip: the query runs faster without the sketch ({figures})"
        if faster
        else f"use: the sketch is current and pays ({figures})"
    )
    other = "use" if faster else "plain"
    best = "plain" if faster else "use"
    rule = exploring_rule(model, other, estimates[other], estimates[best], best)
    if rule is not None:
        faster = not faster
        runs = model.costs[other].runs
        reason = f"{'skip' if faster else 'use'}, exploring: timed {runs} times ({rule}; {figures})"
    return Choice("skip" if faster else "use", estimates, reason)
