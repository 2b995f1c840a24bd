"""Files under a table's location that nothing the table still has refers to.

Expiring snapshots only edits the table's metadata: the data files, manifests and manifest
lists that only the expired snapshots referred to stay on disk, as do the files of writes that
died before their commit and metadata files that dropped out of the metadata log. A table that
is loaded and trimmed all day (copy-on-write deletes rewrite whole files) fills its disk with
them. This finds them (Iceberg's "remove orphan files"), and deletes those older than a
cut-off, so that a write still under way (its files not yet committed) keeps its files.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlparse

from pyarrow import fs
from pyiceberg.manifest import ManifestFile
from pyiceberg.table import Table

# What Iceberg writes under a table's location; anything else there is not ours to delete.
TABLE_FILE_SUFFIXES = (".parquet", ".avro", ".orc", ".metadata.json", ".puffin")


@dataclass(frozen=True)
class ListedFile:
    path: str  # in the file system's own form (a local path, or bucket/key)
    size: int
    modified: float  # seconds since the epoch


@dataclass(frozen=True)
class RemovedFiles:
    files: int
    bytes: int


def filesystem_path(uri: str) -> str:
    """A file's URI as its file system lists it: ``file:///w/t/a.parquet`` and Spark's
    ``file:/w/t/a.parquet`` -> ``/w/t/a.parquet``, ``s3://bucket/key`` -> ``bucket/key``; a
    plain path stays as it is."""
    parsed = urlparse(uri)
    if not parsed.scheme:
        return uri
    if parsed.scheme == "file":
        return parsed.path
    return f"{parsed.netloc}{parsed.path}"


def local_path(uri: str) -> str:
    """A file's URI as Arrow's readers open it: a local file's path (``file:`` URIs in either
    form), any other URI as it is."""
    parsed = urlparse(uri)
    return parsed.path if parsed.scheme in ("file", "") else uri


def _checksum_of(path: str) -> str | None:
    """The file a Hadoop checksum file (``dir/.name.crc``, written next to each file by Spark's
    local file system) belongs to, or None for any other file."""
    folder, _, file_name = path.rpartition("/")
    if file_name.startswith(".") and file_name.endswith(".crc"):
        return f"{folder}/{file_name[1:-4]}"
    return None


def unreferenced(listed: Iterable[ListedFile], referenced: set[str], older_than: float) -> list[ListedFile]:
    """The listed table files that are not ``referenced`` and were last written before
    ``older_than`` (a file written since may belong to a commit still under way), with the
    checksum files of such files."""
    found = []
    for f in listed:
        checked = _checksum_of(f.path)
        path = checked if checked is not None else f.path
        if path.endswith(TABLE_FILE_SUFFIXES) and path not in referenced and f.modified < older_than:
            found.append(f)
    return found


def referenced_files(table: Table) -> set[str]:
    """Every file the table's current metadata reaches, as file-system paths: its metadata file
    and those in its log, each snapshot's manifest list, their manifests, the data and delete
    files live in any snapshot, and statistics files."""
    io = table.io
    metadata = table.metadata
    uris = {table.metadata_location, *(entry.metadata_file for entry in metadata.metadata_log)}
    uris.update(s.statistics_path for s in metadata.statistics)
    uris.update(s.statistics_path for s in metadata.partition_statistics)
    manifests: dict[str, ManifestFile] = {}
    for snapshot in metadata.snapshots:
        uris.add(snapshot.manifest_list)
        for manifest in snapshot.manifests(io):
            manifests.setdefault(manifest.manifest_path, manifest)
    uris.update(manifests)
    for manifest in manifests.values():
        # Entries marked deleted name files their snapshot dropped; a snapshot that still has
        # such a file lists it as added or existing in a manifest of its own.
        uris.update(e.data_file.file_path for e in manifest.fetch_manifest_entry(io, discard_deleted=True))
    return {filesystem_path(uri) for uri in uris}


def list_files(location: str) -> tuple[fs.FileSystem, list[ListedFile]]:
    """The files under a table's location, with the file system they are on."""
    filesystem, root = fs.FileSystem.from_uri(location)
    infos = filesystem.get_file_info(fs.FileSelector(root, recursive=True, allow_not_found=True))
    listed = [
        ListedFile(i.path, i.size or 0, i.mtime.timestamp() if i.mtime is not None else 0.0)
        for i in infos
        if i.type == fs.FileType.File
    ]
    return filesystem, listed


def remove_unreferenced_files(table: Table, older_than: float) -> RemovedFiles:
    """Delete the table's files that its metadata no longer reaches and that were written
    before ``older_than``; returns how many and their bytes."""
    referenced = referenced_files(table)
    filesystem, listed = list_files(table.location())
    garbage = unreferenced(listed, referenced, older_than)
    for f in garbage:
        filesystem.delete_file(f.path)
    return RemovedFiles(len(garbage), sum(f.size for f in garbage))
