"""`sketch server start` leaves a metastore ready to use: a created, migrated database whose
URL it prints for users to export; a URL naming a database that does not exist is a terminal
error saying how to create it. Runs its own private server (SKETCH_PG_DATA), never the tests'."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from sketch_core.cli import EXIT_TERMINAL

SKETCH = str(Path(sys.executable).with_name("sketch"))


def _sketch(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SKETCH, *args], env=env, capture_output=True, text=True, timeout=300, check=False)


def test_server_start_leaves_a_migrated_metastore_and_prints_what_to_export() -> None:
    # Not pytest's tmp_path: PostgreSQL runs as its own user, which must reach the directory.
    base = Path(tempfile.mkdtemp(prefix="sketch-server-test-"))
    base.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKETCH_")}
    env.update(SKETCH_HOME=str(base / "home"), SKETCH_PG_DATA=str(base / "pgdata"))
    try:
        started = _sketch(env, "server", "start")
        assert started.returncode == 0, started.stderr
        exports = dict(
            line.removeprefix("export ").split("=", 1)
            for line in started.stdout.splitlines()
            if line.startswith("export ")
        )
        url = exports["SKETCH_METASTORE_URL"].strip("'")
        user = {
            **env,
            "SKETCH_METASTORE_URL": url,
            "SKETCH_WAREHOUSE": exports["SKETCH_WAREHOUSE"].strip("'"),
        }
        # What a Python user does next, word for word: from_env on the exported variables.
        opened = subprocess.run(
            [
                sys.executable,
                "-c",
                "from sketch_core.service import SketchService\n"
                "from sketch_core.metastore.migrations import current_version\n"
                "svc = SketchService.from_env(); print(current_version(svc.engine)); svc.close()",
            ],
            env=user,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert opened.returncode == 0, opened.stderr[-2000:]
        assert int(opened.stdout.split()[-1]) >= 13
        missing = _sketch({**user, "SKETCH_METASTORE_URL": url.rsplit("/", 1)[0] + "/no_such_db"}, "status")
        assert missing.returncode == EXIT_TERMINAL, missing.stderr
        assert "'no_such_db' does not exist" in missing.stderr and "createdb no_such_db" in missing.stderr
    finally:
        _sketch(env, "server", "stop")
        shutil.rmtree(base, ignore_errors=True)
