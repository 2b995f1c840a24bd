"""How many of a table's data files a sketch on an attribute is expected to read (pure).

A smaller sketch is not a faster query: what a sketch saves is the files (and row groups) its
ranges let the scan skip, and that depends on how the table's files lie along the attribute.
On the attribute the table is sorted by, each file holds a narrow range of it; on an attribute
the layout scatters, every file holds nearly its whole range, and a sketch keeping a few
fragments still meets every file.

The estimate uses the per-file bounds Iceberg keeps. A file whose range overlaps the ranges of
``m`` of the table's ``n`` files spans about ``m / n`` of the attribute's values (files hold
similar shares of the rows: disjoint files split the values, files that all overlap each hold
all of them), so about ``k = F * m / n`` of an equi-depth partition's ``F`` fragments. A file is
read when the sketch keeps any of its fragments: with ``K = s * F`` fragments kept at random,
that happens with probability ``1 - (1 - k / F) ** K``. A file without bounds on the attribute
is always read.

Example: 8 files sorted on ``l_orderkey`` and 64 fragments, a top-10 sketch keeping 10 of them:
each file spans 8 fragments and is read with probability ``1 - (56/64) ** 10`` = 0.74; on
``o_orderstatus``, whose three values are in every file, each file spans all fragments and is
read for certain, however few fragments the sketch keeps.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from typing import Any

from sketch_core.tables.pinned import DataFileInfo


def files_read_on(
    files: Sequence[DataFileInfo], attribute: str, fragment_share: float, fragments: int
) -> float:
    """:func:`expected_files_read` over ``files``' bounds on ``attribute``."""
    return expected_files_read(
        [f.lower.get(attribute) for f in files],
        [f.upper.get(attribute) for f in files],
        fragment_share,
        fragments,
    )


def expected_files_read(
    lows: Sequence[Any | None], highs: Sequence[Any | None], fragment_share: float, fragments: int
) -> float:
    """The expected share of the files read by a sketch that keeps ``fragment_share`` of
    ``fragments`` fragments; ``lows``/``highs`` are each file's bounds on the attribute (None:
    unknown). 1.0 for a table without files."""
    n = len(lows)
    if n == 0:
        return 1.0
    share = min(max(fragment_share, 0.0), 1.0)
    known = [(lo, hi) for lo, hi in zip(lows, highs, strict=True) if lo is not None and hi is not None]
    try:
        starts = sorted(lo for lo, _ in known)
        ends = sorted(hi for _, hi in known)
    except TypeError:  # values that do not compare (mixed types): no layout to go by
        return 1.0
    total = max(1, fragments)
    kept = share * total
    read = float(n - len(known))  # unknown bounds: read
    for lo, hi in known:
        # Files overlapping [lo, hi]: all but those starting after hi or ending before lo.
        overlapping = len(known) - (len(starts) - bisect_right(starts, hi)) - bisect_left(ends, lo)
        spanned = min(float(total), max(1.0, total * overlapping / n))
        read += 1.0 - (1.0 - spanned / total) ** kept
    return read / n


def share_to_the_percent(share: float) -> float:
    """A share of a table's files read, rounded to the percent: the estimates are not finer,
    so closer shares rank as ties."""
    return round(share, 2)


def skips_files(share: float) -> bool:
    """Whether a sketch expected to read ``share`` of a table's files skips any of them."""
    return share_to_the_percent(share) < 1.0


def reads_every_file(files: Sequence[DataFileInfo], attribute: str, fragments: int) -> bool:
    """Whether a sketch on ``attribute`` reads every file (to the percent) however little it
    keeps: one fragment kept already meets each of them, as on a column the layout scatters
    (every file spans about its whole range). Such a candidate ranks by files read behind any
    that skips some, whatever its estimate."""
    return not skips_files(files_read_on(files, attribute, 1.0 / max(1, fragments), fragments))
