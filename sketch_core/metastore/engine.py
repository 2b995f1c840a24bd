"""Creating the SQLAlchemy engine for the metastore, with errors that say what to do."""

from __future__ import annotations

import os
import time
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DisconnectionError, OperationalError
from sqlalchemy.pool import ConnectionPoolEntry, PoolProxiedConnection

from sketch_core.errors import ConfigurationError, MetastoreDatabaseMissingError, MetastoreUnavailableError
from sketch_core.lru import LruMap

# SQLSTATE of a connection to a database that does not exist.
_INVALID_CATALOG_NAME = "3D000"


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


# A pooled connection idle longer than this is checked with a ping before it is handed out.
PING_IDLE_SECONDS = 5.0
_IDLE_SINCE = "sketch_idle_since"


def ping_idle_connections(engine: Engine, idle_seconds: float = PING_IDLE_SECONDS) -> None:
    """Check a pooled connection before use only if it sat idle for ``idle_seconds``.

    SQLAlchemy's ``pool_pre_ping`` pings on every checkout: a round trip that is a good part of
    a short metastore read, and incremental maintenance makes a dozen of those. A connection
    goes stale when the server restarts or drops it, which happens to idle ones; one in steady
    use fails its next statement at worst, and the pool then replaces all of them.
    """

    @event.listens_for(engine, "connect")
    def _fresh(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
        record.info[_IDLE_SINCE] = time.monotonic()

    @event.listens_for(engine, "checkin")
    def _returned(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
        record.info[_IDLE_SINCE] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _ping_if_idle(
        dbapi_connection: Any, record: ConnectionPoolEntry, proxy: PoolProxiedConnection
    ) -> None:
        since = record.info.get(_IDLE_SINCE)
        if since is not None and time.monotonic() - since <= idle_seconds:
            return
        try:
            engine.dialect.do_ping(dbapi_connection)
        except Exception as exc:  # the pool discards this connection and checks out another
            raise DisconnectionError(f"stale pooled connection: {exc}") from exc


def reading(engine: Engine) -> Connection:
    """A connection for statements that read and need no transaction around them: in
    autocommit a read is one round trip to the server, where psycopg sends a BEGIN before it
    and the pool a ROLLBACK after it (~40% of a short read). Under READ COMMITTED a transaction
    gives a read nothing: each statement sees its own snapshot either way."""
    return engine.connect().execution_options(isolation_level="AUTOCOMMIT")


# Engines of this process by URL (see connect_metastore); the newest few are kept.
_ENGINES_KEPT = 16
_ENGINES: LruMap[str, Engine] = LruMap(_ENGINES_KEPT)


def _forget_engines_after_fork() -> None:
    """In a forked child: the parent's pooled connections are the parent's sockets. Each
    engine lets go of them without closing them (closing would end the parent's sessions), and
    the child makes engines of its own (SQLAlchemy's advice for os.fork)."""
    for engine in _ENGINES.forget_after_fork():
        engine.dispose(close=False)


os.register_at_fork(after_in_child=_forget_engines_after_fork)


def _engine_for(url: str) -> Engine:
    """The process's engine for ``url``, made on first use.

    SQLAlchemy keeps a statement's compiled form per engine (its cache key holds the engine's
    dialect), and every service a process opens (each Airflow task that ``dag.test`` runs, each
    plugin request) started with none: compiling the statements of one maintenance run was
    ~10 ms of its ~70. A service's ``close`` disposes the engine's pool, which SQLAlchemy
    replaces with an empty one; the compiled statements stay. Other services of the process
    using the engine meanwhile open new connections as they need them.
    """

    def make() -> Engine:
        engine = create_engine(url, pool_size=10, max_overflow=20)
        ping_idle_connections(engine)
        return engine

    # An engine dropped from the map stays usable by whoever holds it.
    return _ENGINES.get_or_make(url, make)


def connect_metastore(url: str, *, check: bool = True) -> Engine:
    """An engine for ``url`` (the process's one for it: see ``_engine_for``); with ``check``,
    fail now (transiently) if the server is down."""
    engine = _engine_for(normalize_url(url))
    if check:
        try:
            with engine.connect() as conn:
                conn.execute(text("SELECT 1"))
        except OperationalError as exc:
            engine.dispose()
            safe = make_url(url).render_as_string(hide_password=True)
            # libpq reports a refused connection without a SQLSTATE: its message says it.
            cause = str(exc.orig)
            if getattr(exc.orig, "sqlstate", None) == _INVALID_CATALOG_NAME or (
                "database" in cause and "does not exist" in cause
            ):
                raise MetastoreDatabaseMissingError(safe, str(make_url(url).database)) from exc
            raise MetastoreUnavailableError(safe, str(exc.orig).strip()) from exc
    return engine
