"""The InvocationStore on SQLite: the ``tool_invocations`` table.

One row per invocation, and the row is the only place an outcome lives. State changes are
compare-and-set (``UPDATE ... WHERE state IN (...)``), so the row's transition is the lock:
two processes approving the same invocation cannot both move it to ``running``.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from toolhost._adapters.sqlite_db import Migration, migrate
from toolhost._model.digest import canonical_text
from toolhost._model.invocations import InvocationNotFound, InvocationRecord, InvocationState

__all__ = [
    "MIGRATIONS",
    "SQLiteInvocationStore",
]

MIGRATIONS: Sequence[Migration] = (
    Migration(
        "invocations",
        1,
        """
        CREATE TABLE tool_invocations (
            id TEXT PRIMARY KEY,
            run_id TEXT NOT NULL,
            principal_id TEXT NOT NULL,
            scopes TEXT NOT NULL,
            conversation_id TEXT,
            tool_name TEXT NOT NULL,
            tool_version TEXT,
            arguments TEXT NOT NULL,
            argument_digest TEXT,
            state TEXT NOT NULL,
            policy TEXT,
            approver TEXT,
            denial_reason TEXT,
            result_structured TEXT,
            result_content TEXT,
            output_trust TEXT,
            failure_kind TEXT,
            reason_code TEXT,
            retryable INTEGER,
            failure_detail TEXT,
            artifact_refs TEXT NOT NULL,
            created_at TEXT NOT NULL,
            started_at TEXT,
            finished_at TEXT,
            decided_at TEXT
        );
        CREATE INDEX tool_invocations_state ON tool_invocations (state, created_at);
        CREATE INDEX tool_invocations_run ON tool_invocations (run_id, created_at)
        """,
    ),
    # Finding a decided call again by what was approved (a repeated MCP call after approval).
    Migration(
        "invocations",
        2,
        "CREATE INDEX tool_invocations_digest ON tool_invocations (argument_digest, run_id)",
    ),
)

_JSON_FIELDS = frozenset(
    {"scopes", "arguments", "policy", "result_structured", "failure_detail", "artifact_refs"}
)
_TIME_FIELDS = frozenset({"created_at", "started_at", "finished_at", "decided_at"})
_COLUMNS = tuple(f.name for f in attrs.fields(InvocationRecord))


def _to_column(name: str, value: Any) -> Any:
    if value is None and name not in ("scopes", "artifact_refs", "arguments"):
        return None
    if name in _JSON_FIELDS:
        return canonical_text(list(value) if isinstance(value, tuple) else value)
    if name in _TIME_FIELDS:
        return value.isoformat(timespec="microseconds")
    if name == "state":
        return value.value
    if name == "retryable":
        return int(value)
    return value


def _from_row(row: sqlite3.Row) -> InvocationRecord:
    data: dict[str, Any] = {}
    for name in _COLUMNS:
        value = row[name]
        if value is not None:
            if name in _JSON_FIELDS:
                value = json.loads(value)
                if name in ("scopes", "artifact_refs"):
                    value = tuple(value)
            elif name in _TIME_FIELDS:
                value = dt.datetime.fromisoformat(value)
            elif name == "state":
                value = InvocationState(value)
            elif name == "retryable":
                value = bool(value)
        data[name] = value
    return InvocationRecord(**data)


class SQLiteInvocationStore:
    """The default backend, on the shared database (``toolhost._adapters.sqlite_db``)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        migrate(conn, MIGRATIONS)
        self._conn = conn
        # One connection serves every thread of this process; sqlite3 objects need the lock.
        self._lock = threading.Lock()

    def _rows(self, sql: str, values: Sequence[Any]) -> list[sqlite3.Row]:
        # A per-cursor row factory leaves the connection as the caller configured it.
        cursor = self._conn.cursor()
        cursor.row_factory = sqlite3.Row
        return cursor.execute(sql, values).fetchall()

    def insert(self, record: InvocationRecord) -> None:
        values = [_to_column(name, getattr(record, name)) for name in _COLUMNS]
        sql = (
            f"INSERT INTO tool_invocations ({', '.join(_COLUMNS)}) "
            f"VALUES ({', '.join('?' * len(_COLUMNS))})"
        )
        with self._lock:
            try:
                self._conn.execute(sql, values)
            except sqlite3.IntegrityError:
                raise ValueError(f"invocation {record.id} is already recorded") from None

    def get(self, invocation_id: str) -> InvocationRecord:
        with self._lock:
            rows = self._rows("SELECT * FROM tool_invocations WHERE id = ?", (invocation_id,))
        if not rows:
            raise InvocationNotFound(invocation_id)
        return _from_row(rows[0])

    def transition(
        self,
        invocation_id: str,
        *,
        expected: Iterable[InvocationState],
        to: InvocationState,
        **fields: Any,
    ) -> bool:
        unknown = set(fields) - set(_COLUMNS)
        if unknown or "id" in fields or "state" in fields:
            raise ValueError(f"cannot set {sorted(unknown | ({'id', 'state'} & set(fields)))}")
        states = [s.value for s in expected]
        assignments = ["state = ?", *(f"{name} = ?" for name in fields)]
        sql = (
            f"UPDATE tool_invocations SET {', '.join(assignments)} "
            f"WHERE id = ? AND state IN ({', '.join('?' * len(states))})"
        )
        values = [to.value, *(_to_column(k, v) for k, v in fields.items()), invocation_id, *states]
        with self._lock:
            changed = self._conn.execute(sql, values).rowcount == 1
        return changed

    def list(
        self,
        *,
        state: InvocationState | None = None,
        run_id: str | None = None,
        tool_name: str | None = None,
        tool_version: str | None = None,
        argument_digest: str | None = None,
    ) -> list[InvocationRecord]:
        criteria = {
            "state": state.value if state is not None else None,
            "run_id": run_id,
            "tool_name": tool_name,
            "tool_version": tool_version,
            "argument_digest": argument_digest,
        }
        clauses = [f"{column} = ?" for column, value in criteria.items() if value is not None]
        values = [value for value in criteria.values() if value is not None]
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        with self._lock:
            rows = self._rows(f"SELECT * FROM tool_invocations{where} ORDER BY created_at, id",
                              values)
        return [_from_row(r) for r in rows]

    def count(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM tool_invocations").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()
