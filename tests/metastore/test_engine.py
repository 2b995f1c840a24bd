from __future__ import annotations

import pytest

from sketch_core.errors import ConfigurationError, MetastoreUnavailableError
from sketch_core.localstack.postgres import free_loopback_port
from sketch_core.metastore.engine import connect_metastore, normalize_url


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
