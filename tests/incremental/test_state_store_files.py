"""A stored state's manifests are read once per process, and a state whose files are gone is
still reported as missing (a typed error, which ``auto`` answers with a recapture)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from sketch_core.errors import StateMissingError
from sketch_core.maintenance import state_store
from sketch_core.maintenance.state_store import StateStore


def test_manifests_are_read_once_and_a_deleted_state_is_still_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = StateStore(tmp_path)
    base = store.write("s", {"agg": pa.table({"k": [1, 2]})}, keep_top=5)
    layer = store.write("s", {"agg": pa.table({"k": [3]})}, base=base, changed_entries=1)
    reads: list[str] = []
    real_loads = state_store.json.loads
    monkeypatch.setattr(state_store.json, "loads", lambda text: reads.append(text) or real_loads(text))
    assert store.layers(layer) == (1, 1) and store.keep_top(base) == 5
    assert [t["agg"]["k"].to_pylist() for t in store.read(layer)] == [[1, 2], [3]]
    assert reads == [], "written here: known without reading the manifests back"

    other = StateStore(tmp_path)  # another process
    assert other.layers(layer) == (1, 1) and other.layers(layer) == (1, 1)
    assert len(reads) == 1, "read from disk once"

    shutil.rmtree(base)  # lost behind the store's back (a manual cleanup, another host's GC)
    for each in (store, other):
        with pytest.raises(StateMissingError) as info:
            each.read(layer)
        assert info.value.ref == base


def test_collected_states_are_forgotten(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    ref = store.write("s", {"agg": pa.table({"k": [1]})})
    assert store.collect([], older_than=float("inf")) == 1
    assert not Path(ref).exists()
    with pytest.raises(StateMissingError):
        store.layers(ref)
