from __future__ import annotations

import shutil
import subprocess
import sys
import uuid

import psycopg
import pytest

from sketch_core.localstack.postgres import PrivatePostgres, default_data_dir, find_bindir
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


HOLDER = """
import sys, time
from pathlib import Path
from sketch_core.localstack.postgres import PrivatePostgres, find_bindir
server = PrivatePostgres(Path(sys.argv[1]), find_bindir())
port, started = server.ensure_running()
print(port, started, flush=True)
time.sleep(120)
"""


def test_a_run_that_started_the_server_leaves_it_to_another_still_using_it() -> None:
    """A test run finishing while ``make demo`` (or a second test run) uses the server must
    not stop it under them; once no one else uses it, it is stopped."""
    # A cluster of its own (beside the shared one, where the postgres user can reach it).
    base = default_data_dir().parent / f"test-{uuid.uuid4().hex[:8]}"
    server = PrivatePostgres(base / "pgdata", find_bindir())
    port, started = server.ensure_running()
    assert started
    other = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(server.data_dir)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert other.stdout is not None
        assert other.stdout.readline().split() == [str(port), "False"]  # it joined the running server
        assert server.stop_unless_in_use() is False
        assert server.running_port() == port
        other.kill()  # however a user ends, its claim ends with it
        other.wait()
        assert server.stop_unless_in_use() is True
        assert server.running_port() is None
    finally:
        other.kill()
        server.stop()
        shutil.rmtree(base, ignore_errors=True)
