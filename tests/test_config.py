"""Defaults that depend on the machine."""

from __future__ import annotations

import pytest

from sketch_core import config
from sketch_core.config import MIB, Settings, default_file_cache_mb

GIB = 1024 * MIB


@pytest.mark.parametrize(
    ("memory", "expected"),
    [(4 * GIB, 512), (8 * GIB, 512), (24 * GIB, 1536), (32 * GIB, 2048), (256 * GIB, 2048)],
)
def test_file_cache_is_a_sixteenth_of_memory_between_512_mib_and_2_gib(
    monkeypatch: pytest.MonkeyPatch, memory: int, expected: int
) -> None:
    page = 4096
    sizes = {"SC_PAGE_SIZE": page, "SC_PHYS_PAGES": memory // page}
    monkeypatch.setattr(config.os, "sysconf", lambda name: sizes[name])
    assert default_file_cache_mb() == expected
    monkeypatch.delenv("SKETCH_FILE_CACHE_MB", raising=False)
    assert Settings.from_env().file_cache_bytes == expected * MIB


def test_file_cache_falls_back_to_512_mib_where_memory_is_not_told(monkeypatch: pytest.MonkeyPatch) -> None:
    def unknown(name: str) -> int:
        raise ValueError(f"unrecognized configuration name {name}")

    monkeypatch.setattr(config.os, "sysconf", unknown)
    assert default_file_cache_mb() == 512


def test_file_cache_setting_overrides_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKETCH_FILE_CACHE_MB", "64")
    assert Settings.from_env().file_cache_bytes == 64 * MIB
    monkeypatch.setenv("SKETCH_FILE_CACHE_MB", "0")
    assert Settings.from_env().file_cache_bytes == 0
