"""A snapshot's file list: sorted by path after a change, and what is known of it carried over
only where it still holds (checked against the same sums worked out afresh)."""

from __future__ import annotations

import random

import pytest

from sketch_core.tables.pinned import OTHER_FORMATS, DataFileInfo, DataFiles


def _file(n: int, rows: int, *, deletes: tuple[str, ...] = (), suffix: str = ".parquet") -> DataFileInfo:
    return DataFileInfo(f"s3://t/data/{n:05d}{suffix}", rows, rows * 10, deletes=deletes)


def _fresh(files: DataFiles) -> tuple[int, bool, str | None, frozenset[str]]:
    # Every sum worked out again from the files themselves.
    return (
        sum(f.record_count for f in files),
        any(f.deletes for f in files),
        next((f.path for f in files if f.path.endswith(OTHER_FORMATS)), None),
        frozenset(f.path for f in files),
    )


def _known(files: DataFiles) -> tuple[int, bool, str | None, frozenset[str]]:
    return files.record_count, files.has_deletes, files.other_format, files.paths


@pytest.mark.parametrize("seed", range(20))
def test_a_change_keeps_the_files_sorted_and_what_is_known_of_them_right(seed: int) -> None:
    rng = random.Random(seed)
    numbers = rng.sample(range(10_000), 60)
    files = DataFiles.sorted(_file(n, rng.randint(1, 1000)) for n in numbers[:40])
    _known(files)  # worked out before the change: carried over by it
    removed = {f.path for f in rng.sample(list(files), rng.randint(0, 5))}
    removed |= {_file(n, 1).path for n in numbers[55:57]} if seed % 2 else set()  # not listed: no-ops
    added = [
        _file(
            n,
            rng.randint(1, 1000),
            deletes=("s3://t/deletes/d.parquet",) if rng.random() < 0.1 else (),
            suffix=".orc" if rng.random() < 0.1 else ".parquet",
        )
        for n in numbers[40 : 40 + rng.randint(0, 20)]
    ]
    after = files.changed(removed, added)
    assert list(after) == sorted([*(f for f in files if f.path not in removed), *added], key=lambda f: f.path)
    assert _known(after) == _fresh(after)


def test_what_a_removed_file_made_true_is_worked_out_again() -> None:
    with_deletes = _file(1, 5, deletes=("s3://t/deletes/d.parquet",))
    orc = _file(2, 7, suffix=".orc")
    files = DataFiles.sorted([with_deletes, orc, _file(3, 11)])
    assert _known(files) == (23, True, orc.path, files.paths)
    after = files.changed({with_deletes.path, orc.path}, [_file(4, 2)])
    assert _known(after) == (13, False, None, frozenset({_file(3, 1).path, _file(4, 1).path}))


def test_files_are_found_by_path_and_absent_paths_are_left_out() -> None:
    files = DataFiles.sorted(_file(n, n) for n in (9, 3, 7, 1))
    assert files.with_paths([_file(7, 0).path, _file(5, 0).path, _file(1, 0).path]) == [files[0], files[2]]
    assert files.with_paths([]) == []
    assert DataFiles().with_paths([_file(1, 0).path]) == []


def test_a_pin_listed_by_hand_gets_its_files_sorted_with_their_sums() -> None:
    import pyarrow as pa

    from sketch_core.tables.pinned import PinnedSnapshot

    listed = (_file(3, 4), _file(1, 5, deletes=("s3://t/deletes/d.parquet",)))
    pin = PinnedSnapshot("ns.t", 1, 1, listed, pa.schema([("x", pa.int64())]))  # type: ignore[arg-type]
    assert isinstance(pin.files, DataFiles)
    assert [f.path for f in pin.files] == [_file(1, 0).path, _file(3, 0).path]
    assert (pin.record_count, pin.has_deletes) == (9, True)
