"""Owner feedback, versioned and undoable, in the cache file beside the mail it is about.

A record is identified by what it says (account, thread, feedback text), so recording the same
feedback twice is one record. Each change is a new version: ``applied`` when recorded (or
recorded again after an undo), ``undone`` by ``toolhost-email feedback undo ID``.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Literal

import attrs

from toolhost_email.store import open_writable

__all__ = ["FeedbackChange", "UnknownFeedback", "record_feedback", "undo_feedback"]

Status = Literal["applied", "undone"]


class UnknownFeedback(LookupError):
    """No feedback record has that id."""


@attrs.frozen
class FeedbackChange:
    feedback_id: str
    status: Status
    version: int
    #: False when the record already had this status (nothing was written).
    changed: bool


def feedback_id_for(account: str, thread_id: str, feedback: str) -> str:
    payload = json.dumps([account, thread_id, feedback], ensure_ascii=False).encode()
    return "f_" + hashlib.sha256(payload).hexdigest()[:32]


def _latest(conn: sqlite3.Connection, feedback_id: str) -> tuple[int, str] | None:
    row = conn.execute(
        "SELECT version, status FROM feedback_versions WHERE feedback_id = ? "
        "ORDER BY version DESC LIMIT 1", (feedback_id,)).fetchone()
    return None if row is None else (int(row[0]), str(row[1]))


def _change(conn: sqlite3.Connection, feedback_id: str, status: Status,
            actor: str) -> FeedbackChange:
    latest = _latest(conn, feedback_id)
    if latest is not None and latest[1] == status:
        return FeedbackChange(feedback_id, status, latest[0], changed=False)
    version = 1 if latest is None else latest[0] + 1
    conn.execute("INSERT INTO feedback_versions (feedback_id, version, status, actor) "
                 "VALUES (?, ?, ?, ?)", (feedback_id, version, status, actor))
    return FeedbackChange(feedback_id, status, version, changed=True)


def record_feedback(data_dir: Path, *, account: str, thread_id: str, feedback: str,
                    quote: str, recorded_at: str) -> FeedbackChange:
    """Apply the feedback (idempotent: the same feedback again changes nothing)."""
    feedback_id = feedback_id_for(account, thread_id, feedback)
    conn = open_writable(data_dir)
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(
                "INSERT OR IGNORE INTO feedback (feedback_id, account, thread_id, feedback, "
                "quote, recorded_at) VALUES (?, ?, ?, ?, ?, ?)",
                (feedback_id, account, thread_id, feedback, quote, recorded_at))
            change = _change(conn, feedback_id, "applied", "owner")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    finally:
        conn.close()
    return change


def undo_feedback(data_dir: Path, feedback_id: str) -> FeedbackChange:
    """Undo a record (a new ``undone`` version).

    :raises UnknownFeedback: no record has that id.
    """
    conn = open_writable(data_dir)
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            if conn.execute("SELECT 1 FROM feedback WHERE feedback_id = ?",
                            (feedback_id,)).fetchone() is None:
                raise UnknownFeedback(feedback_id)
            change = _change(conn, feedback_id, "undone", "operator")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    finally:
        conn.close()
    return change


def applied_feedback(conn: sqlite3.Connection | None, account: str | None,
                     thread_id: str | None, limit: int) -> list[tuple[str, str, str, str]]:
    """(feedback_id, account, thread_id, feedback) of records whose latest version is applied:
    general ones (no account), the account's, and the thread's; newest first."""
    if conn is None:
        return []
    rows = conn.execute(
        "SELECT f.feedback_id, f.account, f.thread_id, f.feedback FROM feedback f "
        "JOIN feedback_versions v ON v.feedback_id = f.feedback_id AND v.version = ("
        "  SELECT MAX(version) FROM feedback_versions WHERE feedback_id = f.feedback_id) "
        "WHERE v.status = 'applied' ORDER BY f.recorded_at DESC, f.feedback_id").fetchall()
    return [
        (str(r[0]), str(r[1]), str(r[2]), str(r[3])) for r in rows
        if (r[1] == "" or account is None or r[1] == account)
        and (r[2] == "" or r[2] == thread_id)
    ][:limit]
