"""What every people tool opens per call: toolhost-email's cache (through its public read API
only, as the caller reads it) and this distribution's index, refreshed against the cache, the
operator's links and the owner's addresses, then read in one read transaction.

Whose index: while the cache is one person's, the one index of everything; once its accounts
have owners (toolhost-email's owners), the caller's own, built from the accounts it owns only
(a principal that owns none reads an empty index made in memory, leaving no file behind), and
the one index of everything is deleted: nobody reads it any more.

A call opens both and closes both: a connection is cheap next to the guarantee that each call
sees the cache as it is now (an erase a moment ago is already gone), and a tool built once
and called from several threads in parallel then shares no connection.

Failures are static reasons, never an unexpected one: a cache that cannot be read is
``CACHE_UNAVAILABLE``; a cache or index locked past SQLite's 30-second wait is ``BUSY``
(retryable: an import or erase holds it); a damaged index (not a database, or malformed
anywhere, found at any query) is deleted and rebuilt once, and damaged again, or unopenable
(a directory in its place, no permission), is ``INDEX_UNAVAILABLE``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import ExitStack, closing, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, TypeVar

from toolhost_email import MAIL_CACHE_DISTRIBUTION, CacheUnavailable, open_mail_cache

from toolhost import Services, ToolFailure
from toolhost_people.index import empty_index, is_damage, open_index, refresh, remove_index
from toolhost_people.links import read_state, record_accounts
from toolhost_people.messages import BUSY, CACHE_UNAVAILABLE, INDEX_UNAVAILABLE

if TYPE_CHECKING:
    from toolhost_email import CachedMessage, MailCacheReader, MessageSource

__all__ = ["Cache", "Opened", "PeopleStore"]

T = TypeVar("T")

#: SQLite's primary result codes for a lock held past the connection's timeout.
_SQLITE_BUSY, _SQLITE_LOCKED = 5, 6


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

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """The reader's ``snapshot``; only its own start is translated (what the block raises
        is the block's)."""
        stack = ExitStack()
        try:
            stack.enter_context(self._reader.snapshot())
        except (sqlite3.Error, CacheUnavailable) as exc:
            raise _cache_failure(exc) from None
        with stack:
            yield

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

    def __init__(self, own_dir: Path, cache_dir: Path) -> None:
        self.own_dir = own_dir
        self.cache_dir = cache_dir

    @classmethod
    def of(cls, services: Services) -> PeopleStore:
        return cls(services.data_dir, services.data_dir_of(MAIL_CACHE_DISTRIBUTION))

    def read(self, body: Callable[[Opened], T], principal: str) -> T:
        """``body`` over ``principal``'s index, current with the cache, the links and the
        owner's addresses, in one read transaction; and the cache it was checked against (for
        source reads). A damaged index is rebuilt once."""
        try:
            return self._read_once(body, principal)
        except _Damaged as damaged:
            whose = damaged.principal
        try:
            remove_index(self.own_dir, whose)
            return self._read_once(body, principal)
        except (_Damaged, OSError) as exc:
            raise ToolFailure(INDEX_UNAVAILABLE, detail={"error": type(exc).__name__}) from None

    def _read_once(self, body: Callable[[Opened], T], principal: str) -> T:
        try:
            reader = open_mail_cache(self.cache_dir, principal)
        except (CacheUnavailable, OSError) as exc:
            raise _cache_failure(exc) from None
        with reader:
            cache = Cache(reader)
            with cache.snapshot():
                return self._read_in(cache, body, principal)

    def _read_in(self, cache: Cache, body: Callable[[Opened], T], principal: str) -> T:
        """``_read_once`` inside one snapshot of the cache: whose mail, the generation, the
        messages and the sources are of one moment."""
        accounts = cache.accounts()
        whose = None if accounts is None else principal
        try:
            links, owners = read_state(self.own_dir, whose)
        except (OSError, sqlite3.Error) as exc:
            raise self._own_failure(exc, "links") from None
        if whose is not None and accounts and (missing := accounts - owners):
            # Accounts the principal owns are its own addresses for good, even once they move
            # on: they never turn into people from its other accounts' mail.
            self._record(set(missing), whose)
            owners |= missing
        try:
            if whose is not None:
                remove_index(self.own_dir)  # the one-person index: nobody's any more
            if accounts == frozenset():
                remove_index(self.own_dir, whose)  # owns nothing now: keep nothing of theirs
                index = empty_index()
            else:
                index = open_index(self.own_dir, whose)
        except (OSError, sqlite3.Error) as exc:
            raise self._own_failure(exc, "index", whose) from None
        with closing(index):
            try:
                refresh(index, cache, links, owners, record=lambda new: self._record(new, whose))
                # One snapshot for every query of the call (WAL: readers never block).
                index.execute("BEGIN")
                try:
                    return body(Opened(index, cache))
                finally:
                    if index.in_transaction:  # read only: nothing to keep
                        index.execute("ROLLBACK")
            except (OSError, sqlite3.Error) as exc:
                raise self._own_failure(exc, "index", whose) from None

    def _record(self, accounts: set[str], principal: str | None) -> None:
        try:
            record_accounts(self.own_dir, accounts, principal)
        except (OSError, sqlite3.Error) as exc:
            raise self._own_failure(exc, "links") from None

    @staticmethod
    def _own_failure(exc: Exception, file: str, principal: str | None = None) -> Exception:
        if isinstance(exc, sqlite3.Error) and _busy(exc):
            return ToolFailure(BUSY, detail={"file": file}, retryable=True)
        if file == "index" and isinstance(exc, sqlite3.DatabaseError) and is_damage(exc):
            return _Damaged(principal)
        return ToolFailure(INDEX_UNAVAILABLE, detail={"file": file, "error": type(exc).__name__})
