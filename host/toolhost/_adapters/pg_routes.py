"""The RouteTable on the PostgreSQL database the hosts share (``toolhost._ports.routes``).

Two tables: the serving hosts with their URL and the database's time of their last heartbeat,
and the routes (a session or a sessionless run, to the host it lives on). Liveness is judged
by the database's clock (``now()``), never a host's, and a claim is one statement, so two
hosts claiming one key at once agree on one owner.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from toolhost._adapters.pg_invocations import (
    first_line,
    migrated_pool,
    shown_conninfo,
)
from toolhost._model.routes import HOST_TIMEOUT_S, HostAddress, RoutesUnavailable

__all__ = ["MIGRATIONS", "PostgresRouteTable"]

MIGRATIONS: Sequence[tuple[str, int, str]] = (
    (
        "routes",
        1,
        """
        CREATE TABLE toolhost_hosts (
            host_id TEXT COLLATE "C" PRIMARY KEY,
            url TEXT NOT NULL,
            seen_at TIMESTAMPTZ NOT NULL
        );
        CREATE TABLE toolhost_routes (
            key BYTEA PRIMARY KEY,
            host_id TEXT COLLATE "C" NOT NULL
        );
        CREATE INDEX toolhost_routes_host ON toolhost_routes (host_id)
        """,
    ),
)

#: A host not heard from for this long is forgotten, with its routes.
_FORGET_AFTER_S = 600
_LIVE = f"seen_at > now() - make_interval(secs => {HOST_TIMEOUT_S})"


def _bytes(key: str) -> bytes:
    """A key as stored: its UTF-8 bytes (a principal id is free text)."""
    return key.encode("utf-8", "surrogatepass")


class PostgresRouteTable:
    """Routes in the database ``conninfo`` names (migrated on open).

    :raises StoreUnavailable: the database cannot be reached or migrated.
    """

    def __init__(self, conninfo: str, *, max_size: int = 4, timeout: float = 5.0,
                 connect_timeout: int = 5) -> None:
        self._shown = shown_conninfo(conninfo)
        self._pool = migrated_pool(conninfo, name="toolhost-routes",
                                   application_name="toolhost routes", migrations=MIGRATIONS,
                                   max_size=max_size, timeout=timeout,
                                   connect_timeout=connect_timeout)
        # The heartbeat's own connection: a flood of lookups can never make this host miss
        # its beats and look gone to the others.
        try:
            self._beat = migrated_pool(conninfo, name="toolhost-heartbeat",
                                       application_name="toolhost heartbeat",
                                       migrations=MIGRATIONS, max_size=1, timeout=timeout,
                                       connect_timeout=connect_timeout)
        except BaseException:
            self._pool.close()
            raise

    @contextlib.contextmanager
    def _connection(self, pool: ConnectionPool[psycopg.Connection[Any]] | None = None
                    ) -> Iterator[psycopg.Connection[Any]]:
        try:
            with (pool or self._pool).connection() as conn:
                yield conn
        except psycopg.Error as exc:
            raise RoutesUnavailable(f"the database {self._shown} did not answer "
                                    f"({first_line(exc)})") from None
        except TimeoutError:  # the pool had no connection to lend in time
            raise RoutesUnavailable(f"the database {self._shown} did not answer") from None

    def announce(self, host: HostAddress) -> None:
        with self._connection(self._beat) as conn, conn.transaction():
            conn.execute(
                "INSERT INTO toolhost_hosts (host_id, url, seen_at) VALUES (%s, %s, now()) "
                "ON CONFLICT (host_id) DO UPDATE SET url = excluded.url, seen_at = now()",
                (host.host_id, host.url))
            conn.execute("DELETE FROM toolhost_hosts WHERE seen_at < now() - "
                         f"make_interval(secs => {_FORGET_AFTER_S})")
            conn.execute("DELETE FROM toolhost_routes r WHERE NOT EXISTS (SELECT 1 FROM "
                         "toolhost_hosts h WHERE h.host_id = r.host_id)")

    def retire(self, host_id: str) -> None:
        with self._connection(self._beat) as conn, conn.transaction():
            conn.execute("DELETE FROM toolhost_routes WHERE host_id = %s", (host_id,))
            conn.execute("DELETE FROM toolhost_hosts WHERE host_id = %s", (host_id,))

    def claim(self, key: str, host_id: str) -> HostAddress:
        for _ in range(3):
            with self._connection() as conn:
                # One statement: inserted, or taken over from a host gone silent; else the row
                # stays its live owner's and the SELECT below reads it.
                conn.execute(
                    "INSERT INTO toolhost_routes (key, host_id) VALUES (%s, %s) "
                    "ON CONFLICT (key) DO UPDATE SET host_id = excluded.host_id "
                    "WHERE toolhost_routes.host_id NOT IN (SELECT host_id FROM toolhost_hosts "
                    f"WHERE {_LIVE})", (_bytes(key), host_id))
                found = self._owner(conn, key)
            if found is not None:
                return found
            # Its owner fell silent between the two statements (or this host has not
            # announced itself): ask again, a bounded number of times.
        raise RoutesUnavailable(f"no live host serves {key!r}: is this host announced?")

    def owner(self, key: str) -> HostAddress | None:
        with self._connection() as conn:
            return self._owner(conn, key)

    @staticmethod
    def _owner(conn: psycopg.Connection[Any], key: str) -> HostAddress | None:
        row = conn.execute(
            "SELECT h.host_id, h.url FROM toolhost_routes r JOIN toolhost_hosts h "
            f"ON h.host_id = r.host_id WHERE r.key = %s AND h.{_LIVE}",
            (_bytes(key),)).fetchone()
        return None if row is None else HostAddress(str(row[0]), str(row[1]))

    def drop(self, key: str) -> None:
        with self._connection() as conn:
            conn.execute("DELETE FROM toolhost_routes WHERE key = %s", (_bytes(key),))

    def close(self) -> None:
        self._pool.close()
        self._beat.close()
