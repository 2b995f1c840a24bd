"""Where a table's files go, and removing them once the table is dropped.

A table gets the catalog's default location (``warehouse/namespace/table``) unless a directory
is already there: that of a dropped table whose files are still being (or failed to be)
removed, or of a write that died. Then it gets a location of its own beside it, so that
removing a dropped table's files can never touch those of a table created under its name.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from pyarrow import fs

from sketch_core.tables.orphans import TABLE_FILE_SUFFIXES, RemovedFiles, list_files


def new_table_location(default: str, taken: Callable[[str], bool]) -> str:
    """``default``, or when ``taken`` says something is there, ``default`` with a unique suffix."""
    location = default.rstrip("/")
    while taken(location):
        location = f"{default.rstrip('/')}-{uuid.uuid4().hex[:8]}"
    return location


def location_taken(location: str) -> bool:
    """Whether anything (a file or directory) exists at ``location``."""
    filesystem, root = fs.FileSystem.from_uri(location)
    return bool(filesystem.get_file_info(root).type != fs.FileType.NotFound)


def purge_location(location: str) -> RemovedFiles:
    """Delete the Iceberg files (data, manifests, metadata) under ``location``, and the
    directory itself when nothing else is in it: files of other kinds are not ours to delete."""
    filesystem, listed = list_files(location)
    ours = [f for f in listed if f.path.endswith(TABLE_FILE_SUFFIXES)]
    for f in ours:
        filesystem.delete_file(f.path)
    if len(ours) == len(listed):
        _, root = fs.FileSystem.from_uri(location)
        if filesystem.get_file_info(root).type == fs.FileType.Directory:
            filesystem.delete_dir(root)
    return RemovedFiles(len(ours), sum(f.size for f in ours))
