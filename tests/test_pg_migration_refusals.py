"""What a host starting on PostgreSQL says when its schema check or migration fails: a lost
session is "cannot reach the database" (retryable, the server's), only a refused privilege
asks for the role's right to create tables.

Before: every error of the migration said "give TOOLHOST_DATABASE_URL's role the right to
create tables there", a superuser's session cut by a restart, a failover or an
administrator's ``pg_terminate_backend`` included.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import psycopg
import pytest
from pg_server import PgServer, pg_database, pg_server

from toolhost._adapters.pg_invocations import (
    _MIGRATION_LOCK,
    PostgresInvocationStore,
    shown_conninfo,
)
from toolhost._model.settings import StoreUnavailable

__all__ = ["pg_database", "pg_server"]  # the fixtures, used by name

RIGHTS = "give TOOLHOST_DATABASE_URL's role the right to create tables there"


def _refusal(url: str) -> str:
    with pytest.raises(StoreUnavailable) as refused:
        PostgresInvocationStore(url).close()
    return str(refused.value)


def _waiting_for_the_lock(admin: psycopg.Connection[tuple[object, ...]], database: str,
                          within: float = 30.0) -> int:
    """The backend of the session that waits for the migration lock (the starting host's)."""
    until = time.monotonic() + within
    while time.monotonic() < until:
        row = admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND wait_event_type = 'Lock' "
            "AND query LIKE '%%pg_advisory_xact_lock%%'", (database,)).fetchone()
        if row is not None:
            return int(str(row[0]))
        time.sleep(0.05)
    raise AssertionError("the starting host never waited for the migration lock")


def test_a_session_lost_during_the_migration_says_the_database_cannot_be_reached(
        pg_database: str) -> None:
    name = pg_database.rsplit("/", 1)[1]
    refusals: list[str] = []

    def start() -> None:
        refusals.append(_refusal(pg_database))

    # Another host migrating holds the lock, so the starting one waits in its migration; an
    # administrator (or a failover) then cuts its session.
    with psycopg.connect(pg_database, autocommit=True) as admin:
        admin.execute("SELECT pg_advisory_lock(%s)", (_MIGRATION_LOCK,))
        starting = threading.Thread(target=start)
        starting.start()
        try:
            backend = _waiting_for_the_lock(admin, name)
            admin.execute("SELECT pg_terminate_backend(%s)", (backend,))
        finally:
            starting.join(30)
    shown = shown_conninfo(pg_database)
    assert refusals == [
        f"cannot reach the database {shown} (terminating connection due to administrator "
        "command): start it, or point TOOLHOST_DATABASE_URL at one that runs"]


@pytest.fixture
def role(pg_server: PgServer, pg_database: str) -> Iterator[str]:
    """A login role with no right to create anything in the fresh database (PostgreSQL 15
    gives PUBLIC no CREATE on ``public``): its URL."""
    name = pg_database.rsplit("/", 1)[1]
    role = f"norights_{name}"
    pg_server.execute(f"CREATE ROLE {role} LOGIN")
    try:
        yield pg_database.replace("postgres@", f"{role}@", 1)
    finally:
        pg_server.execute(f"DROP OWNED BY {role}", name)
        pg_server.execute(f"DROP ROLE {role}")


def test_a_role_that_may_not_create_the_tables_is_told_so(role: str) -> None:
    refusal = _refusal(role)
    assert refusal.startswith(f"cannot use the database {shown_conninfo(role)} (permission "
                              "denied for schema public"), refusal
    assert refusal.endswith(f"{RIGHTS}, or use another database"), refusal


def test_another_refusal_of_the_schema_asks_nothing_of_the_roles_rights(
        pg_server: PgServer, pg_database: str) -> None:
    """A table of another program under the migrations' name: the database refused toolhost's
    schema, and the role's rights are not why."""
    name = pg_database.rsplit("/", 1)[1]
    pg_server.execute("CREATE TABLE toolhost_schema_migrations (id integer)", name)
    refusal = _refusal(pg_database)
    assert refusal.startswith(f"cannot use the database {shown_conninfo(pg_database)} ("), \
        refusal
    assert RIGHTS not in refusal, refusal
    assert refusal.endswith("toolhost cannot check or create its tables there: fix what it "
                            "said, or use another database"), refusal
