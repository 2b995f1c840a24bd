"""Where a new table's files go (sketch_core.tables.locations), with a made-up file system."""

from __future__ import annotations

from pathlib import Path

from sketch_core.tables.locations import location_taken, new_table_location, purge_location


def test_a_free_default_location_is_used_as_it_is() -> None:
    assert new_table_location("file:///w/ns/t/", lambda _: False) == "file:///w/ns/t"


def test_a_taken_location_gets_a_unique_one_beside_it() -> None:
    taken = {"file:///w/ns/t"}
    chosen = new_table_location("file:///w/ns/t", lambda location: location in taken)
    assert chosen.startswith("file:///w/ns/t-") and len(chosen) == len("file:///w/ns/t-") + 8
    assert new_table_location("file:///w/ns/t", lambda location: location in taken) != chosen


def test_purging_deletes_the_table_files_and_keeps_what_is_not_ours(tmp_path: Path) -> None:
    table = tmp_path / "t"
    (table / "data").mkdir(parents=True)
    (table / "metadata").mkdir()
    (table / "data" / "a.parquet").write_bytes(b"x" * 10)
    (table / "metadata" / "v1.metadata.json").write_text("{}")
    uri = table.as_uri()
    assert location_taken(uri)
    removed = purge_location(uri)
    assert (removed.files, removed.bytes) == (2, 12)
    assert not location_taken(uri), "nothing else was there: the directory goes too"

    (table / "data").mkdir(parents=True)
    (table / "data" / "b.parquet").write_bytes(b"y")
    (table / "notes.txt").write_text("mine")
    assert purge_location(uri).files == 1
    assert (table / "notes.txt").exists() and not (table / "data" / "b.parquet").exists()
