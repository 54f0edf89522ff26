"""What every people tool opens per call: toolhost-email's cache (through its public read API
only) and this distribution's index, refreshed against the cache, the operator's links and
the owner's addresses, then read in one read transaction.

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
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, TypeVar

from toolhost_email import MAIL_CACHE_DISTRIBUTION, CacheUnavailable, open_mail_cache

from toolhost import Services, ToolFailure
from toolhost_people.index import is_damage, open_index, refresh, remove_index
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


class PeopleStore:
    """The two directories a people tool reads: its own (index and links) and the cache's."""

    def __init__(self, own_dir: Path, cache_dir: Path) -> None:
        self.own_dir = own_dir
        self.cache_dir = cache_dir

    @classmethod
    def of(cls, services: Services) -> PeopleStore:
        return cls(services.data_dir, services.data_dir_of(MAIL_CACHE_DISTRIBUTION))

    def read(self, body: Callable[[Opened], T]) -> T:
        """``body`` over the index, current with the cache, the links and the owner's
        addresses, in one read transaction; and the cache it was checked against (for
        source reads). A damaged index is rebuilt once."""
        try:
            return self._read_once(body)
        except _Damaged:
            pass
        try:
            remove_index(self.own_dir)
            return self._read_once(body)
        except (_Damaged, OSError) as exc:
            raise ToolFailure(INDEX_UNAVAILABLE, detail={"error": type(exc).__name__}) from None

    def _read_once(self, body: Callable[[Opened], T]) -> T:
        try:
            links, owners = read_state(self.own_dir)
        except (OSError, sqlite3.Error) as exc:
            raise self._own_failure(exc, "links") from None
        try:
            reader = open_mail_cache(self.cache_dir)
        except (CacheUnavailable, OSError) as exc:
            raise _cache_failure(exc) from None
        with reader:
            cache = Cache(reader)
            try:
                index = open_index(self.own_dir)
            except (OSError, sqlite3.Error) as exc:
                raise self._own_failure(exc, "index") from None
            with closing(index):
                try:
                    refresh(index, cache, links, owners, record=self._record)
                    # One snapshot for every query of the call (WAL: readers never block).
                    index.execute("BEGIN")
                    try:
                        return body(Opened(index, cache))
                    finally:
                        if index.in_transaction:  # read only: nothing to keep
                            index.execute("ROLLBACK")
                except (OSError, sqlite3.Error) as exc:
                    raise self._own_failure(exc, "index") from None

    def _record(self, accounts: set[str]) -> None:
        try:
            record_accounts(self.own_dir, accounts)
        except (OSError, sqlite3.Error) as exc:
            raise self._own_failure(exc, "links") from None

    @staticmethod
    def _own_failure(exc: Exception, file: str) -> Exception:
        if isinstance(exc, sqlite3.Error) and _busy(exc):
            return ToolFailure(BUSY, detail={"file": file}, retryable=True)
        if file == "index" and isinstance(exc, sqlite3.DatabaseError) and is_damage(exc):
            return _Damaged()
        return ToolFailure(INDEX_UNAVAILABLE, detail={"file": file, "error": type(exc).__name__})
