"""The incremental metadata parser gives exactly PyIceberg's parse, file after file."""

from __future__ import annotations

from pathlib import Path

from pyiceberg.table.metadata import TableMetadataUtil

from sketch_core.datasets import synthetic_table
from sketch_core.service import SketchService
from sketch_core.tables.metadata_parse import MetadataParser


def test_parses_every_metadata_file_of_a_changing_table_like_pyiceberg(svc: SketchService, ns: str) -> None:
    name = f"{ns}.m"
    svc.tables.create(name, synthetic_table(2_000, groups=10, seed=1), sort_by=["key"])
    svc.tables.append(name, synthetic_table(50, groups=10, seed=2, key_start=10_000))
    svc.tables.delete(name, "key < 100")
    svc.tables.append(name, synthetic_table(50, groups=10, seed=3, key_start=20_000))
    location = svc.tables.catalog.load_table(name).metadata_location
    files = sorted(Path(location.removeprefix("file://")).parent.glob("*.metadata.json"))
    assert len(files) >= 4
    parser = MetadataParser()
    for path in files:  # oldest first: each parse reuses what the one before validated
        content = path.read_bytes()
        mine = parser.parse(content)
        assert mine == TableMetadataUtil.parse_raw(content.decode()), path.name
    assert len(mine.snapshots) >= 4
    # Parsing an older file again (fewer snapshots) does not keep the newer ones.
    again = parser.parse(files[1].read_bytes())
    assert again == TableMetadataUtil.parse_raw(files[1].read_text())
