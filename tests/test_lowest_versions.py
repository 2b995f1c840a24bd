"""The lower-bound check's own logic (``make check-lowest`` runs it against the real index)."""

from __future__ import annotations

from packaging.version import Version

from scripts.check_lowest_versions import lower_bounds, raised_bounds


def test_each_dependency_gets_its_lowest_allowed_version() -> None:
    bounds = lower_bounds(["psycopg[binary]>=3.2.1,<4", "pyspark==4.2.0", "Rich>=13.8", "anything"])
    assert bounds == {"psycopg": Version("3.2.1"), "pyspark": Version("4.2.0"), "rich": Version("13.8")}


def test_a_bound_another_dependency_raises_is_named_with_the_version_to_raise_it_to() -> None:
    bounds = {"rich": Version("13.6"), "typer": Version("0.26.1")}
    installed = {"rich": Version("13.8.0"), "typer": Version("0.26.1")}
    (raised,) = raised_bounds(bounds, installed)
    assert "rich" in raised and "13.6" in raised and "13.8.0" in raised
    assert raised_bounds(bounds, {**installed, "rich": Version("13.6.0")}) == []
