"""A query's candidate attributes per table, by where they come from (pure; CBS Sec. 9)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from sketch_core.algebra.ir import Relation, positive_scans
from sketch_core.analysis.safety import group_by_attributes, ordering_attributes
from sketch_core.attribute_choice.strategies import TableCandidates

# (table, attribute) -> None when a sketch on it alone is safe for the query, else the reason.
SafetyCheck = Callable[[str, str], str | None]


def columns_read(plan: Relation) -> dict[str, list[str]]:
    """Per table the query reads rows from (not only under an anti join), the columns it reads."""
    read: dict[str, list[str]] = {}
    for scan in positive_scans(plan):
        used = read.setdefault(scan.table, [])
        used += [c for c in scan.source_columns if c not in used]
    return read


def table_candidates(
    plan: Relation,
    columns: Mapping[str, Sequence[str]],
    sort_keys: Mapping[str, Sequence[str]],
    unsafe_because: SafetyCheck,
) -> tuple[dict[str, TableCandidates], dict[str, list[tuple[str, str]]]]:
    """Per table the query reads rows from (not only under an anti join), its safe attributes:
    all of its columns, those the query reads, its group-by attributes and its sort key; and the
    unsafe ones with the reasons."""
    read = columns_read(plan)
    grouped, ordered = group_by_attributes(plan), ordering_attributes(plan)
    tables: dict[str, TableCandidates] = {}
    refused: dict[str, list[tuple[str, str]]] = {}
    for table, used in read.items():
        safe = []
        for attribute in columns[table]:
            reason = unsafe_because(table, attribute)
            if reason is None:
                safe.append(attribute)
            else:
                refused.setdefault(table, []).append((attribute, reason))
        tables[table] = TableCandidates(
            all=tuple(safe),
            used=tuple(a for a in safe if a in used),
            group_by=tuple(a for a in safe if a in grouped.get(table, [])),
            key=tuple(a for a in sort_keys.get(table, ()) if a in safe),
            ordered_by=tuple(a for a in safe if a in ordered.get(table, [])),
        )
    return tables, refused
