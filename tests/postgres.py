"""A throwaway PostgreSQL server for the tests: `initdb` and `pg_ctl` on a temporary directory.

The server listens on a free loopback port and on no Unix socket, with trust authentication
for the `postgres` role on 127.0.0.1 only. `initdb` refuses to run as root: as root (CI),
the server runs as the `postgres` account the Debian package creates, through `runuser`.

PostgreSQL missing: the tests that need it skip locally and fail in CI
(`BOUNDLOOP_REQUIRE_INTEGRATION=1`), like the other system components.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

SUPERUSER: Final = "postgres"
START_TIMEOUT_S: Final = 60


def find_bin_dir() -> Path | None:
    """The directory holding `initdb` and `pg_ctl`: on PATH, else Debian's newest version."""
    on_path = shutil.which("initdb")
    if on_path is not None and shutil.which("pg_ctl") is not None:
        return Path(os.path.realpath(on_path)).parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=_version_key)
    return Path(versions[-1]).parent if versions else None


def _version_key(path: str) -> int:
    part = Path(path).parts[-3]
    return int(part) if part.isdigit() else 0


def require_postgres() -> Path:
    """The server binaries' directory; skip locally, fail in CI, when PostgreSQL is missing."""
    found = find_bin_dir()
    if found is None:
        message = (
            "PostgreSQL not found (initdb, pg_ctl): install the Debian package 'postgresql' (.ci/run does)"
        )
        if os.environ.get("BOUNDLOOP_REQUIRE_INTEGRATION") or os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found


def free_port() -> int:
    """A loopback TCP port nobody listens on right now."""
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PostgresServer:
    """One server process on a temporary data directory; `dsn(db)` for each database."""

    def __init__(self, bin_dir: Path, *, fsync: bool = False) -> None:
        self.bin_dir = bin_dir
        self.fsync = fsync
        """False for the tests (commits skip the disk); the benchmarks measure a durable server."""
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="boundloop-pg-"))
        self.data = self.root / "data"
        self._as_root = os.geteuid() == 0
        self._databases = 0

    def _command(self, *argv: str) -> list[str]:
        """`argv` run as the server's owner: `runuser -u postgres --` when we are root."""
        return ["runuser", "-u", SUPERUSER, "--", *argv] if self._as_root else list(argv)

    def start(self) -> None:
        """initdb, then start the server and wait until it accepts connections."""
        if self._as_root:
            shutil.chown(self.root, user=SUPERUSER)
        initdb = str(self.bin_dir / "initdb")
        subprocess.run(
            self._command(initdb, "-D", str(self.data), "-U", SUPERUSER, "--auth=trust", "-E", "UTF8"),
            check=True,
            capture_output=True,
        )
        options = (
            f"-c listen_addresses=127.0.0.1 -c port={self.port} -c unix_socket_directories='' -c fsync=off"
        )
        subprocess.run(
            self._command(
                str(self.bin_dir / "pg_ctl"),
                "-D",
                str(self.data),
                "-o",
                options,
                "-l",
                str(self.root / "server.log"),
                "-w",
                "-t",
                str(START_TIMEOUT_S),
                "start",
            ),
            check=True,
            capture_output=True,
        )

    def stop(self) -> None:
        """Stop the server (immediate mode) and remove its directory."""
        with contextlib.suppress(subprocess.CalledProcessError):
            subprocess.run(
                self._command(str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop"),
                check=True,
                capture_output=True,
            )
        shutil.rmtree(self.root, ignore_errors=True)

    def dsn(self, database: str = "postgres") -> str:
        """A libpq connection string for `database` on this server."""
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def create_database(self, prefix: str = "t") -> str:
        """A new empty database; its DSN."""
        import psycopg

        self._databases += 1
        name = f"{prefix}_{self._databases}"
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.dsn(name)


@contextlib.contextmanager
def running_server() -> Iterator[PostgresServer]:
    """A started server, stopped and removed afterwards."""
    server = PostgresServer(require_postgres())
    try:
        server.start()
        yield server
    finally:
        server.stop()
