from __future__ import annotations

from collections.abc import Iterator

import pytest

from sketch_core import faults


@pytest.fixture(autouse=True)
def rearmed_faults() -> Iterator[None]:
    """Each test's faults fire afresh (a fault fires once per process)."""
    faults.reset()
    yield
    faults.reset()
