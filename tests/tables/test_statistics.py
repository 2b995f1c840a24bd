"""A file's bounds decode on first use, each column once, to the values an eager decode gave."""

from __future__ import annotations

import datetime as dt
import pickle
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
