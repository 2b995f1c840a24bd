from __future__ import annotations

import os
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.pool import NullPool

from sketch_core.errors import ConfigurationError, MetastoreUnavailableError
from sketch_core.localstack.postgres import free_loopback_port
from sketch_core.metastore.engine import connect_metastore, normalize_url, ping_idle_connections, reading


def test_plain_postgres_urls_use_psycopg3() -> None:
    assert normalize_url("postgresql://u:p@h:1/db").startswith("postgresql+psycopg://u:p@h:1/db")


def test_non_postgres_metastore_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="must be PostgreSQL"):
        normalize_url("sqlite:///x.db")


def test_unreachable_metastore_is_a_transient_error() -> None:
    port = free_loopback_port()  # nothing listens there
    with pytest.raises(MetastoreUnavailableError) as info:
        connect_metastore(f"postgresql://nobody:secret@127.0.0.1:{port}/x")
    assert info.value.transient
    assert "secret" not in str(info.value)


def _drop_pooled_connections(engine: Engine) -> None:
    """What a server restart does to a pool: its connections die while checked in."""
    with engine.connect() as conn:
        pid = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
    killer = create_engine(engine.url, poolclass=NullPool)
    with killer.connect() as conn:
        assert conn.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid}).scalar_one()
    killer.dispose()


def test_an_idle_connection_is_pinged_and_replaced(databases: Any) -> None:
    engine = create_engine(normalize_url(databases.create()), pool_size=1, max_overflow=0)
    ping_idle_connections(engine, idle_seconds=0.0)
    try:
        _drop_pooled_connections(engine)
        with engine.connect() as conn:  # the dead connection fails its ping and is replaced
            assert conn.execute(text("SELECT 1")).scalar_one() == 1
    finally:
        engine.dispose()


def test_a_busy_connection_is_not_pinged(databases: Any) -> None:
    """Within the idle time no ping is made: a connection killed meanwhile fails its next
    statement once, and the pool then starts afresh (the trade for a round trip per checkout)."""
    engine = create_engine(normalize_url(databases.create()), pool_size=1, max_overflow=0)
    ping_idle_connections(engine, idle_seconds=3600.0)
    try:
        _drop_pooled_connections(engine)
        with pytest.raises(OperationalError), engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        with engine.connect() as conn:
            assert conn.execute(text("SELECT 1")).scalar_one() == 1
    finally:
        engine.dispose()


# True when the statement is the first of its transaction: in autocommit, every statement.
_OWN_TRANSACTION = text("SELECT transaction_timestamp() = statement_timestamp()")


def test_reads_run_without_a_transaction_and_leave_the_pool_transactional(databases: Any) -> None:
    engine = connect_metastore(databases.create())
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE counted (x int)"))
    with reading(engine) as conn:
        conn.execute(text("SELECT 1"))
        assert conn.execute(_OWN_TRANSACTION).scalar_one(), "a second read is a transaction of its own"
    # The same pooled connection, back to transactions: a failed block leaves nothing behind.
    with engine.connect() as conn:
        conn.execute(text("SELECT 1"))
        assert not conn.execute(_OWN_TRANSACTION).scalar_one(), "two statements, one transaction"
    with pytest.raises(RuntimeError), engine.begin() as conn:
        conn.execute(text("INSERT INTO counted VALUES (1)"))
        raise RuntimeError("rolled back")
    with reading(engine) as conn:
        assert conn.execute(text("SELECT count(*) FROM counted")).scalar_one() == 0


def test_a_process_has_one_engine_per_metastore_and_a_close_does_not_end_it(databases: Any) -> None:
    """Each service a process opens reuses the engine (its compiled statements); one closing
    (disposing the pool) leaves it usable by the others."""
    url = databases.create()
    first, second = connect_metastore(url), connect_metastore(url)
    assert first is second
    assert connect_metastore(databases.create()) is not first
    with first.connect() as conn:
        conn.execute(text("SELECT 1"))
    first.dispose()
    with second.connect() as conn:
        assert conn.execute(text("SELECT 2")).scalar_one() == 2


def test_a_forked_child_makes_engines_of_its_own(databases: Any) -> None:
    """The parent's pooled connections are its sockets: a child that used them would garble
    the parent's sessions. The child gets a new engine; the parent's keeps working."""
    url = databases.create()
    parent = connect_metastore(url)
    with parent.connect() as conn:
        parent_pid = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's outcome is read from the pipe
        try:
            engine = connect_metastore(url)
            with engine.connect() as conn:
                pid = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
            os.write(writer, b"ok" if engine is not parent and pid != parent_pid else b"shared")
        except BaseException as exc:
            os.write(writer, repr(exc).encode()[:200])
        finally:
            os._exit(0)
    os.close(writer)
    os.waitpid(child, 0)
    said = os.read(reader, 256)
    os.close(reader)
    assert said == b"ok", said
    with parent.connect() as conn:
        assert conn.execute(text("SELECT pg_backend_pid()")).scalar_one() == parent_pid
