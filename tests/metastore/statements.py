"""Counting the SQL statements a piece of code sends: how the tests hold reads to a bound."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine, event


@contextmanager
def counted_statements(engine: Engine) -> Iterator[list[str]]:
    """The statements sent through ``engine`` inside the block, in order."""
    statements: list[str] = []

    def count(_conn: object, _cursor: object, statement: str, *_: object) -> None:
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", count)
    try:
        yield statements
    finally:
        event.remove(engine, "before_cursor_execute", count)
