"""The files a people call reads, kept open between calls: toolhost-email's cache reader, the
links and the index, as one ``Session`` that one call at a time borrows from ``Sessions``.

Opening the three per call cost most of a search (issue #27): the connections, their pragmas,
and SQLite's page cache thrown away each time. What a kept connection could get wrong is only
which file it has open, never what is in it: SQLite starts every read transaction from the
file's latest commit (WAL), whoever wrote it, so an erase or an import committed a moment ago
is what the next call reads. A file *replaced* under a kept connection (deleted and made anew,
moved aside and imported again) is another matter: the connection keeps the old one. So each
call first asks which file each name is now (device and inode, from ``os.stat``: a few
microseconds), and reopens what changed. The identity is taken before opening, so a file
replaced between the two reads as changed next time, never as the same; and a file the session
holds open cannot lend its inode to a new one. The cache's files are toolhost-email's business
(people reads them only through its read API): every entry of its directory is compared, by
name and inode. The links are read again only when another connection committed to them since
(SQLite's ``data_version``).

Deleting an index file (damaged, or a principal's who owns nothing any more) first closes
every kept connection to it in this process (``clear_every``: the sessions of every people
tool over that data directory, not only the deleting tool's), so no deleted index lives on
behind one. A file another process deletes is let go at this process's next call of the
same principal, or when its idle session is closed past ``IDLE_LIMIT``.

A session is used by one call at a time (``Sessions.take`` and ``give``), so calls in parallel
threads never share a connection. A process that forks drops its parent's sessions unused.
"""

from __future__ import annotations

import functools
import os
import sqlite3
import threading
import weakref
from pathlib import Path

from toolhost_email import MailCacheReader, open_mail_cache

from toolhost_people.common import CALL_BUSY_TIMEOUT_S
from toolhost_people.index import index_path, open_index
from toolhost_people.links import LINKS_FILE, state_of

__all__ = ["IDLE_LIMIT", "Session", "Sessions", "clear_every", "directory_identity",
           "file_identity", "sessions_for"]

#: Idle sessions kept per store: enough for the calls a host runs at once on a few cores;
#: more in flight open their own and the surplus is closed when they end.
IDLE_LIMIT = 4

#: A file's identity: (device, inode).
Identity = tuple[int, int]

# The same few paths every call: made once (a Path per call costs more than the stat).
_index_path = functools.lru_cache(maxsize=64)(index_path)


@functools.lru_cache(maxsize=8)
def _links_path(own_dir: Path) -> Path:
    return own_dir / LINKS_FILE


def file_identity(path: Path) -> Identity | None:
    """Which file ``path`` names now; None when there is none. Any other error (no permission)
    is raised: opening would meet it too."""
    try:
        found = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return found.st_dev, found.st_ino


def directory_identity(path: Path) -> frozenset[tuple[str, int]] | None:
    """Every entry of the directory ``path`` with the inode it names (read with the names: no
    ``stat`` per entry); empty when there is no directory, None when it cannot be listed (then
    nothing may count as unchanged)."""
    try:
        with os.scandir(path) as entries:
            return frozenset((e.name, e.inode()) for e in entries)
    except (FileNotFoundError, NotADirectoryError):
        return frozenset()
    except OSError:
        return None


class Session:
    """One caller's kept files: the cache reader (of ``principal``'s view), the links and one
    index, each with the identity of what it was opened on."""

    def __init__(self, principal: str, epoch: int) -> None:
        self.principal = principal
        #: The ``Sessions`` epoch it was made in: an older one is closed, never reused.
        self.epoch = epoch
        self.pid = os.getpid()
        self._reader: MailCacheReader | None = None
        self._reader_seen: frozenset[tuple[str, int]] | None = None
        self._links: sqlite3.Connection | None = None
        self._links_seen: Identity | None = None
        #: What the links connection last read: (data_version, whose) and the state.
        self._state_read: tuple[int, str | None] | None = None
        self._state: tuple[dict[str, str], frozenset[str]] = ({}, frozenset())
        self._index: sqlite3.Connection | None = None
        self._index_seen: tuple[Path, Identity | None] | None = None

    def reader(self, cache_dir: Path) -> MailCacheReader:
        """The cache's reader, reopened when the directory's files are not the ones it was
        opened on. Raises what ``open_mail_cache`` raises."""
        seen = directory_identity(cache_dir)
        if self._reader is None or seen is None or seen != self._reader_seen:
            # The new one first: the cache's WAL files then never vanish between the two.
            reader = open_mail_cache(cache_dir, self.principal)
            self._close_reader()
            self._reader, self._reader_seen = reader, seen
        return self._reader

    def links_state(self, own_dir: Path,
                    whose: str | None) -> tuple[dict[str, str], frozenset[str]]:
        """``links.read_state(own_dir, whose)``, read again only when another connection
        committed to the file since (SQLite's ``data_version``) or it is another file."""
        conn = self._links_file(own_dir)
        if conn is None:
            return {}, frozenset()
        (version,) = conn.execute("PRAGMA data_version").fetchone()
        if self._state_read != (version, whose):
            # Read after the version: a commit between the two is read now and again next call.
            self._state = state_of(conn, whose)
            self._state_read = (version, whose)
        return self._state

    def _links_file(self, own_dir: Path) -> sqlite3.Connection | None:
        """The links file's connection, reopened when the file was replaced; None when there
        is no file (no state yet: none is created for that)."""
        path = _links_path(own_dir)
        seen = file_identity(path)
        if seen is None:
            self._close_links()
            return None
        if self._links is None or seen != self._links_seen:
            conn = sqlite3.connect(path, timeout=CALL_BUSY_TIMEOUT_S, isolation_level=None,
                                   check_same_thread=False)
            self._close_links()
            self._links, self._links_seen = conn, seen
        return self._links

    def index(self, own_dir: Path, principal: str | None) -> sqlite3.Connection:
        """``open_index(own_dir, principal)``, kept while the file is the one it opened (a
        file it had to create is reopened once, at the next call). A damaged file is raised
        (``index.is_damage``), not deleted: the caller closes every connection to it first."""
        path = _index_path(own_dir, principal)
        seen = file_identity(path)
        if self._index is None or seen is None or self._index_seen != (path, seen):
            conn = open_index(own_dir, principal, timeout=CALL_BUSY_TIMEOUT_S, mend=False)
            self.drop_index()
            self._index, self._index_seen = conn, (path, seen)
        return self._index

    def drop_index(self) -> None:
        """Close the index connection (before its file is deleted)."""
        index, self._index, self._index_seen = self._index, None, None
        if index is not None:
            index.close()

    def close(self) -> None:
        self._close_reader()
        self._close_links()
        self.drop_index()

    def _close_reader(self) -> None:
        reader, self._reader, self._reader_seen = self._reader, None, None
        if reader is not None:
            reader.close()

    def _close_links(self) -> None:
        links, self._links, self._links_seen = self._links, None, None
        self._state_read = None  # data_version is per connection
        if links is not None:
            links.close()


class Sessions:
    """The idle sessions of one store, most recently used last, at most ``IDLE_LIMIT``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[Session] = []
        self._epoch = 0
        self._pid = os.getpid()

    def take(self, principal: str) -> Session:
        """An idle session of ``principal``'s (the most recent), or a new one."""
        with self._lock:
            if self._pid != os.getpid():
                # Forked: the parent's connections are the parent's; never use them here.
                self._idle, self._pid = [], os.getpid()
            for i in range(len(self._idle) - 1, -1, -1):
                if self._idle[i].principal == principal:
                    return self._idle.pop(i)
            return Session(principal, self._epoch)

    def give(self, session: Session, *, reusable: bool = True) -> None:
        """A call is done with ``session``: kept for the next (the oldest idle one closed past
        the limit), or closed when not ``reusable`` or made before the last ``clear``."""
        with self._lock:
            if reusable and session.epoch == self._epoch and session.pid == self._pid:
                self._idle.append(session)
                if len(self._idle) <= IDLE_LIMIT:
                    return
                session = self._idle.pop(0)
        session.close()

    def clear(self) -> None:
        """Close every idle session, and those in use when they are given back: an index
        file is about to be deleted, and no connection may keep it alive."""
        with self._lock:
            idle, self._idle = self._idle, []
            self._epoch += 1
        for session in idle:
            session.close()


#: Every store's ``Sessions`` in this process, by the data directory whose index files their
#: sessions keep open (held weakly: they live as long as their store; a data directory's
#: entry stays, and a process has a few).
_EVERY: dict[Path, weakref.WeakSet[Sessions]] = {}
_EVERY_GUARD = threading.Lock()


def sessions_for(own_dir: Path) -> Sessions:
    """A new ``Sessions`` for a store over ``own_dir``, which ``clear_every`` reaches."""
    sessions = Sessions()
    with _EVERY_GUARD:
        _EVERY.setdefault(own_dir, weakref.WeakSet()).add(sessions)
    return sessions


def clear_every(own_dir: Path) -> None:
    """``Sessions.clear`` for every store over ``own_dir``: an index file there is about to
    be deleted, and no people tool's connection may keep it alive (not only the deleting
    tool's: each tool's store keeps sessions of its own)."""
    with _EVERY_GUARD:
        every = list(_EVERY.get(own_dir, ()))
    for sessions in every:
        sessions.clear()
