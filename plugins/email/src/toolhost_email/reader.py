"""The cache's public read API (``open_mail_cache``): a read-only view for the tools of this
package and for other distributions (toolhost-people), never a writer."""

from __future__ import annotations

import datetime as _dt
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, cast

from toolhost_email.cache_model import CachedMessage, MailAddress, MessageSource
from toolhost_email.store import CacheUnavailable, cache_path

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

    A directory with no cache reads as an empty cache (generation 0, no messages).
    """

    def __init__(self, data_dir: Path) -> None:
        path = cache_path(data_dir)
        self._conn: sqlite3.Connection | None = None
        try:
            if path.exists():
                self._conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True,
                                             timeout=30.0, check_same_thread=False)
                self._conn.execute("SELECT value FROM meta WHERE key = 'generation'")
        except (sqlite3.Error, OSError) as exc:  # OSError: a directory it may not search
            self.close()
            raise CacheUnavailable(f"{path} cannot be read as a mail cache "
                                   f"({type(exc).__name__})") from exc

    def generation(self) -> int:
        if self._conn is None:
            return 0
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        return 0 if row is None else int(row[0])

    def messages(self) -> Iterator[CachedMessage]:
        """Every cached message, ordered by (date with None first, message_key)."""
        if self._conn is None:
            return
        cursor = self._conn.execute(
            f"SELECT {_COLUMNS} FROM messages ORDER BY date_ts, message_key")
        for row in cursor:
            yield message_from_row(row)

    def message(self, message_key: str) -> CachedMessage | None:
        if self._conn is None:
            return None
        row = self._conn.execute(
            f"SELECT {_COLUMNS} FROM messages WHERE message_key = ?",
            (message_key,)).fetchone()
        return None if row is None else message_from_row(row)

    def source(self, message_key: str) -> MessageSource | None:
        if self._conn is None:
            return None
        row = self._conn.execute(
            "SELECT message_key, account, thread_id, headers, body, truncated FROM messages "
            "WHERE message_key = ?", (message_key,)).fetchone()
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


def open_mail_cache(data_dir: Path) -> MailCacheReader:
    """A read-only view of the cache in ``data_dir`` (toolhost-email's data directory)."""
    return MailCacheReader(Path(data_dir))
