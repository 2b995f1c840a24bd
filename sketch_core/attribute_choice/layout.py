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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
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


# A layout key's files may overlap this many files per fragment (itself included) on average:
# three where a sorted write cuts files inside a key's rows, so that each file shares a boundary
# value with the one before and the one after it (TPC-H SF10's `lineitem`, an order's lines
# split between two files: 2.3).
NEAR_DISJOINT_FILES = 3.0


# Where no candidate's sketch skips a file, a bounded one is taken for the smallest when it keeps
# at most this share of its fragments (TPC-H Q18's 100 customers of 10,000 fragments).
SMALL_SKETCH = 0.01


@dataclass(frozen=True)
class LayoutPick:
    """A table's attribute chosen from its files' bounds (see :func:`pick_by_layout`)."""

    attribute: str
    # The most fragments its sketch keeps (TopKBound), and the expected share of the files it
    # then reads; None where the plan bounds neither.
    fragments_at_most: int | None
    files_read: float | None


def pick_by_layout(
    files: Sequence[DataFileInfo],
    candidates: Sequence[str],
    sort_key: Sequence[str],
    fragment_count: Callable[[str], int],
    fragments_at_most: Callable[[str], int | None],
) -> LayoutPick | str:
    """The candidate a ranking by files read, then by size, puts first, where the files' bounds
    alone settle it; else why they do not (a sample's estimates must).

    Every sketch reads the files holding the query's provenance rows, on whatever attribute:
    those rows' fragments are kept, and each such file's range meets them. On the attribute the
    files hold disjoint ranges of (the layout key), a sketch reads little more, the few files a
    kept fragment's range crosses into; on any other, each file spans more of the range, and a
    kept fragment meets more files. So the layout key reads the fewest files, unless the
    provenance rows lie in every file: then every candidate reads every file, and the smallest
    sketch ranks first. That is ruled out where the plan bounds the layout key's sketch to
    fewer fragments than meet every file; where it does not bound it, it is assumed, unless
    another candidate has a bound (a report's group key on a table sorted by something else:
    its sketch may be the one that skips, once the advisor's layout is applied), or the layout
    key's files overlap (appends since the sorted write): both are left to the estimates.
    Where every candidate reads every file (no layout key, or a bound that meets every file),
    see :func:`_smallest_bounded`."""
    if not candidates:
        return "no candidate"
    one = {a: files_read_on(files, a, 1.0 / max(1, fragment_count(a)), fragment_count(a)) for a in candidates}
    key = sort_key[:1]
    best = min(candidates, key=lambda a: (share_to_the_percent(one[a]), a not in key, candidates.index(a)))
    if not skips_files(one[best]):
        return _smallest_bounded(candidates, key, fragment_count, fragments_at_most)
    overlapped = one[best] * len(files)
    if overlapped > NEAR_DISJOINT_FILES:
        return f"the files overlap on {best} ({overlapped:.1f} files per fragment)"
    most = fragments_at_most(best)
    if most is None:
        rivals = [a for a in candidates if fragments_at_most(a) is not None]
        if rivals:
            return f"{rivals[0]}'s sketch keeps a few fragments, {best}'s is not bounded"
        return LayoutPick(best, None, None)
    count = fragment_count(best)
    expected = files_read_on(files, best, min(1.0, most / max(1, count)), count)
    if not skips_files(expected):  # its few fragments still meet every file: as if all spanned
        return _smallest_bounded(candidates, key, fragment_count, fragments_at_most)
    return LayoutPick(best, most, expected)


def _smallest_bounded(
    candidates: Sequence[str],
    key: Sequence[str],
    fragment_count: Callable[[str], int],
    fragments_at_most: Callable[[str], int | None],
) -> LayoutPick | str:
    """Where every candidate's sketch reads every file, the smallest sketch ranks first: the
    candidate the plan bounds to the smallest share of its fragments, where that share is at
    most :data:`SMALL_SKETCH` (a sketch the estimates could beat by that little at most, and one
    that skips no file on any attribute); else the estimates must find it."""
    shares = {}
    for a in candidates:
        most = fragments_at_most(a)
        if most is not None:
            shares[a] = most / max(1, fragment_count(a))
    if not shares:
        return "every candidate's sketch reads every file, and the plan bounds none: the smallest ranks first"
    smallest = min(shares, key=lambda a: (shares[a], a not in key, candidates.index(a)))
    if shares[smallest] > SMALL_SKETCH:
        return f"every candidate's sketch reads every file; {smallest}'s keeps up to {shares[smallest]:.0%}"
    return LayoutPick(smallest, fragments_at_most(smallest), 1.0)
