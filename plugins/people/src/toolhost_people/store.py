"""What every people tool opens per call: toolhost-email's cache (through its public read API
only, as the caller reads it) and this distribution's index, refreshed against the cache, the
operator's links and the owner's addresses, then read in one read transaction.

Whose index: while the cache is one person's, the one index of everything; once its accounts
have owners (toolhost-email's owners), the caller's own, built from the accounts it owns only
(a principal that owns none reads an empty index made in memory, leaving no file behind), and
the one index of everything is deleted: nobody reads it any more.

Each call sees the cache as it is now (an erase a moment ago is already gone) without opening
anything anew: the connections are kept between calls (``sessions``: SQLite reads every
transaction from the latest commit, and a file replaced since is reopened), one call at a
time each, so a tool called from several threads in parallel shares no connection.

Failures are static reasons, never an unexpected one: a cache that cannot be read is
``CACHE_UNAVAILABLE``; a cache or index locked past the wait is ``BUSY`` (retryable: an import
or erase holds it; people's own files are waited for ``CALL_BUSY_TIMEOUT_S``, so that this is
what the caller reads, not the call's deadline); a damaged index (not a database, malformed
anywhere, or hollow, found at its opening or at any query) is deleted and rebuilt once, and
damaged again, or unopenable (a directory in its place, no permission), is
``INDEX_UNAVAILABLE``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, closing, nullcontext
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, NamedTuple, TypeVar

from toolhost_email import MAIL_CACHE_DISTRIBUTION, CacheUnavailable

from toolhost import Clock, Services, ToolFailure
from toolhost_people.common import CALL_BUSY_TIMEOUT_S
from toolhost_people.index import (
    empty_index,
    index_path,
    index_present,
    is_current,
    is_damage,
    refresh,
    remove_index,
)
from toolhost_people.links import record_accounts
from toolhost_people.messages import BUSY, CACHE_UNAVAILABLE, INDEX_UNAVAILABLE
from toolhost_people.sessions import Session, clear_every, sessions_for

if TYPE_CHECKING:
    from toolhost_email import CachedMessage, MailCacheReader, MessageSource

__all__ = ["Cache", "Opened", "PeopleStore"]

T = TypeVar("T")

#: SQLite's primary result codes for a lock held past the connection's timeout.
_SQLITE_BUSY, _SQLITE_LOCKED = 5, 6

#: The failures that say a file could not be used: the session that met one is closed, not
#: kept (its connections may be to a damaged or replaced file).
_FILE_FAILURES = frozenset({BUSY, CACHE_UNAVAILABLE, INDEX_UNAVAILABLE})


def _busy(exc: sqlite3.Error) -> bool:
    return getattr(exc, "sqlite_errorcode", 0) & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED)


def _cache_failure(exc: Exception) -> ToolFailure:
    if isinstance(exc, sqlite3.Error) and _busy(exc):
        return ToolFailure(BUSY, detail={"file": "cache"}, retryable=True)
    return ToolFailure(CACHE_UNAVAILABLE, detail={"error": type(exc).__name__})


class Cache:
    """The reader's methods people use, each ending in a static failure when the cache cannot
    be read (damaged past its header, locked): the index never sees the reader's errors."""

    def __init__(self, reader: MailCacheReader) -> None:
        self._reader = reader

    def state(self) -> str:
        try:
            return self._reader.state()
        except (sqlite3.Error, CacheUnavailable) as exc:
            raise _cache_failure(exc) from None

    def generation(self) -> int:
        try:
            return self._reader.generation()
        except (sqlite3.Error, CacheUnavailable) as exc:
            raise _cache_failure(exc) from None

    def messages(self) -> Iterator[CachedMessage]:
        try:
            yield from self._reader.messages()
        except (sqlite3.Error, CacheUnavailable) as exc:
            raise _cache_failure(exc) from None

    def snapshot(self) -> AbstractContextManager[None]:
        """The reader's ``snapshot``; only its own start is translated (what the block raises
        is the block's)."""
        return _Snapshot(self._reader.snapshot())

    def accounts(self) -> frozenset[str] | None:
        try:
            return self._reader.accounts()
        except (sqlite3.Error, CacheUnavailable) as exc:
            raise _cache_failure(exc) from None

    def source(self, message_key: str) -> MessageSource | None:
        try:
            return self._reader.source(message_key)
        except (sqlite3.Error, CacheUnavailable) as exc:
            raise _cache_failure(exc) from None


class _Snapshot:
    """``Cache.snapshot``'s manager: a class, as every call enters one (a generator over an
    ExitStack doubled the snapshot's cost)."""

    __slots__ = ("_inner",)

    def __init__(self, inner: AbstractContextManager[None]) -> None:
        self._inner = inner

    def __enter__(self) -> None:
        try:
            self._inner.__enter__()
        except (sqlite3.Error, CacheUnavailable) as exc:
            raise _cache_failure(exc) from None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool | None:
        return self._inner.__exit__(kind, exc, tb)


class Opened(NamedTuple):
    people: sqlite3.Connection
    cache: Cache


class _Damaged(Exception):
    """The index file is damaged: delete it and build it again."""

    def __init__(self, principal: str | None = None) -> None:
        super().__init__(principal)
        #: Whose index file (None: the one-person cache's).
        self.principal = principal


class PeopleStore:
    """The two directories a people tool reads: its own (index and links) and the cache's."""

    def __init__(self, own_dir: Path, cache_dir: Path, clock: Clock | None = None) -> None:
        self.own_dir = own_dir
        self.cache_dir = cache_dir
        #: Ranks the index's dates (D160); None trusts every date.
        self.clock = clock
        self._sessions = sessions_for(own_dir)

    @classmethod
    def of(cls, services: Services) -> PeopleStore:
        return cls(services.data_dir, services.data_dir_of(MAIL_CACHE_DISTRIBUTION),
                   services.clock)

    def read(self, body: Callable[[Opened], T], principal: str) -> T:
        """``body`` over ``principal``'s index, current with the cache, the links and the
        owner's addresses, in one read transaction; and the cache it was checked against (for
        source reads). A damaged index is rebuilt once."""
        session = self._sessions.take(principal)
        try:
            result = self._read_mending(session, body, principal)
        except ToolFailure as failure:
            self._sessions.give(session, reusable=failure.reason_code not in _FILE_FAILURES)
            raise
        except BaseException:
            self._sessions.give(session, reusable=False)
            raise
        self._sessions.give(session)
        return result

    def _read_mending(self, session: Session, body: Callable[[Opened], T], principal: str) -> T:
        """``_read_once``, and once more after deleting an index found damaged."""
        try:
            return self._read_once(session, body, principal)
        except _Damaged as damaged:
            whose = damaged.principal
        try:
            self._remove_index(session, whose)
            return self._read_once(session, body, principal)
        except (_Damaged, OSError) as exc:
            raise ToolFailure(INDEX_UNAVAILABLE, detail={"error": type(exc).__name__}) from None

    def _read_once(self, session: Session, body: Callable[[Opened], T], principal: str) -> T:
        try:
            reader = session.reader(self.cache_dir)
        except (CacheUnavailable, OSError) as exc:
            raise _cache_failure(exc) from None
        cache = Cache(reader)
        with cache.snapshot():
            return self._read_in(session, cache, body, principal)

    def _read_in(self, session: Session, cache: Cache, body: Callable[[Opened], T],
                 principal: str) -> T:
        """``_read_once`` inside one snapshot of the cache: whose mail, the generation, the
        messages and the sources are of one moment."""
        accounts = cache.accounts()
        whose = None if accounts is None else principal
        try:
            links, owners = session.links_state(self.own_dir, whose)
        except (OSError, sqlite3.Error) as exc:
            raise self._own_failure(exc, "links") from None
        if whose is not None and accounts and (missing := accounts - owners):
            # Accounts the principal owns are its own addresses for good, even once they move
            # on: they never turn into people from its other accounts' mail.
            self._record(set(missing), whose)
            owners |= missing
        try:
            if whose is not None:
                self._remove_index(session, None)  # the one-person index: nobody's any more
            if accounts == frozenset():
                self._remove_index(session, whose)  # owns nothing now: keep nothing of theirs
                index = empty_index()
            else:
                index = session.index(self.own_dir, whose)
        except (OSError, sqlite3.Error) as exc:
            raise self._own_failure(exc, "index", whose) from None
        # The in-memory index is the call's own; a file's connection stays with the session.
        with closing(index) if accounts == frozenset() else nullcontext():
            try:
                return self._query(index, cache, links, owners, whose, body)
            except (OSError, sqlite3.Error) as exc:
                raise self._own_failure(exc, "index", whose) from None

    def _query(self, index: sqlite3.Connection, cache: Cache, links: dict[str, str],
               owners: frozenset[str], whose: str | None, body: Callable[[Opened], T]) -> T:
        """``body`` over ``index``, rebuilt first if it is not current, in one read
        transaction (WAL: readers never block) that the currency check opens: a current index
        costs no second one."""
        now = None if self.clock is None else self.clock.now()
        index.execute("BEGIN")
        try:
            if not is_current(index, cache, links, owners, now=now):
                index.execute("ROLLBACK")
                refresh(index, cache, links, owners, record=lambda new: self._record(new, whose),
                        now=now)
                index.execute("BEGIN")
            return body(Opened(index, cache))
        finally:
            if index.in_transaction:  # read only: nothing to keep
                index.execute("ROLLBACK")

    def _remove_index(self, session: Session, whose: str | None) -> None:
        """Delete ``whose`` index file (``remove_index``), closing every kept connection to
        it first, every people tool's: a deleted file must not live on behind one. Nothing
        there (every call of a shared cache asks for the one-person index): nothing is
        closed, and no lock is waited for."""
        if not index_present(index_path(self.own_dir, whose)):
            return
        session.drop_index()
        clear_every(self.own_dir)
        remove_index(self.own_dir, whose)

    def _record(self, accounts: set[str], principal: str | None) -> None:
        try:
            record_accounts(self.own_dir, accounts, principal, timeout=CALL_BUSY_TIMEOUT_S)
        except (OSError, sqlite3.Error) as exc:
            raise self._own_failure(exc, "links") from None

    @staticmethod
    def _own_failure(exc: Exception, file: str, principal: str | None = None) -> Exception:
        if isinstance(exc, sqlite3.Error) and _busy(exc):
            return ToolFailure(BUSY, detail={"file": file}, retryable=True)
        if file == "index" and isinstance(exc, sqlite3.DatabaseError) and is_damage(exc):
            return _Damaged(principal)
        return ToolFailure(INDEX_UNAVAILABLE, detail={"file": file, "error": type(exc).__name__})
