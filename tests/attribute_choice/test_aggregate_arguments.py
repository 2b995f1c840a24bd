"""Aggregate arguments of any type become the doubles the estimators take (see ``_as_numbers``)."""

from __future__ import annotations

import datetime
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest

from sketch_core.attribute_choice.query import NotEstimable, _as_numbers


def _numbers(values: list[object], kind: pa.DataType) -> list[float]:
    return _as_numbers(pa.chunked_array([pa.array(values, kind)]), "max").tolist()


def test_orderable_values_keep_their_order_and_nulls_become_nan() -> None:
    day = datetime.date(2024, 2, 29)
    assert _numbers([day, None], pa.date32())[0] == (day - datetime.date(1970, 1, 1)).days
    moments = [datetime.datetime(2024, 1, 1, 12), datetime.datetime(2023, 5, 1), None]
    stamps = _numbers(moments, pa.timestamp("us"))
    assert stamps[0] > stamps[1] and np.isnan(stamps[2])
    ranks = _numbers(["pear", None, "apple", "pear", "fig"], pa.string())
    assert np.isnan(ranks[1])
    assert ranks[2] < ranks[4] < ranks[0] == ranks[3]  # apple < fig < pear, ties equal
    assert _numbers([True, None, False], pa.bool_())[0] == 1.0
    assert _numbers([Decimal("1.50"), None], pa.decimal128(5, 2))[0] == 1.5


def test_values_without_an_order_are_not_estimated() -> None:
    with pytest.raises(NotEstimable, match="MAX over list"):
        _numbers([[1, 2], None], pa.list_(pa.int64()))
