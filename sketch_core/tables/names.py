"""Validation of ``namespace.table`` names (pure)."""

from __future__ import annotations

import re

from sketch_core.errors import InvalidTableNameError

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*$")


def normalize_table_name(name: str) -> str:
    """Lower-cased ``ns.table``; Spark resolves names case-insensitively, so we store one form."""
    if not isinstance(name, str) or not _NAME.match(name.strip()):
        raise InvalidTableNameError(str(name))
    return name.strip().lower()


def split_table_name(name: str) -> tuple[str, str]:
    namespace, table = normalize_table_name(name).split(".")
    return namespace, table
