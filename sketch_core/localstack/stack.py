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
        """Stop the private server if this process started it (nothing is left behind)."""
        if self.server is not None and self.started_server:
            self.server.stop()


def resolve(settings: Settings, database: str = "sketch") -> LocalStack:
    if settings.metastore_url:
        return LocalStack(settings, None, False)
    server = PrivatePostgres.default()
    port, started = server.ensure_running()
    url = server.ensure_database(port, database)
    return LocalStack(settings.with_metastore(url), server, started)
