"""The SQLite InvocationStore runs the port's contract suite, plus migration behaviour and how
it tells a live owner from a gone one (real processes, a reused pid, another boot, another pid
namespace)."""

from __future__ import annotations

import datetime as dt
import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from conftest import Closes

from toolhost._adapters.sqlite_db import (
    CHECKPOINT_EVERY,
    DATABASE_NAME,
    WAL_BACKSTOP_PAGES,
    connect,
    migrate,
    table_names,
)
from toolhost._adapters.sqlite_invocations import (
    _COLUMNS,
    MIGRATIONS,
    SQLiteInvocationStore,
    process_state,
    this_process,
)
from toolhost._model.convert import from_row
from toolhost._model.invocations import InvocationRecord, InvocationState, OwnerState
from toolhost._testing.clocks import DEFAULT_INSTANT
from toolhost.testing import InvocationStoreContract

LINUX = Path("/proc/self/stat").exists()


class TestSQLiteInvocationStore(InvocationStoreContract):
    def make_store(self, tmp_path: Path) -> SQLiteInvocationStore:
        return SQLiteInvocationStore(connect(tmp_path / DATABASE_NAME))

    def damage_state(self, tmp_path: Path, store: object, invocation_id: str) -> None:
        with closing(sqlite3.connect(tmp_path / DATABASE_NAME)) as conn, conn:
            conn.execute("UPDATE tool_invocations SET state = 'bogus' WHERE id = ?",
                         (invocation_id,))


def test_wal_mode_and_versioned_migrations(tmp_path: Path, closes: Closes) -> None:
    conn = connect(tmp_path / DATABASE_NAME)
    closes(SQLiteInvocationStore(conn))
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("SELECT component, version FROM schema_migrations").fetchall() == [
        ("invocations", 1), ("invocations", 2), ("invocations", 3), ("invocations", 4),
        ("invocations", 5), ("invocations", 6), ("invocations", 7), ("invocations", 8),
        ("invocations", 9), ("invocations", 10),
    ]
    migrate(conn, MIGRATIONS)  # idempotent
    assert "tool_invocations" in table_names(conn)


def test_rows_of_a_version_4_database_read_with_no_deadline_and_no_attachments(
    tmp_path: Path,
) -> None:
    # A database an older toolhost wrote (migrations 1 to 4) with a row in it: migration 5
    # adds run_deadline (NULL) and attachments ('[]') and the row reads as it did.
    conn = connect(tmp_path / DATABASE_NAME)
    migrate(conn, MIGRATIONS[:4])
    conn.execute(
        "INSERT INTO tool_invocations (id, run_id, principal_id, scopes, tool_name, "
        "tool_version, arguments, argument_digest, state, artifact_refs, created_at) "
        "VALUES ('old-1', 'run-1', 'p', '[]', 'fx.echo', '1.0.0', '{}', 'sha256:00', "
        "'awaiting_approval', '[]', ?)", (DEFAULT_INSTANT.isoformat(),))
    conn.close()
    store = SQLiteInvocationStore(connect(tmp_path / DATABASE_NAME))
    record = store.get("old-1")
    assert (record.run_deadline, record.attachments, record.state) == (
        None, (), InvocationState.AWAITING_APPROVAL)
    store.close()


def test_rows_survive_a_new_connection(tmp_path: Path, closes: Closes) -> None:
    first = closes(SQLiteInvocationStore(connect(tmp_path / DATABASE_NAME)))
    first.insert(InvocationStoreContract.record())
    second = closes(SQLiteInvocationStore(connect(tmp_path / DATABASE_NAME)))
    assert second.get("inv-1").state is InvocationState.AWAITING_APPROVAL


def test_a_transactions_writes_are_seen_elsewhere_only_once_committed(
        tmp_path: Path, closes: Closes) -> None:
    a = closes(SQLiteInvocationStore(connect(tmp_path / DATABASE_NAME)))
    b = closes(SQLiteInvocationStore(connect(tmp_path / DATABASE_NAME)))
    with a.transaction():
        a.insert(InvocationStoreContract.record(id="inv-1"))
        a.insert(InvocationStoreContract.record(id="inv-2"))
        assert (a.count(), b.count()) == (2, 0)  # WAL: the other connection reads the last commit
    assert b.count() == 2


def test_two_connections_race_and_exactly_one_wins(tmp_path: Path, closes: Closes) -> None:
    a = closes(SQLiteInvocationStore(connect(tmp_path / DATABASE_NAME)))
    b = closes(SQLiteInvocationStore(connect(tmp_path / DATABASE_NAME)))
    a.insert(InvocationStoreContract.record())
    expected = {InvocationState.AWAITING_APPROVAL}
    wins = [s.transition("inv-1", expected=expected, to=InvocationState.APPROVED, approver=n)
            for s, n in ((a, "a"), (b, "b"))]
    assert wins == [True, False]


def test_a_database_from_before_owners_gains_the_column_and_keeps_its_rows(
    tmp_path: Path, closes: Closes,
) -> None:
    conn = connect(tmp_path / DATABASE_NAME)
    migrate(conn, MIGRATIONS[:2])
    conn.execute(
        "INSERT INTO tool_invocations (id, run_id, principal_id, scopes, tool_name, "
        "tool_version, arguments, argument_digest, state, artifact_refs, created_at) VALUES "
        "('old', 'r', 'p', '[]', 'fx.echo', '1.0.0', '{}', 'sha256:00', 'running', '[]', "
        "'2026-07-25T13:03:11.000000+00:00')")
    store = closes(SQLiteInvocationStore(conn))
    old = store.get("old")
    assert (old.state, old.owner) == (InvocationState.RUNNING, None)
    assert store.owner_state(old.owner) is OwnerState.GONE


def test_a_row_reads_back_as_the_shared_converter_reads_it(tmp_path: Path) -> None:
    # The store turns rows into records with its own function (cattrs per row was the cost
    # of a page); it must agree with toolhost._model.convert on every column, set or not.
    store = SQLiteInvocationStore(connect(tmp_path / DATABASE_NAME))
    instant = DEFAULT_INSTANT + dt.timedelta(microseconds=7)
    records = [
        InvocationStoreContract.record(),
        InvocationStoreContract.record(
            id="full", conversation_id="c1", tool_version=None, arguments=None,
            argument_digest=None, state=InvocationState.FAILED, policy=None, approver="ops",
            denial_reason="why", result_structured={"ok": [1, 2.5, None]}, result_content="ok",
            output_trust="INTERNAL_TOOL", failure_kind="NOT_FOUND", reason_code="tool.x",
            retryable=False, failure_detail={"offset": 3, "é": "\u202e"},
            artifact_refs=({"id": "a1"}, {"id": "a2"}), started_at=instant,
            finished_at=instant, decided_at=instant, owner={"host": "h", "pid": 7}),
        InvocationStoreContract.record(id="scalar", arguments=[1, "two", 3.0], retryable=True),
    ]
    for record in records:
        store.insert(record)
    rows = store._conn.execute(f"SELECT {', '.join(_COLUMNS)} FROM tool_invocations "
                               "ORDER BY id").fetchall()
    shared = sorted((from_row(InvocationRecord, dict(zip(_COLUMNS, row, strict=True)))
                     for row in rows), key=lambda r: r.id)
    assert sorted(store.list(), key=lambda r: r.id) == shared == sorted(records,
                                                                       key=lambda r: r.id)
    assert [type(r.retryable) for r in shared] == [type(r.retryable) for r in sorted(
        store.list(), key=lambda r: r.id)]
    store.close()


# ---------------------------------------------------------------------------- checkpoints


def rows_in_the_database_file(path: Path) -> int:
    """The rows the database file itself holds, its WAL ignored (``immutable``): the rows a
    checkpoint has copied back. -1 while a checkpoint is copying: ``immutable`` takes no
    lock, so a read can meet a half-copied file ("database disk image is malformed")."""
    conn = sqlite3.connect(f"{path.as_uri()}?immutable=1", uri=True)
    try:
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}
        if "tool_invocations" not in tables:
            return 0
        return int(conn.execute("SELECT COUNT(*) FROM tool_invocations").fetchone()[0])
    except sqlite3.DatabaseError:
        return -1
    finally:
        conn.close()


def eventually(condition: Callable[[], bool]) -> bool:
    """Polls ``condition`` for up to a minute: a wait for another thread, not a timing."""
    deadline = time.monotonic() + 60
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_the_writing_connection_leaves_checkpoints_to_the_checkpointer(tmp_path: Path) -> None:
    path = tmp_path / DATABASE_NAME
    store = SQLiteInvocationStore(connect(path))
    try:
        assert store.checkpointer is not None
        # SQLite's own checkpoint (inside a commit) only past the backstop, far above its
        # default.
        (pages,) = store._conn.execute("PRAGMA wal_autocheckpoint").fetchone()
        assert pages == WAL_BACKSTOP_PAGES > 1000
        for i in range(CHECKPOINT_EVERY):
            store.insert(InvocationStoreContract.record(id=f"inv-{i}"))
        # Well under 1,000 WAL pages: no commit checkpointed, so the thread copied them back.
        assert eventually(lambda: rows_in_the_database_file(path) == CHECKPOINT_EVERY)
    finally:
        store.close()
    assert not store.checkpointer._thread.is_alive()


def test_a_trickle_of_writes_is_checkpointed_once_it_pauses(tmp_path: Path) -> None:
    path = tmp_path / DATABASE_NAME
    store = SQLiteInvocationStore(connect(path))
    try:
        store.insert(InvocationStoreContract.record())
        assert eventually(lambda: rows_in_the_database_file(path) == 1)
        store.insert(InvocationStoreContract.record(id="inv-2"))  # the next write wakes it
        assert eventually(lambda: rows_in_the_database_file(path) == 2)
    finally:
        store.close()


def test_an_in_memory_database_has_no_checkpointer() -> None:
    store = SQLiteInvocationStore(connect(":memory:"))
    assert store.checkpointer is None
    store.insert(InvocationStoreContract.record())
    assert store.count() == 1
    store.close()


# ---------------------------------------------------------------------------- owners

CHILD = """
import json, sys
from toolhost._adapters.sqlite_invocations import this_process
print(json.dumps(this_process()), flush=True)
sys.stdin.read()
"""


def _child() -> tuple[subprocess.Popen[str], dict[str, Any]]:
    """A live process and the owner it records; it exits when its stdin closes."""
    proc = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, json.loads(proc.stdout.readline())


def test_another_live_process_is_alive_and_gone_once_it_has_exited() -> None:
    proc, owner = _child()
    try:
        assert owner["pid"] == proc.pid and owner != this_process()
        assert process_state(owner) is OwnerState.ALIVE
    finally:
        proc.communicate("")
    assert process_state(owner) is OwnerState.GONE


@pytest.mark.skipif(not LINUX, reason="/proc: a killed, unreaped child is a zombie")
def test_a_killed_process_is_gone_even_before_it_is_reaped() -> None:
    proc, owner = _child()
    proc.kill()
    # Wait for it to exit without reaping it (WNOWAIT): /proc still lists it, as a zombie,
    # with its pid and start time.
    os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
    assert Path(f"/proc/{proc.pid}/stat").read_text().split(") ")[1][0] == "Z"
    assert process_state(owner) is OwnerState.GONE
    proc.communicate()  # reaped: no such pid at all
    assert process_state(owner) is OwnerState.GONE


@pytest.mark.skipif(not LINUX, reason="start times and boot ids are read from /proc")
def test_a_reused_pid_is_not_its_old_owner() -> None:
    me = this_process()
    assert {"boot", "pid_ns", "start"} <= set(me)
    # This pid is alive, but not the process that started at another time.
    assert process_state({**me, "start": me["start"] - 1}) is OwnerState.GONE
    assert process_state({**me, "host": "elsewhere"}) is OwnerState.ALIVE  # host is a label


@pytest.mark.skipif(not LINUX, reason="boot ids and pid namespaces are read from /proc")
def test_another_boot_is_gone_and_another_pid_namespace_cannot_be_told() -> None:
    me = this_process()
    assert process_state({**me, "boot": "another-boot"}) is OwnerState.GONE
    assert process_state({**me, "pid_ns": "pid:[1]"}) is OwnerState.UNKNOWN


def test_a_pid_nobody_has_is_gone_and_a_malformed_owner_is_left_alone() -> None:
    me = this_process()
    free = _free_pid()
    assert process_state({**me, "pid": free}) is OwnerState.GONE
    assert process_state({"host": me["host"], "pid": free}) is OwnerState.GONE
    for pid in (None, "1", 0, -1, True):
        assert process_state({**me, "pid": pid}) is OwnerState.UNKNOWN


def test_without_proc_the_host_and_pid_decide_and_a_live_pid_stays_alive() -> None:
    me = this_process()
    bare = {"host": me["host"], "pid": os.getpid()}  # as a platform without /proc records it
    assert process_state(bare) is OwnerState.ALIVE
    assert process_state({**bare, "host": "elsewhere"}) is OwnerState.UNKNOWN


def _free_pid() -> int:
    """A pid no process has now (a child that has exited and been reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", ""])
    proc.wait()
    return proc.pid
