"""Parsed queries kept by (SQL, table schemas, parameters).

A scheduled report sends the same SQL over the same schemas on every run; parsing, qualifying
and normalizing it costs milliseconds each time, which a report that runs without its sketch
(the cost model chose to skip it) would otherwise pay on top of the plain query. The IR is
immutable, so one parse serves every run. Errors are not kept: a query that fails to parse is
rare and re-raises the same error.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from sketch_core.algebra.frontend import ParsedQuery, TableSchemas, to_ir

DEFAULT_ENTRIES = 256

_Key = tuple[str, tuple[tuple[str, tuple[tuple[str, str], ...]], ...], str]


class ParsedQueryCache:
    """``to_ir`` with the most recently used ``entries`` results kept."""

    def __init__(self, entries: int = DEFAULT_ENTRIES) -> None:
        self.entries = entries
        self._parsed: OrderedDict[_Key, ParsedQuery] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def to_ir(self, sql: str, schemas: TableSchemas, params: Mapping[str, Any] | None = None) -> ParsedQuery:
        key = _key(sql, schemas, params)
        parsed = self._parsed.get(key)
        if parsed is not None:
            self._parsed.move_to_end(key)
            self.hits += 1
            return parsed
        self.misses += 1
        parsed = to_ir(sql, schemas, params)
        self._parsed[key] = parsed
        if len(self._parsed) > self.entries:
            self._parsed.popitem(last=False)
        return parsed


def _key(sql: str, schemas: TableSchemas, params: Mapping[str, Any] | None) -> _Key:
    tables = tuple(sorted((name, tuple((c, str(ty)) for c, ty in cols)) for name, cols in schemas.items()))
    # repr keeps the values' types apart (1, 1.0, "1", a date and its ISO string differ).
    bound = repr(sorted((params or {}).items()))
    return (sql, tables, bound)
