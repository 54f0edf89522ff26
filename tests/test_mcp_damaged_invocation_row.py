"""An invocation row changed behind the store's back (D415: it reads as
``InvocationRecordDamaged``) met by ``tools/call``, and the port's optional ``list_rows``.

A call that names the row (a 2026-07-28 retry answering its question) or decides it (the
person's answer to a pushed question) is answered the JSON-RPC error for a record that cannot
be found, with the line the CLI prints for the row, and the server logs one line: before, it
was the catch-all "The tool failed unexpectedly." (or, for a denial, the store's outage, to be
retried forever). A repeated words call skips a damaged row of its session as the other
calls' lookup (``list``) does, and the person is asked anew. The server runs in this process
(``mcp.Client(server)``, as in ``test_mcp_in_call``) over a real host and SQLite record,
damaged by a raw UPDATE.
"""

from __future__ import annotations

import asyncio
import inspect
import io
import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
import pytest

mcp = pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

import mcp.types as types  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402
from test_damaged_invocation_rows import record  # noqa: E402
from test_inbox_app import ADA  # noqa: E402
from test_inbox_app import _get as get  # noqa: E402
from test_inbox_app import _inbox as inbox_over  # noqa: E402
from test_mcp_in_call import (  # noqa: E402
    APPROVE,
    DECLINE,
    SEEN,
    host,  # noqa: F401 - the fixture, used by name
    person,
    serve,
)

from toolhost._adapters.sqlite_db import DATABASE_NAME, connect  # noqa: E402
from toolhost._adapters.sqlite_invocations import SQLiteInvocationStore  # noqa: E402
from toolhost._composition import Host  # noqa: E402
from toolhost._mcp.resources import RESOURCE_NOT_FOUND  # noqa: E402
from toolhost._model.invocations import InvocationRecordDamaged, InvocationState  # noqa: E402
from toolhost._pipeline.recovery import RecoveryAction  # noqa: E402
from toolhost._pipeline.rows import lists_rows  # noqa: E402
from toolhost._ports.invocations import RowListingStore  # noqa: E402
from toolhost._testing.clocks import DEFAULT_INSTANT  # noqa: E402

APPROVAL = "toolhost.approval"
WORDS = types.ElicitResult(action="accept", content={"text": "my own words"})
CANCEL = types.ElicitResult(action="cancel")
MODEL = {"text": "the model's words"}

#: (column, the value a hand edit wrote, the field reported): two readers that refuse it.
DAMAGES = [("state", "bogus", "state"), ("created_at", "yesterday", "created_at")]


def damage(host: Host, column: str, value: Any, where: str,  # noqa: F811
           *args: Any) -> None:
    """Write one column of the rows ``where`` selects straight into the record's file."""
    with closing(sqlite3.connect(host.data_dir / DATABASE_NAME)) as db, db:
        db.execute(f"UPDATE tool_invocations SET {column} = ? WHERE {where}", (value, *args))


def refusal(invocation_id: str, field: str) -> str:
    """What ``toolhost show ID`` prints for the row, less its ``toolhost: ``."""
    return str(InvocationRecordDamaged(invocation_id, field))


def assert_refused(refused: pytest.ExceptionInfo[MCPError], invocation_id: str, field: str,
                   logged: io.StringIO) -> None:
    """The damaged row's error, and its one line in the server's log (no traceback)."""
    assert (refused.value.error.code, refused.value.error.message) == (
        RESOURCE_NOT_FOUND, refusal(invocation_id, field))
    assert refused.value.error.data == {"invocationId": invocation_id, "field": field}
    lines = [json.loads(line) for line in logged.getvalue().splitlines()]
    assert [(e["event"], e.get("invocation_id"), e.get("field")) for e in lines
            if e["level"] in ("warning", "error")] == [
        ("mcp.call.record_damaged", invocation_id, field)]
    assert "Traceback" not in logged.getvalue()


# ---------------------------------------------------------------- a row the call names


@pytest.mark.parametrize(("column", "value", "field"), DAMAGES, ids=[d[0] for d in DAMAGES])
def test_a_2026_answer_for_a_row_damaged_since_it_was_asked_is_its_damage(
        host: Host, logged: io.StringIO, column: str, value: str,  # noqa: F811
        field: str) -> None:
    # Before: "The tool failed unexpectedly." (tool.internal.unexpected), the catch-all.
    server, _ = serve(host)

    async def journey() -> None:
        async with mcp.Client(server, mode="2026-07-28", elicitation_callback=person()) as client:
            asked = await client.session.call_tool("fx.gated", {"path": "g.txt"},
                                                   allow_input_required=True)
            assert isinstance(asked, types.InputRequiredResult)
            damage(host, column, value, "id = ?", asked.request_state)
            with pytest.raises(MCPError) as refused:
                await client.session.call_tool(
                    "fx.gated", {"path": "g.txt"}, allow_input_required=True,
                    request_state=asked.request_state, input_responses={APPROVAL: APPROVE})
            assert_refused(refused, str(asked.request_state), field, logged)
            # The session goes on; the same call again is a new one (``list`` skips the
            # damaged row), asked anew.
            again = await client.session.call_tool("fx.gated", {"path": "g.txt"},
                                                   allow_input_required=True)
            assert isinstance(again, types.InputRequiredResult)
            assert again.request_state != asked.request_state

    asyncio.run(journey())
    assert SEEN == []


@pytest.mark.parametrize("answer", [APPROVE, DECLINE], ids=["approve", "decline"])
@pytest.mark.parametrize(("column", "value", "field"), DAMAGES, ids=[d[0] for d in DAMAGES])
def test_an_answer_to_a_pushed_question_whose_row_was_damaged_meanwhile_is_its_damage(
        host: Host, logged: io.StringIO, column: str, value: str, field: str,  # noqa: F811
        answer: types.ElicitResult) -> None:
    # Before: an approval was the catch-all; a denial read as the store's outage ("could not
    # record this call... Try again later", retryable), which no retry would end.
    _answered_while_damaged(host, logged, column, value, field, answer)
    # Nothing was decided on it: the row is as the edit left it.
    assert [value] == [r[1 if column == "state" else 2] for r in _ids(host)]


@pytest.mark.parametrize(("column", "value"), [("principal_id", "mallory"),
                                              ("run_id", "another-run")])
def test_an_approval_of_a_row_whose_owner_was_edited_meanwhile_is_its_damage(
        host: Host, logged: io.StringIO, column: str, value: str) -> None:  # noqa: F811
    # The approving session's run no longer matches the row's: before, a ValueError and the
    # catch-all "The tool failed unexpectedly.", the row left waiting.
    _answered_while_damaged(host, logged, column, value, column, APPROVE)
    assert [InvocationState.AWAITING_APPROVAL.value] == [r[1] for r in _ids(host)]


def _answered_while_damaged(host: Host, logged: io.StringIO, column: str,  # noqa: F811
                            value: str, field: str, answer: types.ElicitResult) -> None:
    """A pushed question answered ``answer`` while the waiting row's ``column`` is edited to
    ``value`` behind the store's back: refused as the damage of ``field``, nothing run."""
    server, _ = serve(host)
    answered = person(answer)

    async def deciding(context: Any, params: Any) -> types.ElicitResult:
        damage(host, column, value, "state = ?", InvocationState.AWAITING_APPROVAL.value)
        return await answered(context, params)

    async def journey() -> None:
        async with mcp.Client(server, mode="legacy", elicitation_callback=deciding) as client:
            with pytest.raises(MCPError) as refused:
                await client.call_tool("fx.gated", {"path": "g.txt"})
            (invocation_id,) = [r[0] for r in _ids(host)]
            assert_refused(refused, invocation_id, field, logged)

    asyncio.run(journey())
    assert SEEN == []


@pytest.mark.parametrize("answer", [APPROVE, DECLINE], ids=["approve", "decline"])
def test_an_answer_to_a_question_whose_row_was_deleted_meanwhile_is_a_record_not_found(
        host: Host, logged: io.StringIO, answer: types.ElicitResult) -> None:  # noqa: F811
    # A row deleted by hand (or a backup restored) while the person decided. Before: an
    # approval was the catch-all "The tool failed unexpectedly."; a denial read as the
    # store's outage, retryable, which no retry would end.
    server, _ = serve(host)
    answered = person(answer)
    gone: list[str] = []

    async def deciding(context: Any, params: Any) -> types.ElicitResult:
        (row,) = _ids(host)
        gone.append(row[0])
        with closing(sqlite3.connect(host.data_dir / DATABASE_NAME)) as db, db:
            db.execute("DELETE FROM tool_invocations")
        return await answered(context, params)

    async def journey() -> None:
        async with mcp.Client(server, mode="legacy", elicitation_callback=deciding) as client:
            with pytest.raises(MCPError) as refused:
                await client.call_tool("fx.gated", {"path": "g.txt"})
            (invocation_id,) = gone
            assert (refused.value.error.code, refused.value.error.message) == (
                RESOURCE_NOT_FOUND, f"invocation {invocation_id} is not in the record: its "
                "row was removed outside toolhost")
            assert refused.value.error.data == {"invocationId": invocation_id}
            lines = [json.loads(line) for line in logged.getvalue().splitlines()]
            assert [(e["event"], e.get("invocation_id")) for e in lines
                    if e["level"] in ("warning", "error")] == [
                ("mcp.call.record_gone", invocation_id)]
            assert "Traceback" not in logged.getvalue()

    asyncio.run(journey())
    assert SEEN == [] and _ids(host) == []


def _ids(host: Host) -> list[tuple[str, str, str]]:  # noqa: F811
    with closing(sqlite3.connect(host.data_dir / DATABASE_NAME)) as db:
        return db.execute("SELECT id, state, created_at FROM tool_invocations").fetchall()


# ---------------------------------------------------------------- a row the call looks up


def test_a_repeated_words_call_skips_its_damaged_row_and_asks_anew(
        host: Host, logged: io.StringIO) -> None:  # noqa: F811
    # Before: the repeat read the row its words went on by id, and answered the catch-all.
    server, _ = serve(host)
    answered = person(WORDS, CANCEL, WORDS, CANCEL)

    async def journey() -> None:
        async with mcp.Client(server, mode="legacy", elicitation_callback=answered) as client:
            first = await client.call_tool("fx.remember", MODEL)
            left = (first.meta or {})["toolhost/invocationId"]
            assert (first.meta or {})["toolhost/status"] == "awaiting_approval"
            damage(host, "created_at", "yesterday", "id = ?", left)
            again = await client.call_tool("fx.remember", MODEL)
            assert (again.meta or {})["toolhost/status"] == "awaiting_approval", again
            assert (again.meta or {})["toolhost/invocationId"] != left

    asyncio.run(journey())
    assert SEEN == []
    assert "mcp.call.failed" not in logged.getvalue()


# ---------------------------------------------------------------- the port's list_rows


def test_both_adapters_have_list_rows_as_the_port_declares_it(host: Host) -> None:  # noqa: F811
    from toolhost._adapters.pg_invocations import PostgresInvocationStore

    declared = inspect.signature(RowListingStore.list_rows)
    for adapter in (SQLiteInvocationStore, PostgresInvocationStore):
        assert inspect.signature(adapter.list_rows) == declared, adapter
    assert lists_rows(host.pipeline.invocations)


class OlderBackend:
    """A backend written against the port before ``list_rows``: every other method, by name
    (no ``__getattr__``), delegating to the real store."""

    def __init__(self, inner: Any) -> None:
        for name in ("insert", "get", "transition", "settle", "list", "pending", "history",
                     "count", "owner", "owner_state", "close"):
            setattr(self, name, getattr(inner, name))


class Delegating:
    """A wrapper that forwards every attribute (``__getattr__``), as a test's or a
    deployment's instrumenting proxy does."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.mark.parametrize(("wrapper", "reported"), [(OlderBackend, False), (Delegating, True)],
                         ids=["older-backend", "delegating"])
def test_recovery_reads_list_rows_where_the_store_has_it_and_list_where_not(
        host: Host, wrapper: Any, reported: bool) -> None:  # noqa: F811
    store = host.pipeline.invocations
    for i, name in enumerate("abc"):
        store.insert(record(f"inv-{name}", i, state=InvocationState.RUNNING,
                            started_at=DEFAULT_INSTANT))
    damage(host, "created_at", "yesterday", "id = ?", "inv-b")
    host.pipeline.invocations = wrapper(store)
    try:
        assert lists_rows(host.pipeline.invocations) is reported
        report = {r.invocation_id: r.action for r in host.recover(rerun=False)}
    finally:
        host.pipeline.invocations = store
    # The older backend's ``list`` leaves the damaged row out (its own to report); every
    # other row is settled either way.
    assert report == {"inv-a": RecoveryAction.FAILED, "inv-c": RecoveryAction.FAILED,
                      **({"inv-b": RecoveryAction.LEFT} if reported else {})}


# ---------------------------------------------------------------- the approvals inbox


def test_the_inbox_answers_a_damaged_row_as_one_that_is_not_there(
        tmp_path: Path, logged: io.StringIO) -> None:
    # Before: InvocationRecordDamaged out of the app (a 500) for the call's page, its files
    # and a history page anchored on it. Its owner cannot be read, so it is answered as a call
    # not this login's is (as a damaged artifact record is, D252), and logged in one line.
    store = SQLiteInvocationStore(connect(tmp_path / DATABASE_NAME))
    damaged, missing = "d" * 32, "0" * 32
    store.insert(record(damaged, 0, principal_id="ada", state=InvocationState.AWAITING_APPROVAL))
    with closing(sqlite3.connect(tmp_path / DATABASE_NAME)) as db, db:
        db.execute("UPDATE tool_invocations SET state = 'bogus' WHERE id = ?", (damaged,))
    inbox = inbox_over(store)

    async def probe() -> None:
        for path, query in [("/ui/calls/{}", ""), ("/ui/calls/{}/" + "a" * 32, ""),
                            ("/ui/history", "before={}")]:
            answers = [await get(inbox, path.format(i), query.format(i), caller=ADA)
                       for i in (damaged, missing)]
            assert answers[0][::2] == answers[1][::2], path  # status and body

    try:
        anyio.run(probe)
    finally:
        store.close()
    events = [json.loads(line) for line in logged.getvalue().splitlines()]
    assert {(e["event"], e["invocation_id"], e["field"]) for e in events
            if e["level"] == "warning"} == {("http.inbox.record_damaged", damaged, "state")}
    assert "Traceback" not in logged.getvalue()
