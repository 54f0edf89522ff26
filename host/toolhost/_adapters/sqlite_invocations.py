"""The InvocationStore on SQLite: the ``tool_invocations`` table.

One row per invocation, and the row is the only place an outcome lives. State changes are
compare-and-set (``UPDATE ... WHERE state IN (...)``), so the row's transition is the lock:
two processes approving the same invocation cannot both move it to ``running``.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from toolhost._adapters.sqlite_db import Migration, migrate
from toolhost._model.convert import column_values, converter, from_row, to_row
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

# Columns are the record's attributes, in its order; toolhost._model.convert holds what each
# column stores (ISO text, enum values, canonical JSON).
_COLUMNS = tuple(f.name for f in attrs.fields(InvocationRecord))
_SELECT = f"SELECT {', '.join(_COLUMNS)} FROM tool_invocations"


def _records(rows: Iterable[Sequence[Any]]) -> list[InvocationRecord]:
    return [from_row(InvocationRecord, dict(zip(_COLUMNS, row, strict=True))) for row in rows]


class SQLiteInvocationStore:
    """The default backend, on the shared database (``toolhost._adapters.sqlite_db``)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        migrate(conn, MIGRATIONS)
        self._conn = conn
        # One connection serves every thread of this process; sqlite3 objects need the lock.
        self._lock = threading.Lock()

    def _rows(self, where: str, values: Sequence[Any]) -> list[Any]:
        return self._conn.execute(f"{_SELECT}{where}", values).fetchall()

    def insert(self, record: InvocationRecord) -> None:
        values = list(to_row(record).values())
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
            rows = self._rows(" WHERE id = ?", (invocation_id,))
        if not rows:
            raise InvocationNotFound(invocation_id)
        return _records(rows)[0]

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
        states = [converter.unstructure(s) for s in expected]
        columns = column_values(InvocationRecord, {"state": to, **fields})
        assignments = [f"{name} = ?" for name in columns]
        sql = (
            f"UPDATE tool_invocations SET {', '.join(assignments)} "
            f"WHERE id = ? AND state IN ({', '.join('?' * len(states))})"
        )
        values = [*columns.values(), invocation_id, *states]
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
        given = {
            "state": state,
            "run_id": run_id,
            "tool_name": tool_name,
            "tool_version": tool_version,
            "argument_digest": argument_digest,
        }
        criteria = column_values(
            InvocationRecord, {column: value for column, value in given.items() if value is not None}
        )
        where = f" WHERE {' AND '.join(f'{column} = ?' for column in criteria)}" if criteria else ""
        with self._lock:
            rows = self._rows(f"{where} ORDER BY created_at, id", list(criteria.values()))
        return _records(rows)

    def count(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM tool_invocations").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()
