"""A throwaway PostgreSQL server for the tests, from the binaries the image carries.

``pg_server`` (session scope) runs ``initdb`` and ``pg_ctl`` from ``/usr/lib/postgresql/*/bin``
on a data directory under a temporary directory, listening on 127.0.0.1 at a free port and on
a Unix socket there, and removes it all at the end. PostgreSQL refuses to run as root, so
when the tests do, the server runs as the ``postgres`` user (``runuser -u postgres --``).
``pg_database`` gives each test a database of its own, dropped after it. ``PgServer.stop``
and ``PgServer.start`` take the server away and bring it back in the middle of a test.

Without the binaries (a developer's machine): the tests skip, saying what is missing; with
TOOLHOST_REQUIRE_SERVERS=1 (CI) they fail instead.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
from loopback_ports import free_port

__all__ = ["PgServer", "ServerMissing", "pg_database", "pg_server", "running_server"]

#: The cluster's one role; trust authentication on 127.0.0.1 and the socket.
USER = "postgres"


@attrs.define
class PgServer:
    """A running cluster: its binaries, data directory, port and the command prefix that runs
    its programs as the right user."""

    bin_dir: Path
    data_dir: Path
    port: int
    run_as: tuple[str, ...]
    log: Path

    def url(self, database: str = "postgres", *, password: str | None = None) -> str:
        auth = USER if password is None else f"{USER}:{password}"
        return f"postgresql://{auth}@127.0.0.1:{self.port}/{database}"

    def _pg_ctl(self, *args: str) -> None:
        subprocess.run([*self.run_as, str(self.bin_dir / "pg_ctl"), "-D", str(self.data_dir),
                        "-l", str(self.log), *args], check=True, capture_output=True,
                       timeout=60)

    def start(self) -> None:
        """Start the server, and wait until it accepts connections."""
        self._pg_ctl("-w", "-o", f"-p {self.port}", "start")

    def stop(self) -> None:
        """Stop it at once (``-m immediate``: every session is cut, as in a crash)."""
        self._pg_ctl("-w", "-m", "immediate", "stop")

    def execute(self, sql: str, database: str = "postgres") -> None:
        """Run one statement in autocommit (CREATE DATABASE cannot run in a transaction)."""
        import psycopg

        with psycopg.connect(self.url(database), autocommit=True) as conn:
            conn.execute(sql)  # test-built text, not user input


def _binaries() -> Path | None:
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(candidates[-1]).parent if candidates else None


class ServerMissing(Exception):
    """What this machine lacks to run a server (the message says it)."""


@contextlib.contextmanager
def running_server() -> Iterator[PgServer]:
    """A fresh cluster, started, and removed afterwards (bench/ uses it too).

    :raises ServerMissing: no server binaries, no client, or no ``runuser`` as root.
    """
    bin_dir = _binaries()
    if bin_dir is None:
        raise ServerMissing("the server binaries (initdb, pg_ctl under "
                            "/usr/lib/postgresql/*/bin: apt-get install postgresql)")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        raise ServerMissing("the client (pip install 'toolhost-core[postgres]')") from None
    run_as: tuple[str, ...] = ()
    if os.geteuid() == 0:
        # runuser lives in the superuser's directories, which a minimal PATH may leave out.
        path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
        runuser = shutil.which("runuser", path=path)
        if runuser is None:
            raise ServerMissing("runuser (util-linux), to run the server as the postgres user")
        run_as = (runuser, "-u", "postgres", "--")
    root = Path(tempfile.mkdtemp(prefix="toolhost-pg-"))
    if run_as:
        shutil.chown(root, user="postgres")
    server = PgServer(bin_dir=bin_dir, data_dir=root / "data", port=free_port(),
                      run_as=run_as, log=root / "server.log")
    try:
        subprocess.run(
            [*run_as, str(bin_dir / "initdb"), "-D", str(server.data_dir), "-U", USER,
             "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync"],
            check=True, capture_output=True, timeout=120)
        with open(server.data_dir / "postgresql.conf", "a") as conf:
            # A throwaway cluster: no fsync (the machine does not crash under a test), but
            # commits stay synchronous: ``stop`` is a crash, and must lose no commit.
            conf.write(f"listen_addresses = '127.0.0.1'\nunix_socket_directories = '{root}'\n"
                       "fsync = off\nfull_page_writes = off\nmax_connections = 200\n")
        server.start()
        yield server
    finally:
        with contextlib.suppress(Exception):
            server.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    try:
        with running_server() as server:
            yield server
    except ServerMissing as missing:
        message = f"PostgreSQL tests need {missing}"
        if os.environ.get("TOOLHOST_REQUIRE_SERVERS") == "1":
            pytest.fail(f"{message} (TOOLHOST_REQUIRE_SERVERS=1)", pytrace=False)
        pytest.skip(message)


_databases = iter(range(1, 1 << 30))


@pytest.fixture
def pg_database(pg_server: PgServer) -> Iterator[str]:
    """The URL of a fresh, empty database, dropped after the test."""
    name = f"t{next(_databases)}"
    pg_server.execute(f"CREATE DATABASE {name}")
    yield pg_server.url(name)
    with contextlib.suppress(Exception):
        pg_server.start()  # a test that stopped the server and failed before restarting it
    pg_server.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
