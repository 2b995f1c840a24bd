"""A file's bounds decode on first use, each column once, to the values an eager decode gave."""

from __future__ import annotations

import datetime as dt
import pickle
from types import SimpleNamespace
from typing import Any

import pytest
from pyiceberg.conversions import to_bytes
from pyiceberg.schema import Schema
from pyiceberg.types import DateType, LongType, NestedField, StringType

from sketch_core.tables import statistics
from sketch_core.tables.statistics import describe_bounds

SCHEMA = Schema(
    NestedField(1, "key", LongType(), required=False),
    NestedField(2, "day", DateType(), required=False),
    NestedField(3, "name", StringType(), required=False),
)


def raw(field: Any, value: Any) -> bytes:
    return to_bytes(field, value)


def described() -> Any:
    lower = {1: raw(LongType(), 5), 2: raw(DateType(), 19_000), 3: raw(StringType(), "ann"), 9: b"x"}
    upper = {1: raw(LongType(), 70), 2: raw(DateType(), 19_010), 3: raw(StringType(), "zed")}
    return describe_bounds("f.parquet", 10, 100, lower, upper, {1: 0, 2: 3}, SCHEMA)


def test_bounds_decode_only_the_columns_read(monkeypatch: pytest.MonkeyPatch) -> None:
    decoded: list[bytes] = []
    real = statistics._python_value

    def counting(kind: Any, value: bytes) -> Any:
        decoded.append(value)
        return real(kind, value)

    monkeypatch.setattr(statistics, "_python_value", counting)
    info = described()
    assert decoded == [], "nothing is decoded when the file is described"
    assert info.lower.get("key") == 5 and info.upper["key"] == 70
    assert info.lower["key"] == 5
    assert len(decoded) == 2, "each column once, when first read"
    assert info.lower.get("missing") is None and "missing" not in info.upper


def test_lazy_bounds_equal_the_eager_decode() -> None:
    info = described()
    # The field id the schema does not know (9) is left out, as before.
    assert dict(info.lower) == {"key": 5, "day": dt.date(2022, 1, 8), "name": "ann"}
    assert info.upper == {"key": 70, "day": dt.date(2022, 1, 18), "name": "zed"}
    assert info == described() and info.null_counts == {"key": 0, "day": 3}
    assert sorted(info.lower) == ["day", "key", "name"] and len(info.upper) == 3
    assert pickle.loads(pickle.dumps(info)) == info, "pins travel to other processes"


def test_a_commits_recorded_form_describes_the_file_as_its_manifest_entry_does() -> None:
    from sketch_core.tables.file_changes import _recorded_file

    entry = SimpleNamespace(  # the DataFile fields the recorded form keeps
        file_path="f.parquet",
        record_count=10,
        file_size_in_bytes=100,
        lower_bounds={1: raw(LongType(), 5), 2: raw(DateType(), 19_000), 9: b"x"},
        upper_bounds={1: raw(LongType(), 70), 3: raw(StringType(), "zed")},
        null_value_counts={1: 0, 2: 3, 9: 1},
    )
    recorded = _recorded_file(entry)  # type: ignore[arg-type]
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in recorded["lower"].items())
    from_record = describe_bounds(
        "f.parquet", 10, 100, recorded["lower"], recorded["upper"], recorded["nulls"], SCHEMA, recorded=True
    )
    from_manifest = describe_bounds(
        "f.parquet", 10, 100, entry.lower_bounds, entry.upper_bounds, entry.null_value_counts, SCHEMA
    )
    assert from_record == from_manifest
    assert dict(from_record.lower) == {"key": 5, "day": dt.date(2022, 1, 8)}
    assert from_record.upper.get("day") is None and from_record.upper["name"] == "zed"
    assert dict(from_record.null_counts) == {"key": 0, "day": 3}, "an id the schema lacks is left out"
    assert from_record.null_counts.get("name", 1) == 1
    assert pickle.loads(pickle.dumps(from_record)) == from_record


def test_a_schemas_names_are_worked_out_once_and_follow_a_new_schema() -> None:
    assert statistics.field_names(SCHEMA) is statistics.field_names(SCHEMA)
    renamed = Schema(NestedField(1, "id", LongType(), required=False))
    assert statistics.field_names(renamed).by_id == {1: ("id", LongType())}
    info = describe_bounds("f.parquet", 1, 1, {1: raw(LongType(), 5)}, {}, {}, renamed)
    assert dict(info.lower) == {"id": 5} and "key" not in info.lower


def test_names_are_right_for_many_schemas_used_by_many_threads_at_once() -> None:
    from concurrent.futures import ThreadPoolExecutor

    schemas = [Schema(NestedField(1, f"c{i}", LongType(), required=False)) for i in range(100)]

    def names_of(i: int) -> bool:
        return all(
            statistics.field_names(schemas[(i + k) % 100]).by_id[1][0] == f"c{(i + k) % 100}"
            for k in range(50)
        )

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(names_of, range(400)))
