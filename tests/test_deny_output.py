"""What the approval commands print of a row's text chosen elsewhere is escaped, never written
raw to the operator's terminal (review of the operator surface, finding 5).

A row an MCP client's user declines is recorded with the approver ``mcp-client:<the name the
client gave itself>``; `toolhost deny` of it again printed that name raw, so a client could
clear the screen and forge a line. `show` escaped it already. The same holds for the other
lines that print a row's text: `pending` (a tool name, a time edited into the row) and
`recover` (the tool of a row it settles). Each command runs as a real process over a real
record.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from test_cli import assert_no_traceback

from toolhost._adapters.sqlite_db import DATABASE_NAME, connect
from toolhost._adapters.sqlite_invocations import SQLiteInvocationStore
from toolhost._model.invocations import InvocationState
from toolhost._testing.clocks import DEFAULT_INSTANT
from toolhost.testing import InvocationStoreContract, run_toolhost

#: A client's name that clears the screen, homes the cursor and forges a line in green.
FORGED = "evil\x1b[2J\x1b[H\x1b[32mtoolhost: all clear\x1b[0m\r"
FORGED_SHOWN = "evil\\u001b[2J\\u001b[H\\u001b[32mtoolhost: all clear\\u001b[0m\\r"


def toolhost(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_toolhost(*args, data_dir=data_dir, plugins="")


def store_in(data_dir: Path) -> SQLiteInvocationStore:
    """The record of a data directory as toolhost makes it."""
    made = toolhost(data_dir, "pending")
    assert made.returncode == 0, made.stderr
    return SQLiteInvocationStore(connect(data_dir / DATABASE_NAME))


def test_deny_of_a_row_a_client_declined_prints_the_clients_name_escaped(
        tmp_path: Path) -> None:
    data = tmp_path / "data"
    store = store_in(data)
    # As the MCP server records a call its client's user declined (_mcp/calls.py).
    store.insert(InvocationStoreContract.record(
        id="inv-1", state=InvocationState.DENIED, approver=f"mcp-client:{FORGED}",
        denial_reason="declined in the MCP client", decided_at=DEFAULT_INSTANT,
        finished_at=DEFAULT_INSTANT))
    store.close()

    denied = toolhost(data, "deny", "inv-1", "--reason", "no")
    assert_no_traceback(denied)
    assert denied.returncode == 0
    assert "\x1b" not in denied.stderr and "\r" not in denied.stderr
    assert denied.stderr == (
        f"toolhost: invocation inv-1 was already denied by mcp-client:{FORGED_SHOWN} "
        "(declined in the MCP client); this reason was not recorded\n")
    # As `show` prints it.
    shown = toolhost(data, "show", "inv-1")
    assert f"by mcp-client:{FORGED_SHOWN}\n" in shown.stdout


def test_pending_and_recover_print_a_rows_text_escaped(tmp_path: Path) -> None:
    data = tmp_path / "data"
    store = store_in(data)
    # Rows edited outside toolhost: a tool's name and a time no toolhost writes.
    store.insert(InvocationStoreContract.record(id="inv-1", tool_name=f"fx.{FORGED}"))
    store.insert(InvocationStoreContract.record(
        id="inv-2", tool_name=f"fx.{FORGED}", state=InvocationState.RUNNING,
        started_at=DEFAULT_INSTANT))
    store.close()

    pending = toolhost(data, "pending")
    assert_no_traceback(pending)
    assert pending.returncode == 0
    assert "\x1b" not in pending.stdout and "\r" not in pending.stdout
    assert pending.stdout.startswith(f"inv-1  fx.{FORGED_SHOWN}@1.0.0  ")

    recovered = toolhost(data, "recover")
    assert_no_traceback(recovered)
    assert recovered.returncode == 0
    assert "\x1b" not in recovered.stdout and "\r" not in recovered.stdout
    assert recovered.stdout.startswith(f"inv-2  fx.{FORGED_SHOWN}@1.0.0  failed: ")


def test_an_attachments_name_is_printed_escaped(capsys: Any) -> None:
    # The name is the model's (artifact.export's path): a C1 CSI (U+009B) or a direction
    # override passed json.dumps as they were, to the terminal.
    from types import SimpleNamespace

    from toolhost._cli.common import print_attachments

    ref = SimpleNamespace(id="a" * 32, name="r\u202eport\x9b2J.txt", byte_count=3,
                          media_type="text/plain")
    print_attachments([ref])
    assert capsys.readouterr().err == (
        f'toolhost: attached {"a" * 32} "r\\u202eport\\u009b2J.txt" (3 bytes, text/plain)\n')
