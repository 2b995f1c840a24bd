from __future__ import annotations

import psycopg
import pytest

from tests.conftest import Databases


def test_server_is_reused_and_reachable(databases: Databases) -> None:
    if databases.server is None:
        pytest.skip("an external server was given; there is no private server to check")
    port, started = databases.server.ensure_running()
    assert port == databases.port
    assert started is False
    with psycopg.connect(host="127.0.0.1", port=port, user="postgres", dbname="postgres") as conn:
        listen = conn.execute("SHOW listen_addresses").fetchone()
    assert listen == ("127.0.0.1",)
