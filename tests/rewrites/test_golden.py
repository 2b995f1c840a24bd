"""Golden tests for the capture and use rewrites: input SQL -> expected capture SQL and use SQL.

Each file in golden/ has three sections, ``-- input``, ``-- capture`` and ``-- use``. Set
UPDATE_GOLDEN=1 to rewrite the expected sections after a deliberate change, then review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sqlglot import exp

from sketch_core.algebra.frontend import to_ir
from sketch_core.algebra.printer import to_sql
from sketch_core.partitions import RangePartition
from sketch_core.rewrites.capture import instrument_capture
from sketch_core.rewrites.use import instrument_use, sketch_condition

GOLDEN = Path(__file__).parent / "golden"
SCHEMAS = {
    "s.sales": [("id", "bigint"), ("region", "string"), ("amount", "double"), ("day", "date")],
    "s.regions": [("region", "string"), ("country", "string")],
}
# The sketches the use rewrite applies: sales on id (cuts 100, 200, 300), fragments {1, 2}.
PARTITIONS = {"s.sales": RangePartition("s.sales", "id", (100, 200, 300))}
FRAGMENTS = {"s.sales": [1, 2]}


def sections(text: str) -> dict[str, str]:
    found: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("-- ") and line[3:].strip() in ("input", "capture", "use"):
            current = line[3:].strip()
            found[current] = []
        elif current is not None:
            found[current].append(line)
    return {k: "\n".join(v).strip() for k, v in found.items()}


def rewrite(sql: str) -> dict[str, str]:
    parsed = to_ir(sql, SCHEMAS)
    capture = instrument_capture(parsed.plan, attributes={t: p.attribute for t, p in PARTITIONS.items()})
    used, _ = instrument_use(
        parsed.plan,
        {t: (p.attribute, sketch_condition(p, FRAGMENTS[t])) for t, p in PARTITIONS.items()},
    )
    return {
        "capture": "\n".join(
            [
                to_sql(capture.rows, pretty=True),
                *(f"-- delayed: {n} = fragment of {c}" for n, c in sorted(capture.delayed.items())),
                *(f"-- set: {n}" for n in sorted(capture.sets)),
            ]
        ),
        "use": to_sql(used, output_names=parsed.output_names, pretty=True),
    }


@pytest.mark.parametrize("path", sorted(GOLDEN.glob("*.sql")), ids=lambda p: p.stem)
def test_rewrites_match_golden_files(path: Path) -> None:
    expected = sections(path.read_text())
    actual = rewrite(expected["input"])
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(
            f"-- input\n{expected['input']}\n\n-- capture\n{actual['capture']}\n\n-- use\n{actual['use']}\n"
        )
        return
    assert actual["capture"] == expected.get("capture"), f"capture SQL changed for {path.name}"
    assert actual["use"] == expected.get("use"), f"use SQL changed for {path.name}"


def test_there_are_golden_files() -> None:
    assert len(list(GOLDEN.glob("*.sql"))) >= 6


def test_a_table_without_row_condition_is_still_marked_for_pruned_files() -> None:
    parsed = to_ir(
        "SELECT r.country, SUM(s.amount) FROM s.sales s JOIN s.regions r ON s.region = r.region "
        "GROUP BY r.country",
        SCHEMAS,
    )
    used, filtered = instrument_use(parsed.plan, {"s.sales": ("id", None)})
    assert [scan.table for scan in filtered] == ["s.sales"]
    assert to_sql(used) == to_sql(parsed.plan)  # no condition added


def test_a_sketch_condition_keeps_its_precedence_inside_other_conditions() -> None:
    condition = sketch_condition(RangePartition("s.sales", "id", (100, 200, 300)), [0, 3])
    combined = exp.and_(condition(exp.column("id")), exp.column("flag"))
    assert combined.sql(dialect="spark") == "(id < 100 OR id >= 300) AND flag"
