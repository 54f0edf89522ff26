"""The SQLite InvocationStore runs the port's contract suite, plus migration behaviour and how
it tells a live owner from a gone one (real processes, a reused pid, another boot, another pid
namespace)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from toolhost._adapters.sqlite_db import DATABASE_NAME, connect, migrate, table_names
from toolhost._adapters.sqlite_invocations import (
    MIGRATIONS,
    SQLiteInvocationStore,
    process_state,
    this_process,
)
from toolhost._model.invocations import InvocationState, OwnerState
from toolhost.testing import InvocationStoreContract

LINUX = Path("/proc/self/stat").exists()


class TestSQLiteInvocationStore(InvocationStoreContract):
    def make_store(self, tmp_path: Path) -> SQLiteInvocationStore:
        return SQLiteInvocationStore(connect(tmp_path / DATABASE_NAME))


def test_wal_mode_and_versioned_migrations(tmp_path: Path) -> None:
    conn = connect(tmp_path / DATABASE_NAME)
    SQLiteInvocationStore(conn)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("SELECT component, version FROM schema_migrations").fetchall() == [
        ("invocations", 1), ("invocations", 2), ("invocations", 3)
    ]
    migrate(conn, MIGRATIONS)  # idempotent
    assert "tool_invocations" in table_names(conn)


def test_rows_survive_a_new_connection(tmp_path: Path) -> None:
    first = SQLiteInvocationStore(connect(tmp_path / DATABASE_NAME))
    first.insert(InvocationStoreContract.record())
    second = SQLiteInvocationStore(connect(tmp_path / DATABASE_NAME))
    assert second.get("inv-1").state is InvocationState.AWAITING_APPROVAL


def test_two_connections_race_and_exactly_one_wins(tmp_path: Path) -> None:
    a = SQLiteInvocationStore(connect(tmp_path / DATABASE_NAME))
    b = SQLiteInvocationStore(connect(tmp_path / DATABASE_NAME))
    a.insert(InvocationStoreContract.record())
    expected = {InvocationState.AWAITING_APPROVAL}
    wins = [s.transition("inv-1", expected=expected, to=InvocationState.APPROVED, approver=n)
            for s, n in ((a, "a"), (b, "b"))]
    assert wins == [True, False]


def test_a_database_from_before_owners_gains_the_column_and_keeps_its_rows(
    tmp_path: Path,
) -> None:
    conn = connect(tmp_path / DATABASE_NAME)
    migrate(conn, MIGRATIONS[:2])
    conn.execute(
        "INSERT INTO tool_invocations (id, run_id, principal_id, scopes, tool_name, "
        "tool_version, arguments, argument_digest, state, artifact_refs, created_at) VALUES "
        "('old', 'r', 'p', '[]', 'fx.echo', '1.0.0', '{}', 'sha256:00', 'running', '[]', "
        "'2026-07-25T13:03:11.000000+00:00')")
    store = SQLiteInvocationStore(conn)
    old = store.get("old")
    assert (old.state, old.owner) == (InvocationState.RUNNING, None)
    assert store.owner_state(old.owner) is OwnerState.GONE


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
