"""Erasure of one source: an account, a thread, a message, or everything one owner has (their
accounts and their feedback), exactly that and nothing else.

Thread and message keys are per account (the same mail imported under two accounts is two
stored messages with two keys), so erasing a thread or a message of one account never touches
another account's copy. Feedback about an erased thread or account goes with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from toolhost_email.store import bump_generation, immediate, open_writable, owe_checkpoint, settle

__all__ = ["EraseScope", "Erasure", "erase", "erase_source"]

EraseScope = Literal["account", "thread", "message", "owner"]

_WHERE = {"account": "account = ?", "thread": "thread_id = ?", "message": "message_key = ?",
          "owner": "account IN (SELECT account FROM account_owners WHERE owner = ?)"}


@dataclass(frozen=True)
class Erasure:
    """What an erase did: ``removed`` messages; ``settled``, whether its checkpoint was taken
    (False: another connection held it back past the wait, and the erased mail's old pages
    stay in the cache's files until a later open finishes it, D467)."""

    removed: int
    settled: bool


def erase(data_dir: Path, scope: EraseScope, value: str) -> int:
    """``erase_source``'s number of messages removed."""
    return erase_source(data_dir, scope, value).removed


def erase_source(data_dir: Path, scope: EraseScope, value: str) -> Erasure:
    """Remove every stored message of that source (an account is matched lower-cased). The
    generation advances even when nothing matched.

    :raises ValueError: an unknown scope, or a value empty or blank: it names no source, and
        '' is the account and thread general and account-wide feedback is stored with, so
        erasing "thread ''" erased all of that (D566).
    """
    if scope not in _WHERE:
        raise ValueError(f"scope must be one of {sorted(_WHERE)}")
    key = value.strip().lower() if scope == "account" else value.strip()
    if not key:
        raise ValueError(f"an empty or blank {scope} names nothing to erase")
    conn = open_writable(data_dir)
    try:
        with immediate(conn):
            removed = conn.execute(
                f"DELETE FROM messages WHERE {_WHERE[scope]}", (key,)).rowcount
            if scope != "message":
                # Feedback about the source goes with it; an owner's, all of theirs.
                where = {"account": "account = ?", "thread": "thread_id = ?",
                         "owner": f"owner = ? OR {_WHERE['owner']}"}[scope]
                values = (key, key) if scope == "owner" else (key,)
                doomed = f"SELECT feedback_id FROM feedback WHERE {where}"
                conn.execute(f"DELETE FROM feedback_versions WHERE feedback_id IN ({doomed})",
                             values)
                conn.execute(f"DELETE FROM feedback WHERE {where}", values)
            if scope == "owner":
                conn.execute("DELETE FROM account_owners WHERE owner = ?", (key,))
            generation = bump_generation(conn)
            owe_checkpoint(conn, generation)
        # secure_delete zeroed the pages in the new frames; the database file (and old frames
        # still in the WAL) hold the erased mail in clear until a checkpoint copies them over
        # and truncates the WAL. Owed since the commit: killed before it is done, the next
        # open of the cache finishes it.
        settled = settle(conn, generation)
    finally:
        conn.close()
    return Erasure(int(removed), settled)
