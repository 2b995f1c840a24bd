"""Creating the SQLAlchemy engine for the metastore, with errors that say what to do."""

from __future__ import annotations

from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, OperationalError

from sketch_core.errors import ConfigurationError, MetastoreUnavailableError


def normalize_url(url: str) -> str:
    """Accept plain ``postgresql://`` URLs and use the psycopg 3 driver for them."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise ConfigurationError(
            f"metastore URL {url!r} is not a valid database URL",
            hint="use postgresql+psycopg://user:password@host:port/database",
        ) from exc
    if parsed.get_backend_name() != "postgresql":
        raise ConfigurationError(
            f"the metastore must be PostgreSQL, got {parsed.get_backend_name()!r}",
            hint="point SKETCH_METASTORE_URL at a PostgreSQL 15+ database",
        )
    # Always name the driver: the default for plain postgresql:// differs across SQLAlchemy versions.
    parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)


def connect_metastore(url: str, *, check: bool = True) -> Engine:
    """An engine for ``url``; with ``check``, fail now (transiently) if the server is down."""
    engine = create_engine(normalize_url(url), pool_pre_ping=True, pool_size=10, max_overflow=20)
    if check:
        try:
            with engine.connect() as conn:
                conn.execute(text("SELECT 1"))
        except OperationalError as exc:
            engine.dispose()
            safe = make_url(url).render_as_string(hide_password=True)
            raise MetastoreUnavailableError(safe, str(exc.orig).strip()) from exc
    return engine
