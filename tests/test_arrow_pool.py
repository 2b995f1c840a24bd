"""The service's choice of Arrow allocator (see sketch_core/arrow/pool.py)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from sketch_core.arrow.pool import use_arrow_memory_pool
from sketch_core.config import Settings
from sketch_core.errors import ConfigurationError


@pytest.fixture
def restored_pool() -> object:
    before = pa.default_memory_pool()
    yield before
    pa.set_memory_pool(before)


def test_the_named_pool_becomes_the_default_and_default_leaves_it(restored_pool: object) -> None:
    use_arrow_memory_pool("mimalloc")
    assert pa.default_memory_pool().backend_name == "mimalloc"
    use_arrow_memory_pool("default")
    assert pa.default_memory_pool().backend_name == "mimalloc"
    use_arrow_memory_pool("system")
    assert pa.default_memory_pool().backend_name == "system"
    assert pa.array(range(1000)).nbytes > 0  # allocations go through it
    with pytest.raises(ConfigurationError, match="unknown Arrow memory pool 'tcmalloc'"):
        use_arrow_memory_pool("tcmalloc")


def test_the_setting_defaults_to_the_system_allocator_and_is_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SKETCH_ARROW_MEMORY_POOL", raising=False)
    assert Settings.from_env().arrow_memory_pool == "system"
    monkeypatch.setenv("SKETCH_ARROW_MEMORY_POOL", "jemalloc")
    assert Settings.from_env().arrow_memory_pool == "jemalloc"
    monkeypatch.setenv("SKETCH_ARROW_MEMORY_POOL", "fast")
    with pytest.raises(ConfigurationError, match="SKETCH_ARROW_MEMORY_POOL"):
        Settings.from_env()


def test_a_service_allocates_with_its_settings_pool(spark_svc: object) -> None:
    assert pa.default_memory_pool().backend_name == "system"
