"""A small migration runner for the numbered SQL files in ``sql/``.

The files are the project's top-level ``sql/``; the package reaches them as
``sketch_core/metastore/sql`` (a link in the source tree, the files themselves in a built
wheel), read with :mod:`importlib.resources`, so an installed package carries its schema.

Each file ``NNNN_name.sql`` runs once, in its own transaction, and is recorded with its
checksum in ``sketch.schema_migrations``. A session-level advisory lock serializes runners, so
two processes starting at once apply each migration exactly once. A database migrated by a
newer release is refused rather than silently used.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from sqlalchemy import Connection, Engine, text

from sketch_core.errors import MigrationChecksumError, MigrationError, SchemaTooNewError

# Any constant works; it only has to be the same for every runner of this project.
MIGRATION_LOCK_KEY = 0x5EC7C0DE_0001
_FILE_PATTERN = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode("utf-8")).hexdigest()


@dataclass
class MigrationReport:
    applied: list[int] = field(default_factory=list)
    current_version: int = 0


def default_migrations_dir() -> Path:
    """``SKETCH_MIGRATIONS_DIR`` when set, else the migrations the package ships."""
    explicit = os.environ.get("SKETCH_MIGRATIONS_DIR")
    if explicit:
        return Path(explicit)
    # An installed package is a directory (wheels are unpacked), so its resources are paths.
    return Path(str(resources.files("sketch_core.metastore").joinpath("sql")))


def discover(directory: Path | None = None) -> list[Migration]:
    """The migrations in ``directory``, checked to be numbered 1, 2, 3... without gaps."""
    directory = directory or default_migrations_dir()
    if not directory.is_dir():
        raise MigrationError(
            f"migrations directory {directory} does not exist",
            hint="set SKETCH_MIGRATIONS_DIR to the project's sql/ directory",
        )
    migrations = []
    for path in sorted(directory.glob("*.sql")):
        match = _FILE_PATTERN.match(path.name)
        if not match:
            raise MigrationError(
                f"{path.name} is not named NNNN_name.sql", hint="rename it, e.g. 0002_add_policies.sql"
            )
        migrations.append(Migration(int(match[1]), match[2], path.read_text(encoding="utf-8")))
    for expected, migration in enumerate(migrations, start=1):
        if migration.version != expected:
            raise MigrationError(
                f"migration numbers must run 1, 2, 3... without gaps; found {migration.version} "
                f"where {expected} was expected"
            )
    return migrations


def migrate(engine: Engine, directory: Path | None = None) -> MigrationReport:
    """Bring the metastore schema to the newest migration. Safe to run concurrently."""
    migrations = discover(directory)
    latest = migrations[-1].version if migrations else 0
    report = MigrationReport()
    with engine.connect() as conn:
        conn.execute(text("SELECT pg_advisory_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
        conn.commit()
        try:
            _bootstrap(conn)
            applied = _applied(conn)
            newest_applied = max(applied, default=0)
            if newest_applied > latest:
                raise SchemaTooNewError(newest_applied, latest)
            for migration in migrations:
                if migration.version in applied:
                    if applied[migration.version] != migration.checksum:
                        raise MigrationChecksumError(migration.version, migration.name)
                    continue
                _apply(conn, migration)
                report.applied.append(migration.version)
            report.current_version = max(newest_applied, *report.applied, 0)
        finally:
            conn.rollback()
            conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": MIGRATION_LOCK_KEY})
            conn.commit()
    return report


def current_version(engine: Engine) -> int:
    with engine.connect() as conn:
        exists = conn.execute(text("SELECT to_regclass('sketch.schema_migrations')")).scalar()
        if exists is None:
            return 0
        return int(
            conn.execute(text("SELECT coalesce(max(version), 0) FROM sketch.schema_migrations")).scalar_one()
        )


def _bootstrap(conn: Connection) -> None:
    conn.execute(text("CREATE SCHEMA IF NOT EXISTS sketch"))
    conn.execute(
        text(
            "CREATE TABLE IF NOT EXISTS sketch.schema_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL, checksum text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
    )
    conn.commit()


def _applied(conn: Connection) -> dict[int, str]:
    rows = conn.execute(text("SELECT version, checksum FROM sketch.schema_migrations"))
    return {int(version): str(checksum) for version, checksum in rows}


def _apply(conn: Connection, migration: Migration) -> None:
    """Run one migration script and record it, atomically, on the driver connection.

    The script may hold many statements, which only the driver's simple-query path accepts;
    so the whole transaction (script, record, commit or rollback) is driven there.
    """
    conn.commit()  # end SQLAlchemy's own transaction, so the driver's is the only one
    driver_conn = conn.connection.driver_connection
    assert driver_conn is not None
    try:
        driver_conn.execute(migration.sql)
        driver_conn.execute(
            "INSERT INTO sketch.schema_migrations (version, name, checksum) VALUES (%s, %s, %s)",
            (migration.version, migration.name, migration.checksum),
        )
        driver_conn.commit()
    except Exception as exc:
        driver_conn.rollback()
        raise MigrationError(
            f"migration {migration.version} ({migration.name}) failed: {exc}",
            hint="nothing of it was applied; fix the SQL and run again",
        ) from exc
