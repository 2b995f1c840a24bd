"""A private PostgreSQL server on a free loopback port.

The demo, the tests and CI need a real PostgreSQL but must not depend on one being set up on the
machine. This module initdb's a cluster into a cache directory once, starts it on a free
127.0.0.1 port, reuses it when it is already running, and stops it on request. When run as
root, the server runs as the ``postgres`` system user, because PostgreSQL refuses to run as root.

Several processes may share the server (a test run, ``make demo``, a second test run). Each
holds a shared lock on a users file from ``ensure_running`` until it exits, and the one that
started the server stops it with ``stop_unless_in_use``, which leaves it running while any other
process still holds that lock: one run finishing must not pull the server from under another.

Authentication is ``trust`` on loopback only: the server is private to this machine and user,
holds only scratch data, and listens on no Unix socket.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import pwd
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import psycopg
from psycopg import sql

from sketch_core.errors import ConfigurationError, InfrastructureError

log = logging.getLogger(__name__)

_SYSTEM_USER = "postgres"
_SUPERUSER = "postgres"
_START_ATTEMPTS = 3
# Per process and cluster: the open users file whose shared lock says "this process uses it".
# The lock goes away with the process, however it ends.
_IN_USE: dict[Path, IO[str]] = {}


def default_data_dir() -> Path:
    """Where the cluster lives unless ``SKETCH_PG_DATA`` says otherwise.

    Root's home is not readable by the ``postgres`` user, so root gets a system cache path.
    """
    explicit = os.environ.get("SKETCH_PG_DATA")
    if explicit:
        return Path(explicit).expanduser().resolve()
    if os.geteuid() == 0:
        return Path("/var/cache/sketch-skipping/pgdata")
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return cache / "sketch-skipping" / "pgdata"


def find_bindir() -> Path:
    """The directory holding initdb/pg_ctl: ``SKETCH_PG_BINDIR``, ``pg_config``, or Debian's path."""
    candidates: list[Path] = []
    if os.environ.get("SKETCH_PG_BINDIR"):
        candidates.append(Path(os.environ["SKETCH_PG_BINDIR"]))
    if shutil.which("pg_config"):
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, check=False)
        if out.returncode == 0:
            candidates.append(Path(out.stdout.strip()))
    debian = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name))
    candidates.extend(reversed(debian))
    for candidate in candidates:
        if (candidate / "initdb").exists() and (candidate / "pg_ctl").exists():
            return candidate
    raise ConfigurationError(
        "PostgreSQL server binaries (initdb, pg_ctl) were not found",
        hint="install them (Debian: apt-get install postgresql) or set SKETCH_PG_BINDIR; "
        "`make test` and `make demo` do this for you",
    )


def free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class PrivatePostgres:
    """One private cluster in ``data_dir``; all methods are idempotent and process-safe."""

    data_dir: Path
    bindir: Path

    @classmethod
    def default(cls) -> PrivatePostgres:
        return cls(data_dir=default_data_dir(), bindir=find_bindir())

    # -- paths -------------------------------------------------------------------------------
    @property
    def base_dir(self) -> Path:
        return self.data_dir.parent

    @property
    def log_file(self) -> Path:
        return self.base_dir / f"{self.data_dir.name}.log"

    @property
    def _lock_file(self) -> Path:
        return self.base_dir / f"{self.data_dir.name}.lock"

    @property
    def _users_file(self) -> Path:
        return self.base_dir / f"{self.data_dir.name}.users"

    # -- public API --------------------------------------------------------------------------
    def ensure_running(self) -> tuple[int, bool]:
        """Start the server unless it runs already. Returns (port, started_by_this_call)."""
        with self._locked():
            self._ensure_initialized()
            self._mark_in_use()
            port = self._running_port()
            if port is not None:
                return port, False
            return self._start(), True

    def stop_unless_in_use(self) -> bool:
        """Stop the server unless another process still uses it; whether it was stopped.
        This process stops using it either way."""
        with self._locked():
            handle = _IN_USE.pop(self.data_dir, None)
            if handle is not None:
                handle.close()  # releases this process's shared lock
            with open(self._users_file, "a") as probe:
                try:
                    fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    log.info("the private PostgreSQL server is still in use by another process: left running")
                    return False
                if self._running_port() is not None:
                    self._run([self._bin("pg_ctl"), "-D", str(self.data_dir), "-m", "fast", "-w", "stop"])
                return True

    def _mark_in_use(self) -> None:
        if self.data_dir not in _IN_USE:
            handle = open(self._users_file, "a")  # noqa: SIM115 -- held open until the process exits
            fcntl.flock(handle, fcntl.LOCK_SH)
            _IN_USE[self.data_dir] = handle

    def stop(self) -> None:
        """Stop the server now, whoever uses it (``sketch localstack stop``)."""
        with self._locked():
            if self._running_port() is None:
                return
            self._run([self._bin("pg_ctl"), "-D", str(self.data_dir), "-m", "fast", "-w", "stop"])

    def running_port(self) -> int | None:
        return self._running_port()

    def url(self, port: int, database: str = "postgres") -> str:
        return f"postgresql+psycopg://{_SUPERUSER}@127.0.0.1:{port}/{database}"

    def ensure_database(self, port: int, database: str) -> str:
        """Create ``database`` if missing; returns its SQLAlchemy URL."""
        with self._admin_connection(port) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchone()
            if not exists:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
        return self.url(port, database)

    def drop_database(self, port: int, database: str) -> None:
        with self._admin_connection(port) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database)))

    # -- internals ---------------------------------------------------------------------------
    def _bin(self, name: str) -> str:
        return str(self.bindir / name)

    @contextlib.contextmanager
    def _admin_connection(self, port: int) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
        conn = psycopg.connect(
            host="127.0.0.1", port=port, user=_SUPERUSER, dbname="postgres", autocommit=True
        )
        try:
            yield conn
        finally:
            conn.close()

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self._prepare_base_dir()
        with open(self._lock_file, "a+") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _as_root(self) -> bool:
        return os.geteuid() == 0

    def _prepare_base_dir(self) -> None:
        self.base_dir.mkdir(parents=True, exist_ok=True)
        if self._as_root():
            try:
                pw = pwd.getpwnam(_SYSTEM_USER)
            except KeyError as exc:
                raise ConfigurationError(
                    f"running as root needs the {_SYSTEM_USER!r} system user to run PostgreSQL",
                    hint="install Debian's postgresql package, which creates it",
                ) from exc
            os.chown(self.base_dir, pw.pw_uid, pw.pw_gid)

    def _run(self, argv: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
        program = Path(argv[0]).name
        if self._as_root():
            # runuser lives in sbin, which a minimal PATH (cron, CI) may leave out.
            search = f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin"
            runuser = shutil.which("runuser", path=search) or "runuser"
            argv = [runuser, "-u", _SYSTEM_USER, "--", *argv]
        result = subprocess.run(argv, capture_output=True, text=True, check=False)
        if check and result.returncode != 0:
            raise InfrastructureError(
                f"{program} failed "
                f"(exit {result.returncode}): {(result.stderr or result.stdout).strip()[-2000:]}",
                hint=f"see {self.log_file}",
            )
        return result

    def _ensure_initialized(self) -> None:
        if (self.data_dir / "PG_VERSION").exists():
            return
        if self.data_dir.exists() and any(self.data_dir.iterdir()):
            raise InfrastructureError(
                f"{self.data_dir} exists but is not a PostgreSQL cluster",
                hint="remove it or point SKETCH_PG_DATA elsewhere",
            )
        log.info("initializing a private PostgreSQL cluster in %s", self.data_dir)
        self._run(
            [
                self._bin("initdb"),
                "-D",
                str(self.data_dir),
                "-U",
                _SUPERUSER,
                "--auth=trust",
                "--encoding=UTF8",
                "--no-locale",
                "--no-instructions",
            ]
        )
        # Loopback TCP only; no Unix socket, so nothing outside the port is touched.
        with open(self.data_dir / "postgresql.conf", "a", encoding="utf-8") as conf:
            conf.write(
                "\n# sketch-skipping private server\n"
                "listen_addresses = '127.0.0.1'\n"
                "unix_socket_directories = ''\n"
                "max_connections = 200\n"
                "fsync = off\n"
                "synchronous_commit = off\n"
                "full_page_writes = off\n"
            )

    def _running_port(self) -> int | None:
        pid_file = self.data_dir / "postmaster.pid"
        if not pid_file.exists():
            return None
        status = self._run([self._bin("pg_ctl"), "-D", str(self.data_dir), "status"], check=False)
        if status.returncode != 0:
            return None
        try:
            lines = pid_file.read_text().splitlines()
            port = int(lines[3])
        except (OSError, IndexError, ValueError):
            return None
        return port if self._accepts_connections(port) else None

    def _accepts_connections(self, port: int) -> bool:
        result = subprocess.run(
            [self._bin("pg_isready"), "-h", "127.0.0.1", "-p", str(port), "-q"], check=False
        )
        return result.returncode == 0

    def _start(self) -> int:
        last_error: InfrastructureError | None = None
        for _ in range(_START_ATTEMPTS):
            port = free_loopback_port()
            try:
                self._run(
                    [
                        self._bin("pg_ctl"),
                        "-D",
                        str(self.data_dir),
                        "-l",
                        str(self.log_file),
                        "-o",
                        f"-p {port}",
                        "-w",
                        "-t",
                        "60",
                        "start",
                    ]
                )
            except InfrastructureError as exc:  # most likely the port was taken meanwhile
                last_error = exc
                time.sleep(0.5)
                continue
            log.info("private PostgreSQL listening on 127.0.0.1:%d", port)
            return port
        assert last_error is not None
        raise last_error
