"""PyIceberg's ``Transaction`` with its staged metadata computed once per change.

``Transaction.table_metadata`` applies the staged updates to the table's metadata, and deep-
copies the result, on every read; a copy-on-write delete reads it for every file it rewrites,
and a table with some history makes each copy cost milliseconds (a quarter of a 20-row delete
on a 1M-row table went to them). The result depends only on the base metadata and the staged
updates, and both are immutable (frozen models, a tuple that staging replaces): so it is kept
until either is replaced.
"""

from __future__ import annotations

from pyiceberg.table import Table, Transaction
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.update import TableUpdate, update_table_metadata


class MemoizedTransaction(Transaction):  # type: ignore[misc]
    _memo: tuple[TableMetadata, tuple[TableUpdate, ...], TableMetadata] | None = None

    @property
    def table_metadata(self) -> TableMetadata:
        base, updates = self._table.metadata, self._updates
        memo = self._memo
        # Identity, not equality: holding both keeps them alive, so an id is never reused.
        if memo is None or memo[0] is not base or memo[1] is not updates:
            memo = (base, updates, update_table_metadata(base, updates))
            self._memo = memo
        return memo[2]


def transaction(table: Table) -> Transaction:
    """A transaction on ``table`` (what ``table.transaction()`` gives, memoized)."""
    return MemoizedTransaction(table)
