"""One invocation row edited behind the store's back (a state no toolhost writes, arguments
that are not JSON, a time that is not one) is reported as damaged, in one line naming it;
every other row still lists, shows and is recovered (review of the operator surface, finding 2;
artifact rows had this already, D252).

The store on SQLite and on PostgreSQL, then recovery, then the operator's `toolhost show |
approve | deny | pending | recover | serve` as a real process over a real record, before which
each of these ended in a traceback (and a damaged `running` row stopped `recover`, `pending`
and `serve` for every row).

PostgreSQL runs when tests/pg_server.py finds its binaries (TOOLHOST_REQUIRE_SERVERS=1: it
must).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import attrs
import psycopg
import pytest
from pg_server import pg_database, pg_server
from test_cli import assert_no_traceback

from toolhost._adapters.pg_invocations import PostgresInvocationStore
from toolhost._adapters.sqlite_db import DATABASE_NAME, connect
from toolhost._adapters.sqlite_invocations import SQLiteInvocationStore
from toolhost._model.invocations import (
    InvocationRecord,
    InvocationRecordDamaged,
    InvocationState,
)
from toolhost._model.settings import Settings
from toolhost._pipeline.recovery import RecoveryAction
from toolhost._testing.clocks import DEFAULT_INSTANT
from toolhost.testing import Harness, InvocationStoreContract, run_toolhost

__all__ = ["pg_database", "pg_server"]  # the fixtures, used by name

AWAITING, RUNNING, FAILED = (InvocationState.AWAITING_APPROVAL, InvocationState.RUNNING,
                             InvocationState.FAILED)

#: A row edited behind the store's back: (column, the value written, the field reported).
DAMAGES: list[tuple[str, Any, str]] = [
    ("state", "bogus", "state"),
    ("arguments", "{not json", "arguments"),
    ("arguments", '{"a": 1} and more', "arguments"),
    ("created_at", "yesterday", "created_at"),
    ("scopes", "7", "scopes"),
    ("scopes", "[1]", "scopes"),
    ("policy", "[1,2", "policy"),
    ("policy", "[1,2]", "policy"),
    ("owner", '"x"', "owner"),
    ("run_deadline", "soon", "run_deadline"),
    ("attachments", "[1]", "attachments"),
    # Bytes that are not UTF-8: a BLOB in SQLite, bytea PostgreSQL cannot decode.
    ("approver", b"\xff\xfe", "approver"),
    ("output_refs", "{not json", "output_refs"),
    # An operator's directory names one only as an absolute path with its host: anything
    # else would have an approval run the call in a workspace of its own (D509).
    ("operator_directory", '{"host":"h","path":"proj"}', "operator_directory"),
    ("operator_directory", '{"host":"h","path":42}', "operator_directory"),
    ("operator_directory", '{"path":"/srv/proj"}', "operator_directory"),
    ("operator_directory", '{"host":"h","path":"/srv/proj","inode":"7"}', "operator_directory"),
    ("operator_directory", '["h","/srv/proj"]', "operator_directory"),
]

Damage = Callable[[str, str, Any], None]


@dataclasses.dataclass
class Backend:
    """A record on one backend: its store, a way to write one column of a row directly in
    its database, and what a `toolhost` process needs to use the same record."""

    store: Any
    damage: Damage
    data_dir: Path
    env: dict[str, str]


def _sqlite(data_dir: Path) -> Backend:
    # The data directory as toolhost makes it, then the record's store on it.
    made = run_toolhost("pending", data_dir=data_dir, plugins="")
    assert made.returncode == 0, made.stderr
    database = data_dir / DATABASE_NAME

    def damage(invocation_id: str, column: str, value: Any) -> None:
        with closing(sqlite3.connect(database)) as conn, conn:
            conn.execute(f"UPDATE tool_invocations SET {column} = ? WHERE id = ?",
                         (value, invocation_id))

    return Backend(SQLiteInvocationStore(connect(database)), damage, data_dir, {})


def _postgres(data_dir: Path, url: str) -> Backend:
    def damage(invocation_id: str, column: str, value: Any) -> None:
        with psycopg.connect(url) as conn:
            conn.execute(f"UPDATE tool_invocations SET {column} = %s WHERE id = %s",
                         (value, invocation_id))

    return Backend(PostgresInvocationStore(url, timeout=3), damage, data_dir,
                   {"TOOLHOST_DATABASE_URL": url})


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    data_dir = tmp_path / "data"
    if request.param == "sqlite":
        made = _sqlite(data_dir)
    else:
        made = _postgres(data_dir, request.getfixturevalue("pg_database"))
    try:
        yield made
    finally:
        made.store.close()


def record(invocation_id: str, seconds: int, **changes: Any) -> InvocationRecord:
    """A row created ``seconds`` after the default instant (the listing's order)."""
    return InvocationStoreContract.record(
        id=invocation_id, created_at=DEFAULT_INSTANT + dt.timedelta(seconds=seconds), **changes)


def _three(store: Any) -> list[InvocationRecord]:
    rows = [record(f"inv-{name}", i) for i, name in enumerate("abc")]
    for row in rows:
        store.insert(row)
    return rows


# ---------------------------------------------------------------------- the store


@pytest.mark.parametrize(("column", "value", "field"), DAMAGES,
                         ids=[f"{d[0]}-{i}" for i, d in enumerate(DAMAGES)])
def test_a_damaged_row_is_skipped_and_reported_the_others_list_and_get(
        backend: Backend, column: str, value: Any, field: str) -> None:
    store = backend.store
    a, b, c = _three(store)
    backend.damage(b.id, column, value)

    # The records: the damaged row skipped (a damaged created_at may move it in the order).
    assert store.list() == [a, c]
    assert list(store.history(limit=10)) == [c, a]
    # The page with the damaged row in it, as what is damaged in it.
    rows = store.list_rows()
    assert [r for r in rows if isinstance(r, InvocationRecord)] == [a, c]
    (damaged,) = [r for r in rows if not isinstance(r, InvocationRecord)]
    assert isinstance(damaged, InvocationRecordDamaged)
    assert (damaged.id, damaged.field, damaged.tool_name, damaged.tool_version) == (
        b.id, field, "fx.echo", "1.0.0")

    # The good ones get; the damaged one is one refusal naming its id and the field.
    assert store.get(a.id) == a and store.get(c.id) == c
    with pytest.raises(InvocationRecordDamaged) as refused:
        store.get(b.id)
    assert (refused.value.id, refused.value.field) == (b.id, field)
    assert str(refused.value) == (f"invocation {b.id} is damaged ({field}): its row was "
                                  "changed outside toolhost; restore it from a backup")


def test_a_time_written_without_its_offset_is_read_as_utc(backend: Backend) -> None:
    # Not damage: the store writes UTC, and a naive time would fail whatever compares it with
    # the clock's (an approval against the run's deadline).
    a, b, c = _three(backend.store)
    backend.damage(b.id, "run_deadline", "2026-07-25T13:03:11")
    read = attrs.evolve(b, run_deadline=dt.datetime(2026, 7, 25, 13, 3, 11, tzinfo=dt.UTC))
    assert backend.store.get(b.id) == read
    assert backend.store.list() == [a, read, c]


def test_a_damaged_running_row_is_reported_and_every_other_one_is_settled(
        backend: Backend) -> None:
    with Harness.over({}, settings=Settings(env=backend.env), data_dir=backend.data_dir) as h:
        store = h.host.pipeline.invocations
        # Three rows a process that is gone left running (no owner: recorded before owners
        # were), the middle one edited since.
        for i, name in enumerate("abc"):
            store.insert(record(f"inv-{name}", i, state=RUNNING, started_at=DEFAULT_INSTANT))
        backend.damage("inv-b", "created_at", "yesterday")

        for rerun in (False, True):  # serve's start and periodic pass; `toolhost recover`
            report = {r.invocation_id: r for r in h.host.recover(rerun=rerun)}
            assert report["inv-b"].action is RecoveryAction.LEFT
            assert (report["inv-b"].tool, report["inv-b"].version) == ("fx.echo", "1.0.0")
            assert report["inv-b"].reason == (
                "its record is damaged (created_at): left as it is; it was changed outside "
                "toolhost (restore it from a backup)")
            if not rerun:
                assert [report["inv-a"].action, report["inv-c"].action] == [
                    RecoveryAction.FAILED, RecoveryAction.FAILED]
        assert [(r.id, r.state) for r in store.list()] == [("inv-a", FAILED), ("inv-c", FAILED)]


# ---------------------------------------------------------------------- the operator's commands


def toolhost(backend: Backend, *args: str, input: str | None = None
             ) -> subprocess.CompletedProcess[str]:
    return run_toolhost(*args, data_dir=backend.data_dir, plugins="", env=backend.env,
                        input=input)


#: The damages the commands are shown, by the reader that refused each before.
COMMAND_DAMAGES = [("state", "bogus"), ("arguments", "{not json"),
                   ("created_at", "yesterday"), ("owner", '"x"'),
                   ("operator_directory", '{"host":"h","path":"proj"}')]


@pytest.mark.parametrize(("column", "value"), COMMAND_DAMAGES, ids=[d[0] for d in COMMAND_DAMAGES])
def test_show_approve_and_deny_of_a_damaged_row_are_one_line_and_exit_1(
        backend: Backend, column: str, value: str) -> None:
    a, b, _ = _three(backend.store)
    backend.damage(b.id, column, value)
    line = (f"toolhost: invocation {b.id} is damaged ({column}): its row was changed outside "
            "toolhost; restore it from a backup\n")
    for command in (["show", b.id], ["show", b.id, "--json"], ["approve", b.id],
                    ["deny", b.id, "--reason", "no"]):
        result = toolhost(backend, *command)
        assert_no_traceback(result)
        assert (result.returncode, result.stdout, result.stderr) == (1, "", line), command
    # Nothing was decided on it, and the sound rows are as they were.
    assert backend.store.get(a.id) == a
    shown = toolhost(backend, "show", a.id)
    assert shown.returncode == 0 and "state        awaiting_approval" in shown.stdout


def test_pending_json_skips_a_row_whose_arguments_are_not_json(backend: Backend) -> None:
    a, b, c = _three(backend.store)
    backend.damage(b.id, "arguments", "{not json")
    listed = toolhost(backend, "pending", "--json")
    assert_no_traceback(listed)
    assert listed.returncode == 0
    assert [r["id"] for r in json.loads(listed.stdout)] == [a.id, c.id]
    assert listed.stderr == f"toolhost: invocation {b.id} is damaged (arguments): skipped\n"
    # The lines show each row's stored text, escaped.
    text = toolhost(backend, "pending")
    assert text.returncode == 0 and f"{b.id}  fx.echo@1.0.0  " in text.stdout


def test_a_damaged_running_row_stops_neither_recover_nor_pending_nor_serve(
        backend: Backend) -> None:
    store = backend.store
    for i, name in enumerate("abc"):
        store.insert(record(f"inv-{name}", i, state=RUNNING, started_at=DEFAULT_INSTANT))
    store.insert(record("inv-d", 3))
    backend.damage("inv-b", "created_at", "yesterday")

    pending = toolhost(backend, "pending")
    assert_no_traceback(pending)
    assert pending.returncode == 0 and pending.stdout.startswith("inv-d  fx.echo@1.0.0  ")
    assert pending.stderr == (
        "toolhost: 2 invocation(s) were left running by a process that is gone: toolhost "
        "recover settles them\n"
        "toolhost: invocation inv-b is damaged (created_at): it is running, or was left "
        "running, and toolhost recover leaves it as it is\n")

    # serve settles the rows at its start (not run again), and serves.
    initialize = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}}) + "\n"
    served = toolhost(backend, "serve", input=initialize)
    assert_no_traceback(served)
    assert served.returncode == 0, served.stderr
    assert json.loads(served.stdout.splitlines()[0])["result"]["serverInfo"]["name"] == "toolhost"
    assert [(r.id, r.state) for r in store.list(state=RUNNING)] == []
    assert store.get("inv-a").reason_code == store.get("inv-c").reason_code == (
        "tool.internal.interrupted")

    recovered = toolhost(backend, "recover")
    assert_no_traceback(recovered)
    assert recovered.returncode == 0
    # The log says it too, as it says every row recovery settles (serve has only the log).
    assert [json.loads(line)["event"] for line in recovered.stderr.splitlines()] == [
        "pipeline.recover_skipped_damaged"]
    assert recovered.stdout == (
        "inv-b  fx.echo@1.0.0  left: its record is damaged (created_at): left as it is; it was "
        "changed outside toolhost (restore it from a backup)\n")
    as_json = toolhost(backend, "recover", "--json")
    assert as_json.returncode == 0
    assert [(r["invocation_id"], r["action"]) for r in json.loads(as_json.stdout)] == [
        ("inv-b", "left")]
