"""The derived index: people, their addresses, names and interactions, built from the mail
cache and the operator's links, in ``index.sqlite3`` in toolhost-people's own data directory.

It is derived data and nothing else: ``refresh`` compares the cache's state and generation,
the links' digest and the owner's addresses with what the index was built from, and rebuilds
it whole, in one transaction, when any changed. The cache's generation changes on every import
that added something and on every erase, so an erased account or thread is gone from people
at the next call that reads them (or ``toolhost-people refresh``); its state (a digest of what
it holds) tells apart a cache made anew (removed, then mail imported again), whose generation
counts from 0 again.
A rebuild of 10,000 messages takes well under a second; an incremental index would have to
mirror every erasure rule of the cache.

The generation is read before the messages: a change between the two leaves an index tagged
with the older generation, which the next call rebuilds, never one that hides a change.

Who is a person: every address of a From, To, Cc or Reply-To header except the owner's own
(every account ever seen in the cache, and the operator's ``me`` addresses), one person per
address as the cache gives it, or one per group of linked addresses. An interaction is one
message that names the person, counted once however many of its headers name them: ``sent``
when any From address is the owner's (the owner's mail copied to their other account is
still sent), else ``received``. Names and subjects are stored as shown (``bounds.shown``).

"Newest" is D160's: a Date more than a day past the clock of the rebuild ranks below every
real date (above no date), so mail with a forged future date cannot hold a person's history,
last interaction or most recently used name. Such an index is rebuilt once the clock reaches
the first of those dates less a day, when it ranks by its date again. A rebuild with no clock
trusts every date, and the next one with a clock makes the index again (the operator's
``refresh`` command has one: the file system's, ``cli``).

A person's id is ``p_`` and 64 bits of the sha256 of the address naming it (``person_id_for``),
so it survives every rebuild. Two addresses whose ids collide (an outsider can find a pair in
about 2^32 hashes and name both in one mail) must not fail the rebuild: the one that sorts
first keeps the id and the other takes the next free one of its own (``person_ids``).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Protocol

from toolhost_people.bounds import shown
from toolhost_people.common import BUSY_TIMEOUT_S, MAX_MESSAGE_ID, MAX_NAME, MAX_SUBJECT
from toolhost_people.fold import fold
from toolhost_people.links import digest, normalize_address

if TYPE_CHECKING:
    from collections.abc import Iterator

    from toolhost_email import CachedMessage

__all__ = [
    "INDEX_FILE",
    "NO_DATE",
    "PRINCIPALS_DIR",
    "CacheView",
    "HollowIndex",
    "Interaction",
    "PersonRow",
    "SearchRow",
    "ThreadRow",
    "addresses_of",
    "date_text",
    "empty_index",
    "find_interaction",
    "history_page",
    "index_path",
    "index_present",
    "indexed_principal",
    "is_current",
    "is_damage",
    "names_of",
    "open_index",
    "person",
    "person_id_for",
    "person_ids",
    "recent_threads",
    "refresh",
    "remove_index",
    "remove_index_file",
    "search",
    "timestamp",
]

INDEX_FILE = "index.sqlite3"
#: In a mail cache of several people (toolhost-email's owners), each principal's index is a
#: file of its own here, named by a digest of the principal: nobody's calls read another's.
PRINCIPALS_DIR = "principals"

#: The index's layout; another value in the file's meta table means drop and rebuild.
SCHEMA_VERSION = "2"

#: The sort key of a message with no date: below every real one, so it is the oldest.
NO_DATE = -(2**62)
#: D160's clock skew: a date further than this past the rebuild's clock is taken as forged.
_SKEW = _dt.timedelta(days=1)
#: How far below its timestamp a forged date's sort key lies: below every real date (year 1
#: is -6.2e16 µs), above NO_DATE (year 9999 ends at 2.6e17 µs), forged dates in their order.
_FORGED_SHIFT = 2**61
#: The meta row of an index built with a clock, when no date was forged: past every clock.
_NONE_FORGED = 2**63 - 1

#: SQLite's primary result codes for a malformed file and for one that is not a database.
_SQLITE_CORRUPT, _SQLITE_NOTADB = 11, 26

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
_MICROSECOND = _dt.timedelta(microseconds=1)

#: Separates a person's folded names and addresses in ``person.search``; ``fold`` turns every
#: control character into a space, so no folded text contains it.
SEPARATOR = "\x1f"

_TABLES = ("meta", "person", "person_address", "person_name", "interaction")
_SCHEMA = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID",
    # last_ts orders search results; first/last_date are what context shows.
    "CREATE TABLE person (person_id TEXT PRIMARY KEY, name TEXT NOT NULL,"
    " search TEXT NOT NULL, sent INTEGER NOT NULL, received INTEGER NOT NULL,"
    " total INTEGER NOT NULL, first_date TEXT, last_date TEXT, last_ts INTEGER NOT NULL)"
    " WITHOUT ROWID",
    "CREATE TABLE person_address (person_id TEXT NOT NULL, address TEXT NOT NULL,"
    " count INTEGER NOT NULL, PRIMARY KEY (person_id, address)) WITHOUT ROWID",
    "CREATE TABLE person_name (person_id TEXT NOT NULL, name TEXT NOT NULL,"
    " count INTEGER NOT NULL, last_ts INTEGER NOT NULL, PRIMARY KEY (person_id, name))"
    " WITHOUT ROWID",
    # The primary key is history's order (newest first, read backwards) and its paging key.
    "CREATE TABLE interaction (person_id TEXT NOT NULL, ts INTEGER NOT NULL,"
    " message_key TEXT NOT NULL, date TEXT, direction TEXT NOT NULL, subject TEXT NOT NULL,"
    " thread_id TEXT NOT NULL, message_id TEXT NOT NULL,"
    " PRIMARY KEY (person_id, ts, message_key)) WITHOUT ROWID",
    "CREATE UNIQUE INDEX interaction_by_key ON interaction (person_id, message_key)",
)


class PersonRow(NamedTuple):
    person_id: str
    name: str
    sent: int
    received: int
    total: int
    first_date: str | None
    last_date: str | None


class SearchRow(NamedTuple):
    person_id: str
    name: str
    sent: int
    received: int
    last_date: str | None


class Interaction(NamedTuple):
    ts: int
    message_key: str
    date: str | None
    direction: str
    subject: str
    thread_id: str
    message_id: str


class ThreadRow(NamedTuple):
    thread_id: str
    subject: str
    last_date: str | None
    interactions: int


class CacheView(Protocol):
    """What the index reads of toolhost-email's ``MailCacheReader``."""

    def state(self) -> str: ...

    def generation(self) -> int: ...

    def messages(self) -> Iterator[CachedMessage]: ...


# ------------------------------------------------------------------------------ values


def person_id_for(canonical: str, attempt: int = 0) -> str:
    """A person's id: from the address naming it (its own, or its link group's smallest), so
    the id survives every rebuild. ``attempt`` n > 0: its n-th other id, for a collision
    (``person_ids``); no address holds the NUL that separates the two."""
    text = canonical if attempt == 0 else f"{canonical}\x00{attempt}"
    return "p_" + hashlib.sha256(text.encode()).hexdigest()[:16]


def person_ids(canonicals: Iterable[str]) -> dict[str, str]:
    """Each naming address's person id: ``person_id_for``'s, unless several share it. Then
    the address that sorts first keeps it and each other takes its first ``attempt`` that is
    nobody's first id nor taken already, so an id that collides with none never changes."""
    by_id: dict[str, list[str]] = {}
    for canonical in canonicals:
        by_id.setdefault(person_id_for(canonical), []).append(canonical)
    taken = set(by_id)
    ids: dict[str, str] = {}
    for pid in sorted(by_id):  # sorted: the same ids whatever order the mail came in
        first, *others = sorted(by_id[pid])
        ids[first] = pid
        for canonical in others:
            attempt = 1
            while (other := person_id_for(canonical, attempt)) in taken:
                attempt += 1
            taken.add(other)
            ids[canonical] = other
    return ids


def timestamp(date: _dt.datetime | None) -> int:
    """Microseconds since the epoch (exact, unlike a float), ``NO_DATE`` for no date."""
    return NO_DATE if date is None else (date - _EPOCH) // _MICROSECOND


def _horizon(now: _dt.datetime | None) -> int | None:
    """The latest timestamp that ranks as a real date at ``now``; None, with no clock: every
    date does."""
    return None if now is None else timestamp(now + _SKEW)


def date_text(date: _dt.datetime | None) -> str | None:
    """RFC 3339 in UTC with a ``Z``: ``2026-12-03T06:45:00Z``."""
    if date is None:
        return None
    return date.astimezone(_dt.UTC).replace(tzinfo=None).isoformat() + "Z"


# ------------------------------------------------------------------------------ opening


def index_path(data_dir: Path, principal: str | None = None) -> Path:
    """The index file: the one of a mail cache of one person (``principal`` None), or
    ``principal``'s own in a cache of several."""
    if principal is None:
        return data_dir / INDEX_FILE
    name = hashlib.sha256(principal.encode()).hexdigest()[:32]
    return data_dir / PRINCIPALS_DIR / f"{name}.sqlite3"


class HollowIndex(sqlite3.DatabaseError):
    """The index file is empty beside a write-ahead log or shared memory: cut to nothing under
    them (SQLite writes a new file's header before it makes either). Opened, it would wait
    for locks nobody releases, or take the old log's pages for its own: damage."""


def open_index(data_dir: Path, principal: str | None = None, *,
               timeout: float = BUSY_TIMEOUT_S, mend: bool = True) -> sqlite3.Connection:
    """The index in ``data_dir`` (``principal``'s: ``index_path``), created (or recreated, if
    damaged or of another layout) empty. Autocommit: every write is an explicit transaction;
    ``timeout``: how long to wait for a lock. Any other error (a directory in its place, no
    permission, a lock held too long) is raised: deleting would not help. ``mend`` False:
    damage is raised too (``is_damage``), for a caller that closes its own connections to
    the file before deleting it."""
    path = index_path(data_dir, principal)
    if principal is not None:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        return _open(path, principal, timeout)
    except sqlite3.DatabaseError as exc:
        if not (mend and is_damage(exc)):
            raise
    # Derived data: a damaged file is removed and rebuilt, never repaired.
    remove_index(data_dir, principal)
    return _open(path, principal, timeout)


def empty_index() -> sqlite3.Connection:
    """An index of no mail, in memory: what a principal that owns no account reads."""
    return _open(Path(":memory:"), None, BUSY_TIMEOUT_S)


def indexed_principal(conn: sqlite3.Connection) -> str | None:
    """Whose index this is (None: a one-person cache's): ``toolhost-people refresh`` finds
    the principal of each file it brings up to date here."""
    row = conn.execute("SELECT value FROM meta WHERE key = 'principal'").fetchone()
    return None if row is None else str(row[0])


def is_damage(exc: BaseException) -> bool:
    """Whether SQLite says the file is not a database or is malformed (SQLITE_NOTADB,
    SQLITE_CORRUPT), or it is hollow (``HollowIndex``): the only errors that deleting a
    derived file mends."""
    return isinstance(exc, HollowIndex) or (
        isinstance(exc, sqlite3.DatabaseError)
        and getattr(exc, "sqlite_errorcode", 0) & 0xFF in (_SQLITE_CORRUPT, _SQLITE_NOTADB))


def remove_index(data_dir: Path, principal: str | None = None) -> None:
    """Delete the index file and its WAL and shared-memory files, if there."""
    remove_index_file(index_path(data_dir, principal))


def index_present(path: Path) -> bool:
    """Whether anything of the index file ``path`` is there to delete (a dangling symlink
    counts): a check without the file's lock, so a call that deletes nothing waits for none."""
    return any(os.path.lexists(f"{path}{suffix}") for suffix in ("", "-wal", "-shm"))


# Held from a connection's opening of an index file to its opening of the file's shared
# memory, and while the file is deleted. SQLite opens ``-shm`` by name after the database: a
# file deleted and made anew between the two would give the old file's connection the new
# one's shared memory, and as POSIX locks never conflict within a process, it would take
# itself for its first user and truncate what another connection has mapped (SIGBUS). Once
# open, a connection keeps its files, and SQLite leaves alone those of a file deleted since.
# One lock per file: the hazard is one file's, and an opening that waits out a lock (up to
# its timeout) then holds up nobody else's index.
_FILE_LOCKS: dict[str, threading.Lock] = {}  # one per index path this process used: a few
_FILE_LOCKS_GUARD = threading.Lock()


def _opening_or_deleting(path: Path) -> threading.Lock:
    key = os.path.abspath(path)
    with _FILE_LOCKS_GUARD:
        lock = _FILE_LOCKS.get(key)
        if lock is None:
            lock = _FILE_LOCKS[key] = threading.Lock()
        return lock


def remove_index_file(path: Path) -> None:
    """Delete one index file and its WAL and shared-memory files, if there."""
    with _opening_or_deleting(path):
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)


def _hollow(path: Path) -> bool:
    try:
        if os.stat(path).st_size != 0:
            return False
    except (FileNotFoundError, NotADirectoryError):
        return False
    return any(os.path.lexists(f"{path}{suffix}") for suffix in ("-wal", "-shm"))


def _open(path: Path, principal: str | None, timeout: float) -> sqlite3.Connection:
    memory = str(path) == ":memory:"
    with nullcontext() if memory else _opening_or_deleting(path):
        if not memory and _hollow(path):
            raise HollowIndex(f"{path} is empty beside its write-ahead log")
        conn = sqlite3.connect(path, timeout=timeout, isolation_level=None,
                               check_same_thread=False)
        try:
            conn.execute("PRAGMA journal_mode=WAL")  # the shared memory opened with the WAL
            # ... of a file that has one: a new file's are opened by its first read, so read
            # here, under the lock, not at the first call's transaction after it (D444).
            conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        except BaseException:
            conn.close()
            raise
    try:
        conn.execute("PRAGMA synchronous=NORMAL")  # derived: a lost commit is a rebuild
        # What a rebuild drops (an erased thread's subjects, names) is overwritten, not left
        # in free pages; ``refresh`` also empties the write-ahead log after a rebuild.
        conn.execute("PRAGMA secure_delete=ON")
        if _schema_version(conn) != SCHEMA_VERSION:
            conn.execute("BEGIN IMMEDIATE")
            if _schema_version(conn) != SCHEMA_VERSION:
                for table in _TABLES:
                    conn.execute(f"DROP TABLE IF EXISTS {table}")
                for statement in _SCHEMA:
                    conn.execute(statement)
                conn.execute("INSERT INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
                if principal is not None:
                    conn.execute("INSERT INTO meta VALUES ('principal', ?)", (principal,))
            conn.execute("COMMIT")
    except BaseException:
        conn.close()
        raise
    return conn


def _schema_version(conn: sqlite3.Connection) -> str | None:
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
    except sqlite3.OperationalError as exc:
        if "no such table" not in str(exc):  # a new file; anything else is a real error
            raise
        return None
    return None if row is None else str(row[0])


def _built_from(conn: sqlite3.Connection) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key = 'source'").fetchone()
    return None if row is None else str(row[0])


def _tag(cache: tuple[str, int], links: Mapping[str, str], owners: Iterable[str]) -> str:
    """What an index was built from: the cache (its state and generation), the links, the
    owner's addresses."""
    owned = hashlib.sha256("\x1e".join(sorted(owners)).encode()).hexdigest()
    state, generation = cache
    return f"{state}:{generation}:{digest(links)}:{owned}"


def _cache_state(reader: CacheView) -> tuple[str, int]:
    """What the cache holds, and its generation: a cache made anew counts generations from 0
    again, so the generation alone would take its generation 3 for the old one's."""
    return reader.state(), reader.generation()


# ------------------------------------------------------------------------------ building


def _current(conn: sqlite3.Connection, tag: str, horizon: int | None) -> bool:
    """Built from ``tag``; and for a caller with a clock (``horizon``), built with one too,
    no date it ranked as forged being a real one by ``horizon``."""
    if _built_from(conn) != tag:
        return False
    if horizon is None:
        return True
    row = conn.execute("SELECT value FROM meta WHERE key = 'forged'").fetchone()
    return row is not None and int(row[0]) > horizon


def is_current(conn: sqlite3.Connection, reader: CacheView, links: Mapping[str, str],
               owners: frozenset[str] = frozenset(), *,
               now: _dt.datetime | None = None) -> bool:
    """Whether the index was built from the cache as it is now (the same cache, at its
    generation now), these links and these owner's addresses, and ranks the dates as at
    ``now`` (the caller's clock; None: any ranking will do): ``refresh`` would not rebuild it.
    Inside the caller's read transaction, what the caller queries next is the index this
    answered for."""
    return _current(conn, _tag(_cache_state(reader), links, owners), _horizon(now))


def refresh(conn: sqlite3.Connection, reader: CacheView, links: Mapping[str, str],
            owners: frozenset[str] = frozenset(),
            record: Callable[[set[str]], None] | None = None, *,
            now: _dt.datetime | None = None) -> bool:
    """Rebuild the index if the cache, the links or the owner's addresses changed since it
    was built, or it ranks the dates otherwise than at ``now`` (the caller's clock; None:
    none, every date is trusted, and any ranking will do); True if it rebuilt. Concurrent
    callers wait for one rebuild rather than each doing their own. Accounts the rebuild sees
    for the first time go to ``record`` (kept as the owner's) before the index commits, so
    the tag it records is the next call's."""
    cache = _cache_state(reader)
    horizon = _horizon(now)
    if _current(conn, _tag(cache, links, owners), horizon):
        return False
    conn.execute("BEGIN IMMEDIATE")
    try:
        if _current(conn, _tag(cache, links, owners), horizon):
            conn.execute("COMMIT")  # another caller rebuilt it while this one waited
            return False
        accounts, forged = _fill(conn, reader.messages(), links, owners, horizon)
        known = owners
        if record is not None and (new := accounts - owners):
            record(new)
            known = owners | new  # what the next call reads back
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('source', ?)",
                     (_tag(cache, links, known),))
        # The first forged date (the index is stale once it is a real one); no row: built
        # with no clock.
        conn.execute("DELETE FROM meta WHERE key = 'forged'")
        if horizon is not None:
            conn.execute("INSERT INTO meta VALUES ('forged', ?)",
                         (str(_NONE_FORGED if forged is None else forged),))
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return True


class _Message(NamedTuple):
    """What the index keeps of one message (one object, shared by every address it names):
    ``ts`` is its sort key, ``forged`` whether that ranks it below every real date."""

    ts: int
    key: str
    date: str | None
    subject: str
    thread_id: str
    message_id: str
    senders: frozenset[str]
    forged: bool


class _Address:
    __slots__ = ("messages", "names")

    def __init__(self) -> None:
        self.messages: dict[str, _Message] = {}  # by message key: each message once
        self.names: dict[str, list[int]] = {}  # name: [count, last_ts]


def _fill(conn: sqlite3.Connection, messages: Iterable[CachedMessage],
          links: Mapping[str, str], owners: frozenset[str],
          horizon: int | None) -> tuple[set[str], int | None]:
    """Fill the emptied tables from ``messages`` (streamed: what is kept per message is its
    row, not the message); the accounts seen, and the first timestamp past ``horizon`` (a
    date ranked as forged), if any."""
    accounts: set[str] = set()
    by_address: dict[str, _Address] = {}
    first_forged: int | None = None
    for message in messages:
        account = normalize_address(message.account)
        if account is not None:
            accounts.add(account)
        ts = timestamp(message.date)
        forged = horizon is not None and ts > horizon
        if forged and (first_forged is None or ts < first_forged):
            first_forged = ts
        kept = _Message(
            ts - _FORGED_SHIFT if forged else ts, message.message_key,
            date_text(message.date), shown(message.subject, MAX_SUBJECT)[0],
            message.thread_id, _message_id(message.message_id),
            frozenset(a for a in (normalize_address(m.address) for m in message.sender) if a),
            forged,
        )
        for mailbox in (*message.sender, *message.to, *message.cc, *message.reply_to):
            address = normalize_address(mailbox.address)
            if address is None:
                continue
            entry = by_address.get(address)
            if entry is None:
                entry = by_address[address] = _Address()
            entry.messages[kept.key] = kept
            name = " ".join(shown(mailbox.name, MAX_NAME)[0].split())
            if name:
                seen = entry.names.setdefault(name, [0, kept.ts])
                seen[0] += 1
                seen[1] = max(seen[1], kept.ts)
    # Only now are all the owner's accounts known (messages come in date order).
    owner = owners | accounts
    groups: dict[str, list[str]] = {}
    for address in by_address:
        if address not in owner:
            groups.setdefault(links.get(address, address), []).append(address)
    for table in _TABLES[1:]:
        conn.execute(f"DELETE FROM {table}")
    ids = person_ids(groups)
    for canonical, members in groups.items():
        _insert(conn, ids[canonical], {a: by_address[a] for a in members}, owner)
    return accounts, first_forged


def _insert(conn: sqlite3.Connection, pid: str, members: Mapping[str, _Address],
            owner: frozenset[str] | set[str]) -> None:
    """One person's rows: one interaction per message however many of its headers (and of
    the person's addresses) name them; ``sent`` when any From address is the owner's."""
    interactions: dict[str, _Message] = {}
    names: dict[str, list[int]] = {}
    for entry in members.values():
        interactions.update(entry.messages)
        for name, (count, used) in entry.names.items():
            seen = names.setdefault(name, [0, used])
            seen[0] += count
            seen[1] = max(seen[1], used)
    sent = sum(1 for m in interactions.values() if m.senders & owner)
    dated = [m for m in interactions.values() if m.ts != NO_DATE]
    # A forged date is never the first either: it is first only among forged ones.
    first = min(dated, key=lambda m: (m.forged, m.ts)) if dated else None
    last = max(dated, key=lambda m: m.ts) if dated else None
    ranked = _ranked_names(names)
    search = SEPARATOR.join(dict.fromkeys(
        [fold(n) for n in ranked] + [fold(a) for a in sorted(members)]))
    conn.execute("INSERT INTO person VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", (
        pid, ranked[0] if ranked else "", search, sent, len(interactions) - sent,
        len(interactions), first.date if first else None, last.date if last else None,
        last.ts if last else NO_DATE,
    ))
    conn.executemany("INSERT INTO person_address VALUES (?, ?, ?)",
                     [(pid, a, len(e.messages)) for a, e in members.items()])
    conn.executemany("INSERT INTO person_name VALUES (?, ?, ?, ?)",
                     [(pid, n, c, t) for n, (c, t) in names.items()])
    conn.executemany("INSERT INTO interaction VALUES (?, ?, ?, ?, ?, ?, ?, ?)", [
        (pid, m.ts, m.key, m.date, "sent" if m.senders & owner else "received", m.subject,
         m.thread_id, m.message_id)
        for m in interactions.values()])


def _message_id(value: str) -> str:
    """The Message-ID as shown: "" when it is longer than any usable one, or holds a
    control character."""
    if len(value) > MAX_MESSAGE_ID or shown(value, MAX_MESSAGE_ID)[0] != value:
        return ""
    return value


def _ranked_names(names: Mapping[str, Sequence[int]]) -> list[str]:
    """Most used first, then most recently used, then code point order: the first is the
    name the person is shown by."""
    return sorted(names, key=lambda n: (-names[n][0], -names[n][1], n))


# ------------------------------------------------------------------------------ queries


def search(conn: sqlite3.Connection, folded_query: str, limit: int) -> list[SearchRow]:
    """Up to ``limit`` people whose folded names or addresses contain ``folded_query``.

    Order: a whole name or address equal to the query first, then one that starts with it,
    then one with a word starting with it (after a space, ``@`` or ``.``), then any other
    match; within each, most interactions first, then the most recent, then the id. The
    order is total, so the same index and query always give the same list.
    """
    s, q = SEPARATOR, folded_query
    rows = conn.execute(
        "SELECT person_id, name, sent, received, last_date,"
        " CASE WHEN instr(?1 || search || ?1, ?1 || ?2 || ?1) THEN 0"
        " WHEN instr(?1 || search, ?1 || ?2) THEN 1"
        " WHEN instr(search, ' ' || ?2) OR instr(search, '@' || ?2)"
        " OR instr(search, '.' || ?2) THEN 2 ELSE 3 END AS rank"
        " FROM person WHERE instr(search, ?2)"
        " ORDER BY rank, total DESC, last_ts DESC, person_id LIMIT ?3",
        (s, q, limit),
    ).fetchall()
    return [SearchRow(*row[:5]) for row in rows]


def person(conn: sqlite3.Connection, person_id: str) -> PersonRow | None:
    row = conn.execute(
        "SELECT person_id, name, sent, received, total, first_date, last_date FROM person"
        " WHERE person_id = ?", (person_id,)).fetchone()
    return None if row is None else PersonRow(*row)


def addresses_of(conn: sqlite3.Connection, person_ids: Sequence[str],
                 limit: int) -> dict[str, list[str]]:
    """Each person's addresses, most used first (then code point order), at most ``limit``."""
    found: dict[str, list[str]] = {p: [] for p in person_ids}
    marks = ", ".join("?" * len(person_ids))
    for pid, address in conn.execute(
            f"SELECT person_id, address FROM person_address WHERE person_id IN ({marks})"
            " ORDER BY person_id, count DESC, address", tuple(person_ids)):
        if len(found[pid]) < limit:
            found[pid].append(address)
    return found


def names_of(conn: sqlite3.Connection, person_id: str, limit: int) -> list[str]:
    """A person's display names as the mail gave them, in ``_ranked_names`` order."""
    return [n for (n,) in conn.execute(
        "SELECT name FROM person_name WHERE person_id = ?"
        " ORDER BY count DESC, last_ts DESC, name LIMIT ?", (person_id, limit))]


def history_page(conn: sqlite3.Connection, person_id: str, limit: int,
                 after: tuple[int, str] | None) -> list[Interaction]:
    """Up to ``limit`` interactions newest first (a forged date below every real one, no date
    last: the module text; ties by message key, so the order is total), strictly after the
    position ``after`` (a previous page's last)."""
    if after is None:
        rows = conn.execute(
            "SELECT ts, message_key, date, direction, subject, thread_id, message_id"
            " FROM interaction WHERE person_id = ? ORDER BY ts DESC, message_key DESC LIMIT ?",
            (person_id, limit))
    else:
        rows = conn.execute(
            "SELECT ts, message_key, date, direction, subject, thread_id, message_id"
            " FROM interaction WHERE person_id = ? AND (ts, message_key) < (?, ?)"
            " ORDER BY ts DESC, message_key DESC LIMIT ?", (person_id, *after, limit))
    return [Interaction(*row) for row in rows]


def find_interaction(conn: sqlite3.Connection, person_id: str,
                     message_key: str) -> Interaction | None:
    row = conn.execute(
        "SELECT ts, message_key, date, direction, subject, thread_id, message_id"
        " FROM interaction WHERE person_id = ? AND message_key = ?",
        (person_id, message_key)).fetchone()
    return None if row is None else Interaction(*row)


def recent_threads(conn: sqlite3.Connection, person_id: str, limit: int) -> list[ThreadRow]:
    """The person's threads, the one with the latest interaction first; each with the subject
    and date of that latest interaction (SQLite takes bare columns from the max() row)."""
    rows = conn.execute(
        "SELECT thread_id, subject, date, count(*), max(ts) AS latest FROM interaction"
        " WHERE person_id = ? GROUP BY thread_id ORDER BY latest DESC, thread_id LIMIT ?",
        (person_id, limit))
    return [ThreadRow(*row[:4]) for row in rows]
