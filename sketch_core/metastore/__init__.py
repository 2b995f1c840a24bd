"""PostgreSQL metastore: schema migrations and SQLAlchemy Core repositories."""

from sketch_core.metastore.engine import connect_metastore
from sketch_core.metastore.migrations import MigrationReport, migrate

__all__ = ["MigrationReport", "connect_metastore", "migrate"]
