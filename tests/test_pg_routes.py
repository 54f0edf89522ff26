"""The routing table on PostgreSQL (``PostgresRouteTable``): where a session or a sessionless
run lives when several hosts share one database. Claims agree under concurrency, a silent
host's runs move to the next host that asks, its sessions are nobody's, a retired host takes
its routes with it."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import psycopg
import pytest
from pg_server import pg_database, pg_server

from toolhost._adapters.pg_routes import PostgresRouteTable
from toolhost._model.routes import HOST_TIMEOUT_S, HostAddress

__all__ = ["pg_database", "pg_server"]  # the fixtures, used by name

A = HostAddress("host-a", "http://10.0.0.1:8000/mcp")
B = HostAddress("host-b", "http://10.0.0.2:8000/mcp")


@pytest.fixture
def table(pg_database: str) -> Iterator[PostgresRouteTable]:
    routes = PostgresRouteTable(pg_database)
    try:
        yield routes
    finally:
        routes.close()


def _silence(database: str, host: HostAddress) -> None:
    """``host`` last heard from longer ago than HOST_TIMEOUT_S."""
    with psycopg.connect(database) as conn:
        conn.execute("UPDATE toolhost_hosts SET seen_at = now() - make_interval(secs => %s) "
                     "WHERE host_id = %s", (HOST_TIMEOUT_S + 1, host.host_id))


def test_a_key_stays_with_the_host_that_claimed_it(table: PostgresRouteTable) -> None:
    table.announce(A)
    table.announce(B)
    assert table.owner("session\x1fs1") is None
    assert table.claim("session\x1fs1", A.host_id) == A
    assert table.claim("session\x1fs1", B.host_id) == A  # already A's, and A answers
    assert table.owner("session\x1fs1") == A
    table.drop("session\x1fs1")
    assert table.owner("session\x1fs1") is None


def test_concurrent_claims_agree_on_one_owner(table: PostgresRouteTable,
                                              pg_database: str) -> None:
    table.announce(A)
    table.announce(B)
    other = PostgresRouteTable(pg_database)
    found: dict[str, list[HostAddress]] = {"a": [], "b": []}
    start = threading.Barrier(2)

    def claim(routes: PostgresRouteTable, host: HostAddress, into: list[HostAddress]) -> None:
        start.wait()
        into.extend(routes.claim(f"run\x1fp{n}\x1f", host.host_id) for n in range(50))

    threads = [threading.Thread(target=claim, args=(table, A, found["a"])),
               threading.Thread(target=claim, args=(other, B, found["b"]))]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    finally:
        other.close()
    assert found["a"] == found["b"] and len(found["a"]) == 50


def test_a_silent_hosts_run_moves_and_its_session_is_nobodys(
        table: PostgresRouteTable, pg_database: str) -> None:
    table.announce(A)
    table.announce(B)
    table.claim("run\x1fana\x1f", A.host_id)
    table.claim("session\x1fs1", A.host_id)
    _silence(pg_database, A)
    assert table.owner("session\x1fs1") is None  # A's session ended with it
    assert table.claim("run\x1fana\x1f", B.host_id) == B  # the run moves to who asks
    table.announce(A)  # A speaks again: the run stays where it went
    assert table.claim("run\x1fana\x1f", A.host_id) == B


def test_a_retired_host_takes_its_routes_with_it(table: PostgresRouteTable) -> None:
    table.announce(A)
    table.announce(B)
    table.claim("session\x1fs1", A.host_id)
    table.claim("run\x1fben\x1f", B.host_id)
    table.retire(A.host_id)
    assert table.owner("session\x1fs1") is None
    assert table.owner("run\x1fben\x1f") == B


def test_a_key_is_free_text(table: PostgresRouteTable) -> None:
    table.announce(A)
    key = "run\x1fzoë \x00 \ud800\x1f"  # a principal id may hold anything a token says
    assert table.claim(key, A.host_id) == A
    assert table.owner(key) == A
