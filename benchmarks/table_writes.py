"""Table write benchmark: the time of a small load's commit, with PyIceberg's transaction as it
comes and with ``MemoizedTransaction`` (sketch_core/tables/transactions.py), side by side.

A synthetic table of ``--rows`` rows, sorted by its group attribute; then ``--commits`` commits
alternating between appending ``--delta`` new rows and deleting ``--delta`` scattered rows (a
copy-on-write delete rewrites each file it touches), each kind of transaction taking every
other commit. Prints the median seconds per kind of commit and the ratios.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from pyiceberg.table import Table, Transaction

from benchmarks.stack import bench_service
from sketch_core.config import Settings
from sketch_core.datasets import DeltaGenerator
from sketch_core.datasets.synthetic import synthetic_table
from sketch_core.tables.transactions import transaction as memoized

TRANSACTIONS: dict[str, Callable[[Table], Transaction]] = {
    "pyiceberg": lambda table: table.transaction(),
    "memoized": memoized,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--delta", type=int, default=20)
    parser.add_argument("--commits", type=int, default=40, help="per kind of transaction")
    args = parser.parse_args()
    home = Settings.from_env().warehouse.parent
    with bench_service(0.01, home, prefix="writes_") as svc:
        name = f"writes_{int(time.time() * 1000)}.facts"
        svc.tables.create(name, synthetic_table(args.rows, 5000, seed=1), sort_by=["a"])
        deltas = DeltaGenerator(svc.tables, name, ("key",), seed=2)
        times: dict[tuple[str, str], list[float]] = {}
        try:
            for index in range(2 * args.commits):
                kind = "append" if index % 2 == 0 else "delete"
                delta = deltas.inserts(args.delta) if kind == "append" else deltas.deletes(args.delta)
                # Alternate the transactions per pair of commits, so both see the same history.
                label = list(TRANSACTIONS)[(index // 2) % 2]
                svc.tables.new_transaction = TRANSACTIONS[label]
                started = time.perf_counter()
                delta.apply(svc.tables)
                times.setdefault((kind, label), []).append(time.perf_counter() - started)
        finally:
            svc.tables.new_transaction = memoized
            svc.drop_table(name)
    print(f"{args.rows:,} rows, {args.delta} rows per commit, {args.commits} commits per transaction kind")
    for kind in ("append", "delete"):
        plain, memo = (statistics.median(times[(kind, label)]) for label in TRANSACTIONS)
        ratio = plain / memo
        print(f"  {kind}: pyiceberg {plain * 1000:.1f} ms, memoized {memo * 1000:.1f} ms ({ratio:.2f}x)")


if __name__ == "__main__":
    main()
