"""The cache's public read API (``open_mail_cache``): a read-only view for the tools of this
package and for other distributions (toolhost-people), never a writer.

A reader opened for a principal reads only the accounts that principal owns (``owners``: every
account while the cache is one person's); each read decides it in the same snapshot as the
mail, so an owner changed a moment ago holds for the next read. Opened for no principal, it is
the operator's view of everything."""

from __future__ import annotations

import datetime as _dt
import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, cast

from toolhost_email.cache_model import CachedMessage, MailAddress, MessageSource
from toolhost_email.owners import accounts_of, own_feedback, readable, shared
from toolhost_email.store import CacheUnavailable, cache_path, open_read_only

__all__ = ["MailCacheReader", "open_mail_cache"]

_COLUMNS = ("message_key, account, thread_id, message_id, date_ts, subject, sender, to_addrs, "
            "cc_addrs, reply_to, direction")


def _addrs(raw: str) -> tuple[MailAddress, ...]:
    return tuple(MailAddress(name=n, address=a) for n, a in json.loads(raw))


def _date(ts: int | None) -> _dt.datetime | None:
    return None if ts is None else _dt.datetime.fromtimestamp(ts, _dt.UTC)


def message_from_row(row: tuple[Any, ...]) -> CachedMessage:
    return CachedMessage(
        message_key=row[0], account=row[1], thread_id=row[2], message_id=row[3],
        date=_date(row[4]), subject=row[5], sender=_addrs(row[6]), to=_addrs(row[7]),
        cc=_addrs(row[8]), reply_to=_addrs(row[9]),
        direction=cast(Literal["sent", "received"], row[10]),
    )


class MailCacheReader:
    """A read-only view of the cache; a context manager, ``close`` releases the connection.
    Opening it takes the checkpoint a killed erase owed, if any (``store.open_read_only``).

    A directory with no cache reads as an empty cache (generation 0, no messages).
    ``principal``: whose view it is (see the module text); None, the operator's. Each read is
    one snapshot of the cache; reads inside ``snapshot()`` share one.
    """

    def __init__(self, data_dir: Path, principal: str | None = None) -> None:
        path = cache_path(data_dir)
        self.principal = principal
        self._conn: sqlite3.Connection | None = None
        try:
            if path.exists():
                self._conn = open_read_only(data_dir, check_same_thread=False)
        except (sqlite3.Error, OSError) as exc:  # OSError: a directory it may not search
            self.close()
            raise CacheUnavailable(f"{path} cannot be read as a mail cache "
                                   f"({type(exc).__name__})") from exc

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Every read inside the block sees the same state of the cache (one read
        transaction): the owners, the generation and the mail of one moment."""
        conn = self._conn
        if conn is None or conn.in_transaction:
            yield
            return
        conn.execute("BEGIN")
        try:
            yield
        finally:
            if self._conn is conn and conn.in_transaction:
                conn.execute("ROLLBACK")  # read only: nothing to keep

    def _owners(self) -> bool:
        """The cache has owners' tables: a schema-1 cache (not yet opened by this version's
        writer) has none. Asked inside the read's own snapshot, never remembered: the first
        write migrates the cache while readers are open."""
        if self._conn is None:  # no cache: nothing to read, nobody's
            return False
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        return row is not None and int(row[0]) >= 2

    def generation(self) -> int:
        if self._conn is None:
            return 0
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        return 0 if row is None else int(row[0])

    def state(self) -> str:
        """What the cache holds now (its messages and their owners), as a digest: "" when
        there is no cache, or it was last changed by a version that kept none. Compare it
        with the generation: a cache made anew counts generations from 0 again, so equal
        generations alone do not mean the same mail."""
        if self._conn is None:
            return ""
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'state'").fetchone()
        return "" if row is None else f"{int(row[0]):016x}"

    def shared(self) -> bool:
        """The cache is several people's: some account was ever given an owner."""
        if self._conn is None:
            return False
        with self.snapshot():
            return self._owners() and shared(self._conn)

    def accounts(self) -> frozenset[str] | None:
        """The accounts this reader reads now; None: every account (the operator's view, or
        a cache of one person)."""
        if self._conn is None or self.principal is None:
            return None
        with self.snapshot():
            return accounts_of(self._conn, self.principal) if self._owners() else None

    def _where(self, column: str = "account") -> tuple[str, tuple[object, ...]]:
        """Inside a snapshot: the condition keeping the rows of this reader's accounts."""
        return readable(self.principal if self._owners() else None, column)

    def messages(self) -> Iterator[CachedMessage]:
        """Every message this reader reads, ordered by (date with None first, message_key)."""
        if self._conn is None:
            return
        with self.snapshot():
            where, values = self._where()
            cursor = self._conn.execute(
                f"SELECT {_COLUMNS} FROM messages WHERE {where} ORDER BY date_ts, message_key",
                values)
            for row in cursor:
                yield message_from_row(row)

    def message(self, message_key: str) -> CachedMessage | None:
        if self._conn is None:
            return None
        with self.snapshot():
            where, values = self._where()
            row = self._conn.execute(
                f"SELECT {_COLUMNS} FROM messages WHERE message_key = ? AND {where}",
                (message_key, *values)).fetchone()
        return None if row is None else message_from_row(row)

    def source(self, message_key: str) -> MessageSource | None:
        if self._conn is None:
            return None
        with self.snapshot():
            where, values = self._where()
            row = self._conn.execute(
                "SELECT message_key, account, thread_id, headers, body, truncated FROM "
                f"messages WHERE message_key = ? AND {where}", (message_key, *values)).fetchone()
        if row is None:
            return None
        return MessageSource(
            message_key=row[0], account=row[1], thread_id=row[2],
            headers=tuple((str(n), str(v)) for n, v in json.loads(row[3])),
            text=row[4], truncated=bool(row[5]),
        )

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> MailCacheReader:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def connection_of(reader: MailCacheReader) -> sqlite3.Connection | None:
    """The reader's connection, for this package's own tools (None for an empty cache). Not
    part of the read API: other distributions use the reader's methods, never the schema."""
    return reader._conn


def mail_where(reader: MailCacheReader, column: str = "account") -> tuple[str, tuple[object, ...]]:
    """Inside ``reader.snapshot()``: the SQL condition (and its values) keeping the rows of the
    reader's accounts, for this package's own tools: the same rule as the reader's methods."""
    return reader._where(column)


def feedback_where(reader: MailCacheReader,
                   column: str = "owner") -> tuple[str, tuple[object, ...]]:
    """Inside ``reader.snapshot()``: the SQL condition keeping the feedback records the
    reader's principal reads."""
    return own_feedback(reader.principal if reader._owners() else None, column)


def open_mail_cache(data_dir: Path, principal: str | None = None) -> MailCacheReader:
    """A read-only view of the cache in ``data_dir`` (toolhost-email's data directory): of
    the accounts ``principal`` owns, or (None) of everything."""
    return MailCacheReader(Path(data_dir), principal)
