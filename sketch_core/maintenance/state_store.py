"""Operator state on disk: one directory per sketch version under the warehouse, written
completely before the version that refers to it is published, as the whole state or as layers
of changes on a base (see :class:`StateStore`)."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from sketch_core.arrow.files import read_arrow, write_arrow
from sketch_core.errors import StateMissingError
from sketch_core.incremental.engine import IncrementalSketch
from sketch_core.incremental.state import STATE_FORMAT
from sketch_core.lru import LruMap

# A stored state is a whole state plus at most this many layers of changes; the next write
# after that stores the whole state again, so a restore reads a bounded number of files.
MAX_STATE_LAYERS = 64
# ... and the layers together hold at most this fraction of the whole state's entries: then a
# restore reads at most that much more than the whole state, and rewriting the whole state
# (hundreds of milliseconds for tens of thousands of groups) is paid once per that many changes,
# not once per so many runs.
MAX_LAYERED_FRACTION = 0.5


class StateStore:
    """Operator state files under the warehouse: one directory per sketch version, one Arrow
    IPC file per operator. A directory holds the whole state, or the changes to the state of
    the directory its manifest names as ``base`` (same sketch). A directory is written
    completely before the version that refers to it is published, and never changed after;
    one that no version refers to, directly or as a base, is garbage (a run that died)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        # Manifests read or written here, by directory: a directory never changes once written,
        # and every maintenance run asks its base's twice (~0.2 ms a read).
        self._manifests: LruMap[str, dict[str, Any]] = LruMap(_MANIFESTS_KEPT)

    def write(
        self,
        sketch: str,
        tables: Mapping[str, pa.Table],
        base: str | None = None,
        keep_top: int | None = None,
        changed_entries: int = 0,
    ) -> str:
        """Store ``tables``: a whole state, or with ``base`` the changes to that state
        (``changed_entries`` of them, summed along the chain of layers).
        ``keep_top``: the m its min/max and top-k values were cut to (None: kept in full)."""
        depth, layered = 0, 0
        if base is not None:
            base_depth, base_layered = self.layers(base)
            depth, layered = base_depth + 1, base_layered + changed_entries
        directory = self.root / state_directory_name(sketch) / uuid.uuid4().hex
        directory.mkdir(parents=True)
        for name, table in tables.items():
            # In place: no version refers to the new directory (nor reads it) until it is
            # published, after its manifest is written, last.
            write_arrow(directory / f"{name}.arrow", table, in_place=True)
        manifest = {
            "format": STATE_FORMAT,
            "files": sorted(tables),
            "base": Path(base).name if base is not None else None,
            "depth": depth,
            "layered": layered,
            "keep_top": keep_top,
        }
        (directory / "manifest.json").write_text(json.dumps(manifest))
        self._manifests.put(str(directory), manifest)
        return str(directory)

    def depth(self, ref: str) -> int:
        """How many layers of changes the state at ``ref`` has on top of a whole state."""
        return self.layers(ref)[0]

    def layers(self, ref: str) -> tuple[int, int]:
        """The state at ``ref``'s layers of changes on top of a whole state, and the entries
        changed in them (0 and 0 for a whole state)."""
        manifest = self._manifest(ref)
        depth = int(manifest.get("depth", 0))
        if "layered" in manifest:
            return depth, int(manifest["layered"])
        return depth, 0 if depth == 0 else _UNKNOWN_LAYERED  # written before it was counted

    def keep_top(self, ref: str) -> int | None:
        """The m the state's ordered values were cut to (None: kept in full)."""
        value = self._manifest(ref).get("keep_top")
        return int(value) if value else None

    def read(self, ref: str) -> list[dict[str, pa.Table]]:
        """The layers of the state at ``ref``, oldest (the whole state) first."""
        layers: list[dict[str, pa.Table]] = []
        directory: Path | None = Path(ref)
        while directory is not None:
            manifest = self._manifest(str(directory))
            try:
                layers.append({name: read_arrow(directory / f"{name}.arrow") for name in manifest["files"]})
            except FileNotFoundError as exc:  # deleted since its manifest was read
                raise StateMissingError(str(directory)) from exc
            directory = directory.parent / manifest["base"] if manifest.get("base") else None
        return layers[::-1]

    def chain(self, ref: str) -> list[Path]:
        """The directories the state at ``ref`` is read from (it and its bases); a missing one
        ends the chain (reading it would fail, and collecting must not)."""
        found: list[Path] = []
        directory: Path | None = Path(ref)
        while directory is not None and directory not in found:
            found.append(directory)
            try:
                manifest = self._manifest(str(directory))
            except StateMissingError:
                break
            directory = directory.parent / manifest["base"] if manifest.get("base") else None
        return found

    def collect(self, live_refs: Iterable[str], older_than: float) -> int:
        """Delete state directories no live reference reads (directly or as a base) whose
        files are older than ``older_than`` (epoch seconds): those of expired versions, dropped
        sketches and runs that died before publishing. Returns how many were deleted."""
        live = {d.resolve() for ref in live_refs for d in self.chain(ref)}
        deleted = 0
        if not self.root.is_dir():
            return 0
        for sketch_dir in self.root.iterdir():
            if not sketch_dir.is_dir():
                continue
            for directory in sketch_dir.iterdir():
                if directory.resolve() in live or directory.stat().st_mtime >= older_than:
                    continue
                shutil.rmtree(directory, ignore_errors=True)
                self._manifests.pop(str(directory))
                deleted += 1
            if not any(sketch_dir.iterdir()):
                sketch_dir.rmdir()
        return deleted

    def _manifest(self, ref: str) -> dict[str, Any]:
        known = self._manifests.get(ref)
        if known is not None:
            return known
        try:
            manifest: dict[str, Any] = json.loads((Path(ref) / "manifest.json").read_text())
        except FileNotFoundError as exc:
            raise StateMissingError(ref) from exc
        if manifest.get("format") not in _READABLE_FORMATS:
            raise StateMissingError(ref, f"state format {manifest.get('format')}, expected {STATE_FORMAT}")
        self._manifests.put(ref, manifest)
        return manifest


_READABLE_FORMATS = (STATE_FORMAT,)
_MANIFESTS_KEPT = 1024
# Layers written without their entry count: treated as big enough to rewrite the whole state.
_UNKNOWN_LAYERED = 1 << 62


_PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}")


def state_directory_name(sketch: str) -> str:
    """The directory a sketch's state goes in: its name when that is a plain file name, else
    a digest of it. Sketch names are the user's (quotes, slashes, ``..`` included); a name must
    never place files outside the state root."""
    if _PLAIN_NAME.fullmatch(sketch) and ".." not in sketch:
        return sketch
    return "sketch-" + hashlib.sha256(sketch.encode()).hexdigest()[:24]


def store_state(store: StateStore, sketch: str, engine: IncrementalSketch, base: str | None) -> str:
    """Store the engine's state for a new version: as the changes to ``base`` (the stored state
    the engine was at), unless the chain of layers gets too long or, with these changes, holds
    more than :data:`MAX_LAYERED_FRACTION` of the state (then the whole state is written)."""
    changed = engine.changed_entries()
    depth, layered = store.layers(base) if base is not None else (0, 0)
    if (
        depth + 1 >= MAX_STATE_LAYERS
        or layered + changed > MAX_LAYERED_FRACTION * engine.state_entries()
        or engine.blooms_dropped
    ):
        base = None
    tables = engine.state_tables(changes_only=base is not None)
    ref = store.write(sketch, tables, base, engine.keep_top, changed_entries=changed)
    engine.mark_stored()
    return ref
