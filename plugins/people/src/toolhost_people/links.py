"""The operator's state: addresses that are one person (``toolhost-people link A B``), and
the owner's own addresses, which are nobody's person.

Without links, every address is a person of its own. A link merges the two addresses' groups
(linking is transitive: link A B, then B C, and A, B, C are one person); ``unlink`` takes one
address out of its group again. Each group is named by its smallest address (code point
order), so a person's id follows from its addresses alone and survives a rebuild.

The owner's addresses are every account people ever saw in the cache (recorded by the
rebuild that first sees one, and kept: an erased account is still the owner's, so its
address never turns into a person from the other accounts' mail) and the addresses the
operator names with ``toolhost-people me ADDRESS`` (an alias the owner writes from).

In a mail cache of several people (toolhost-email's owners) each principal has owner
addresses of their own: the accounts it owns, those its index ever saw, and the aliases of
``toolhost-people me --principal P ADDRESS``; the one-person cache's are nobody's there.

Both are state, not derived data: they live in ``links.sqlite3`` in toolhost-people's own
data directory and nothing rebuilds them. The derived index records the ``digest`` of what it
was built with and rebuilds when it changes.

Addresses are kept as toolhost-email gives them (the addr-spec, lower-cased): ``straße@`` and
``strasse@`` are two mailboxes. Folding is only for searching.
"""

from __future__ import annotations

import hashlib
import sqlite3
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from contextlib import closing, contextmanager
from pathlib import Path

from toolhost import make_private_dirs
from toolhost_people.common import BUSY_TIMEOUT_S

__all__ = ["LINKS_FILE", "MAX_ADDRESS_LENGTH", "add_owner", "digest", "forget_principal", "link",
           "normalize_address", "read_links", "read_state", "record_accounts", "state_of",
           "unlink"]

LINKS_FILE = "links.sqlite3"

#: RFC 5321's path limit: no mailbox is longer.
MAX_ADDRESS_LENGTH = 320

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS links ("
    " address TEXT PRIMARY KEY,"
    " person TEXT NOT NULL"  # the group's smallest address
    ") WITHOUT ROWID",
    # origin: 'account' (seen in the cache) or 'operator' (toolhost-people me); a
    # principal's own in a cache of several people: 'account:P', 'operator:P'.
    "CREATE TABLE IF NOT EXISTS owner (address TEXT NOT NULL, origin TEXT NOT NULL,"
    " PRIMARY KEY (address, origin)) WITHOUT ROWID",
)


def normalize_address(text: str) -> str | None:
    """``text`` as the cache keeps addresses (lower-cased), or None when it is not one
    address: a local part, ``@``, a domain, no space or control character, at most 320
    characters."""
    address = text.strip().lower()
    local, at, domain = address.rpartition("@")
    if not (at and local and domain) or len(address) > MAX_ADDRESS_LENGTH:
        return None
    if any(c.isspace() or unicodedata.category(c)[0] == "C" for c in address):
        return None
    return address


@contextmanager
def _connect(data_dir: Path, timeout: float = BUSY_TIMEOUT_S) -> Iterator[sqlite3.Connection]:
    with closing(sqlite3.connect(data_dir / LINKS_FILE, timeout=timeout,
                                 isolation_level=None)) as conn:
        _prepare(conn)
        yield conn


def _prepare(conn: sqlite3.Connection) -> None:
    conn.execute("PRAGMA journal_mode=WAL")
    for statement in _SCHEMA:
        conn.execute(statement)


def read_links(data_dir: Path) -> dict[str, str]:
    """Every linked address with the address naming its group; empty when nothing was ever
    linked (no file is created for that)."""
    return read_state(data_dir)[0]


def _origin(kind: str, principal: str | None) -> str:
    return kind if principal is None else f"{kind}:{principal}"


def read_state(data_dir: Path,
               principal: str | None = None) -> tuple[dict[str, str], frozenset[str]]:
    """The links (``read_links``) and the owner's addresses (``principal``'s, in a cache of
    several people), in one read; both empty when there is no state yet (no file is created
    for that)."""
    path = data_dir / LINKS_FILE
    if not path.exists():
        return {}, frozenset()
    with closing(sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)) as conn:
        return state_of(conn, principal)


def state_of(conn: sqlite3.Connection,
             principal: str | None = None) -> tuple[dict[str, str], frozenset[str]]:
    """``read_state`` over an open connection to the links file (the tools keep one)."""
    # The tools read this whenever the file changed: a bare connection (the file keeps its WAL
    # mode), and the schema statements only for a file made before the owner table existed.
    try:
        return _read(conn, principal)
    except sqlite3.OperationalError as exc:
        if "no such table" not in str(exc):
            raise
    _prepare(conn)
    return _read(conn, principal)


def _read(conn: sqlite3.Connection,
          principal: str | None) -> tuple[dict[str, str], frozenset[str]]:
    conn.execute("BEGIN")
    try:
        links = {a: p for a, p in conn.execute("SELECT address, person FROM links")}
        owners = frozenset(a for (a,) in conn.execute(
            "SELECT address FROM owner WHERE origin IN (?, ?)",
            (_origin("account", principal), _origin("operator", principal))))
    finally:
        conn.execute("ROLLBACK")
    return links, owners


def record_accounts(data_dir: Path, accounts: Iterable[str], principal: str | None = None, *,
                    timeout: float = BUSY_TIMEOUT_S) -> None:
    """Remember accounts seen in the cache as the owner's (``principal``'s, in a cache of
    several people; for good: see the module text). ``timeout``: how long to wait for a
    lock."""
    make_private_dirs(data_dir)
    with _connect(data_dir, timeout) as conn:
        conn.executemany("INSERT OR IGNORE INTO owner VALUES (?, ?)",
                         [(a, _origin("account", principal)) for a in accounts])


def add_owner(data_dir: Path, address: str, principal: str | None = None) -> bool:
    """``toolhost-people me [--principal P] ADDRESS``: the normalized address is the
    owner's (``principal``'s); False if it already was."""
    make_private_dirs(data_dir)
    with _connect(data_dir) as conn:
        added = conn.execute("INSERT OR IGNORE INTO owner VALUES (?, ?)",
                             (address, _origin("operator", principal))).rowcount
    return bool(added)


def forget_principal(data_dir: Path, principal: str) -> int:
    """Forget every owner address kept for ``principal`` (the accounts its index saw, its
    aliases): ``refresh`` does it once the principal owns nothing; how many there were."""
    if not (data_dir / LINKS_FILE).exists():
        return 0
    with _connect(data_dir) as conn:
        return int(conn.execute("DELETE FROM owner WHERE origin IN (?, ?)",
                                (_origin("account", principal),
                                 _origin("operator", principal))).rowcount)


def digest(links: Mapping[str, str]) -> str:
    """A digest of the links' content: equal links, equal digest (however they were made)."""
    h = hashlib.sha256()
    for address, person in sorted(links.items()):
        h.update(f"{address}\x1f{person}\x1e".encode())
    return h.hexdigest()


def _groups(conn: sqlite3.Connection) -> dict[str, set[str]]:
    groups: dict[str, set[str]] = {}
    for address, person in conn.execute("SELECT address, person FROM links"):
        groups.setdefault(person, set()).add(address)
    return groups


def _store(conn: sqlite3.Connection, members: set[str]) -> None:
    person = min(members)
    conn.executemany("INSERT OR REPLACE INTO links (address, person) VALUES (?, ?)",
                     [(a, person) for a in members])


def link(data_dir: Path, first: str, second: str) -> tuple[str, ...]:
    """Merge the groups of two normalized addresses; the merged group's addresses, sorted."""
    make_private_dirs(data_dir)
    with _connect(data_dir) as conn:
        conn.execute("BEGIN IMMEDIATE")
        try:
            groups = _groups(conn)
            by_address = {a: members for members in groups.values() for a in members}
            merged = by_address.get(first, {first}) | by_address.get(second, {second})
            _store(conn, merged)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return tuple(sorted(merged))


def unlink(data_dir: Path, address: str) -> bool:
    """Take a normalized address out of its group (a group left with one address is no group);
    False when it was not linked."""
    if not (data_dir / LINKS_FILE).exists():
        return False
    with _connect(data_dir) as conn:
        conn.execute("BEGIN IMMEDIATE")
        try:
            row = conn.execute("SELECT person FROM links WHERE address = ?", (address,)).fetchone()
            if row is None:
                conn.execute("ROLLBACK")
                return False
            rest = _groups(conn)[row[0]] - {address}
            conn.execute("DELETE FROM links WHERE person = ?", (row[0],))
            if len(rest) > 1:
                _store(conn, rest)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return True
