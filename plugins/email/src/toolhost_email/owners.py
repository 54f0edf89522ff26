"""Who owns which mail account, and so whose calls read it.

A cache no account of which was ever given an owner is **one person's**: every principal reads
all of it, as before owners existed (a host serving one person, a desktop client, the CLI). The
operator gives accounts owners (``toolhost-email import --owner``, ``toolhost-email owners
set``); from the first owner on, the cache is **several people's**, for good (``meta``
``owned``: erasing an owner or clearing an account never turns it back into everyone's): a
principal reads only the accounts it owns, and an account without an owner is read by nobody
until it is given one. ``toolhost-email owners set --unowned PRINCIPAL`` gives every such
account, and the feedback recorded while the cache was one person's, to one principal: the one
command that keeps a one-person cache that person's once a host serves several.

Feedback follows the same rule: in a cache of several people a record belongs to the principal
that gave it, and only that principal's calls read it.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from toolhost_email.store import (
    CacheUnavailable,
    bump_generation,
    cache_path,
    open_read_only,
    writing,
)

__all__ = [
    "OwnerConflict",
    "accounts_of",
    "claim",
    "clear_owner",
    "list_owners",
    "own_feedback",
    "readable",
    "set_owner",
    "set_unowned",
    "shared",
]

#: True in a cache of several people. One SQL expression, so that a statement that reads mail
#: under it sees the owners of the same snapshot as the mail.
_OWNED = "EXISTS (SELECT 1 FROM meta WHERE key = 'owned' AND value = 1)"


class OwnerConflict(ValueError):
    """An account already has another owner; the message says how to change it."""


def readable(principal: str | None, column: str = "account") -> tuple[str, tuple[object, ...]]:
    """An SQL condition (and its values) keeping the rows of accounts ``principal`` reads
    (None: the operator's own view, every account). For a schema-2 cache only."""
    if principal is None:
        return "1", ()
    return (f"(NOT {_OWNED} OR {column} IN "
            "(SELECT account FROM account_owners WHERE owner = ?))", (principal,))


def own_feedback(principal: str | None, column: str = "owner") -> tuple[str, tuple[object, ...]]:
    """An SQL condition keeping the feedback records ``principal``'s calls read: all of them
    in a cache of one person, its own in a cache of several."""
    if principal is None:
        return "1", ()
    return f"(NOT {_OWNED} OR {column} = ?)", (principal,)


def shared(conn: sqlite3.Connection) -> bool:
    """The cache is several people's (some account was ever given an owner)."""
    row = conn.execute("SELECT value FROM meta WHERE key = 'owned'").fetchone()
    return row is not None and bool(row[0])


def accounts_of(conn: sqlite3.Connection, principal: str) -> frozenset[str] | None:
    """The accounts ``principal`` reads; None in a cache of one person (every account)."""
    if not shared(conn):
        return None
    rows = conn.execute("SELECT account FROM account_owners WHERE owner = ?",
                        (principal,)).fetchall()
    return frozenset(str(r[0]) for r in rows)


_SHARED = "INSERT OR REPLACE INTO meta (key, value) VALUES ('owned', 1)"


def claim(conn: sqlite3.Connection, account: str, owner: str) -> None:
    """Inside the caller's transaction: ``account`` is ``owner``'s from now on.

    :raises OwnerConflict: it is already another principal's.
    """
    row = conn.execute("SELECT owner FROM account_owners WHERE account = ?",
                       (account,)).fetchone()
    if row is not None and row[0] != owner:
        raise OwnerConflict(f"account {account} belongs to {row[0]!r}: give it another owner "
                            f"with toolhost-email owners set {account} PRINCIPAL")
    if row is None:
        conn.execute("INSERT INTO account_owners (account, owner) VALUES (?, ?)",
                     (account, owner))
        conn.execute(_SHARED)
        bump_generation(conn)


def _write(data_dir: Path, *statements: tuple[str, tuple[object, ...]],
           shared: bool = False) -> int:
    """Statements in one transaction (``shared``: the cache is several people's from now
    on); the rows the first one changed."""
    with writing(data_dir) as conn:
        changed = [max(conn.execute(sql, values).rowcount, 0) for sql, values in statements]
        if shared:
            conn.execute(_SHARED)
        bump_generation(conn)
    return changed[0]


def set_owner(data_dir: Path, account: str, owner: str) -> None:
    """``account`` is ``owner``'s (whoever's it was)."""
    _write(data_dir, ("INSERT INTO account_owners (account, owner) VALUES (?, ?) ON CONFLICT "
                      "(account) DO UPDATE SET owner = excluded.owner", (account, owner)),
           shared=True)


def set_unowned(data_dir: Path, owner: str) -> int:
    """Every cached account without an owner is ``owner``'s, and so is the feedback recorded
    while the cache was one person's; how many accounts there were."""
    # A record the principal already gave again since (its own, same words) stays; the
    # one-person record of the same words goes, versions and all: two records of one
    # feedback would need two undos.
    twin = ("SELECT feedback_id FROM feedback f WHERE f.owner = '' AND EXISTS (SELECT 1 FROM "
            "feedback g WHERE g.owner = ? AND g.account = f.account AND g.thread_id = "
            "f.thread_id AND g.feedback = f.feedback)")
    return _write(
        data_dir,
        ("INSERT INTO account_owners (account, owner) SELECT DISTINCT account, ? FROM messages "
         "WHERE account NOT IN (SELECT account FROM account_owners)", (owner,)),
        (f"DELETE FROM feedback_versions WHERE feedback_id IN ({twin})", (owner,)),
        (f"DELETE FROM feedback WHERE feedback_id IN ({twin})", (owner,)),
        ("UPDATE feedback SET owner = ? WHERE owner = ''", (owner,)),
        shared=True)


def clear_owner(data_dir: Path, account: str) -> bool:
    """``account`` has no owner any more (nobody reads it); False when it had none."""
    return _write(data_dir, ("DELETE FROM account_owners WHERE account = ?", (account,))) > 0


def list_owners(data_dir: Path) -> list[tuple[str, str | None]]:
    """(account, owner or None) of every account the cache holds mail of or has an owner
    for, by account. Reads only (but for the checkpoint a killed erase owed, see
    ``open_read_only``): no cache is made, none migrated."""
    path = cache_path(data_dir)
    if not path.exists():
        return []
    try:
        with closing(open_read_only(data_dir)) as conn:
            if conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()[0] < 2:
                rows = conn.execute("SELECT DISTINCT account, NULL FROM messages "
                                    "ORDER BY account").fetchall()
            else:
                rows = conn.execute(
                    "SELECT a.account, o.owner FROM (SELECT account FROM messages UNION "
                    "SELECT account FROM account_owners) a LEFT JOIN account_owners o "
                    "ON o.account = a.account ORDER BY a.account").fetchall()
    except sqlite3.Error as exc:
        raise CacheUnavailable(f"{path} cannot be read as a mail cache "
                               f"({type(exc).__name__})") from exc
    return [(str(a), None if o is None else str(o)) for a, o in rows]
