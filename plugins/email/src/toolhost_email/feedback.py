"""Owner feedback, versioned and undoable, in the cache file beside the mail it is about.

A record is identified by whose it is and what it says (owner, account, thread, feedback text),
so recording the same feedback twice is one record. Its owner is the principal that gave it in
a cache of several people (``owners``), and '' in a cache of one person's. Each change is a new
version: ``applied`` when recorded (or recorded again after an undo), ``undone`` by
``toolhost-email feedback undo ID``. Feedback about a thread is recorded only while the thread
is in the cache: checked in the write that records it, so an erase that commits first leaves
nothing to record it about (D156: feedback goes with its erased thread or account).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import attrs

from toolhost_email.owners import readable, shared
from toolhost_email.reader import connection_of, feedback_where
from toolhost_email.store import BUSY_TIMEOUT_S, writing

if TYPE_CHECKING:
    from toolhost_email.reader import MailCacheReader

__all__ = ["FeedbackChange", "UnknownFeedback", "UnknownThread", "record_feedback",
           "undo_feedback"]

Status = Literal["applied", "undone"]


class UnknownFeedback(LookupError):
    """No feedback record has that id."""


class UnknownThread(LookupError):
    """The thread has no message (any more) of the account that the principal reads."""


@attrs.frozen
class FeedbackChange:
    feedback_id: str
    status: Status
    version: int
    #: False when the record already had this status (nothing was written).
    changed: bool


def feedback_id_for(account: str, thread_id: str, feedback: str, owner: str = "") -> str:
    # A one-person cache's ids leave the owner out: they are the ids it always gave.
    parts = [account, thread_id, feedback] + ([owner] if owner else [])
    payload = json.dumps(parts, ensure_ascii=False).encode()
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
                    quote: str, recorded_at: str, principal: str = "",
                    wait: float = BUSY_TIMEOUT_S) -> FeedbackChange:
    """Apply ``principal``'s feedback (idempotent: the same feedback again changes nothing).
    A ``thread_id`` must be a thread of ``account`` (of any account when '') that
    ``principal`` reads, in the same write transaction as the record: the caller's own check
    came before the wait for the write lock, which an erase of that thread may have held.

    :raises UnknownThread: the thread is not (or no longer) there; nothing was recorded.
    :raises CacheBusy: another writer held the cache past ``wait`` seconds.
    """
    with writing(data_dir, wait) as conn:
        if thread_id and not _thread_there(conn, thread_id, account, principal):
            raise UnknownThread(thread_id)
        owner = principal if shared(conn) else ""
        # The record it already has, whatever id it was given (a one-person cache's records
        # keep theirs when ``owners set --unowned`` gives them an owner).
        row = conn.execute(
            "SELECT feedback_id FROM feedback WHERE owner = ? AND account = ? AND "
            "thread_id = ? AND feedback = ?", (owner, account, thread_id, feedback)).fetchone()
        feedback_id = (feedback_id_for(account, thread_id, feedback, owner) if row is None
                       else str(row[0]))
        conn.execute(
            "INSERT OR IGNORE INTO feedback (feedback_id, account, thread_id, feedback, "
            "quote, recorded_at, owner) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (feedback_id, account, thread_id, feedback, quote, recorded_at, owner))
        change = _change(conn, feedback_id, "applied", "owner")
    return change


def _thread_there(conn: sqlite3.Connection, thread_id: str, account: str,
                  principal: str) -> bool:
    mine, values = readable(principal)
    return conn.execute(
        f"SELECT 1 FROM messages WHERE thread_id = ? AND (? = '' OR account = ?) AND {mine} "
        "LIMIT 1", (thread_id, account, account, *values)).fetchone() is not None


def undo_feedback(data_dir: Path, feedback_id: str) -> FeedbackChange:
    """Undo a record (a new ``undone`` version).

    :raises UnknownFeedback: no record has that id.
    """
    with writing(data_dir) as conn:
        if conn.execute("SELECT 1 FROM feedback WHERE feedback_id = ?",
                        (feedback_id,)).fetchone() is None:
            raise UnknownFeedback(feedback_id)
        change = _change(conn, feedback_id, "undone", "operator")
    return change


def applied_feedback(reader: MailCacheReader, account: str | None,
                     thread_id: str | None, limit: int) -> list[tuple[str, str, str, str]]:
    """(feedback_id, account, thread_id, feedback) of the reader's principal's records whose
    latest version is applied: general ones (no account), the account's, and the thread's;
    newest first."""
    conn = connection_of(reader)
    if conn is None:
        return []
    mine, values = feedback_where(reader, "f.owner")
    rows = conn.execute(
        "SELECT f.feedback_id, f.account, f.thread_id, f.feedback FROM feedback f "
        "JOIN feedback_versions v ON v.feedback_id = f.feedback_id AND v.version = ("
        "  SELECT MAX(version) FROM feedback_versions WHERE feedback_id = f.feedback_id) "
        f"WHERE v.status = 'applied' AND {mine} ORDER BY f.recorded_at DESC, f.feedback_id",
        values).fetchall()
    return [
        (str(r[0]), str(r[1]), str(r[2]), str(r[3])) for r in rows
        if (r[1] == "" or account is None or r[1] == account)
        and (r[2] == "" or r[2] == thread_id)
    ][:limit]
