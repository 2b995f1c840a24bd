"""Resolve the metastore: SKETCH_METASTORE_URL if set, else a private server started here."""

from __future__ import annotations

from dataclasses import dataclass

from sketch_core.config import Settings
from sketch_core.localstack.postgres import PrivatePostgres


@dataclass
class LocalStack:
    settings: Settings
    server: PrivatePostgres | None
    started_server: bool

    def shutdown(self) -> None:
        """Stop the private server if this process started it and no other process uses it."""
        if self.server is not None and self.started_server:
            self.server.stop_unless_in_use()


_MARKER = ".private-metastore"


def resolve(settings: Settings, database: str = "sketch") -> LocalStack:
    """The metastore to use; a private database is paired with the warehouse it describes.

    The metastore holds the Iceberg catalog, which points at files in the warehouse. A private
    database is only reused with the warehouse it was created for (a marker file there names
    it); with a new or wiped warehouse it is recreated, instead of pointing at missing files.
    """
    if settings.metastore_url:
        return LocalStack(settings, None, False)
    server = PrivatePostgres.default()
    port, started = server.ensure_running()
    marker = settings.warehouse / _MARKER
    if not (marker.exists() and marker.read_text().strip() == database):
        server.drop_database(port, database)
        settings.warehouse.mkdir(parents=True, exist_ok=True)
        marker.write_text(database + "\n")
    url = server.ensure_database(port, database)
    return LocalStack(settings.with_metastore(url), server, started)
