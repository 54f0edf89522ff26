"""Import one mbox file or one Maildir into the cache: idempotent, one transaction per source.

``import_path(data_dir, account, path)`` is what ``toolhost-email import`` runs. A message that
cannot be parsed is skipped and counted with its reason; a source that cannot be read to its
end (an I/O error, a file that is neither an mbox nor a Maildir) imports nothing at all.
"""

from __future__ import annotations

import json
import mailbox
import multiprocessing
import os
import sqlite3
from collections import Counter, deque
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool as BrokenExecutor
from pathlib import Path
from typing import Final

import attrs

from toolhost_email.cache_model import MailAddress
from toolhost_email.census import list_identifier
from toolhost_email.owners import OwnerConflict, claim
from toolhost_email.parse import (
    MAX_MESSAGE_BYTES,
    Malformed,
    ParsedMessage,
    message_key_for,
    parse_message,
)
from toolhost_email.store import bump_generation, open_writable

__all__ = ["ImportFailed", "ImportReport", "import_path", "normalize_account"]

_MAX_ACCOUNT: Final = 320  # RFC 5321's longest path
#: Messages per existence check and insert batch (under SQLite's 999 bound variables).
_CHUNK: Final = 500
_MAX_WORKERS: Final = 4


class ImportFailed(Exception):
    """The source was not imported at all; the message is one line for the operator."""


@attrs.frozen
class ImportReport:
    account: str
    path: str
    #: Messages read from the source.
    seen: int
    #: Newly stored (the rest were already in the cache, or skipped).
    added: int
    duplicates: int
    #: Skipped messages per reason (``parse.SKIP_REASONS``).
    skipped: Mapping[str, int]
    #: The cache's generation after the import.
    generation: int

    @property
    def skipped_total(self) -> int:
        return sum(self.skipped.values())


def normalize_account(account: str) -> str:
    """The account address as stored: trimmed, lower-cased; refused when it is no address."""
    value = account.strip().lower()
    if (not value or len(value) > _MAX_ACCOUNT or value.count("@") != 1
            or any(c.isspace() or c in "<>" for c in value) or value.startswith("@")
            or value.endswith("@")):
        raise ImportFailed(f"--account must be one mail address like owner@example.org, "
                           f"at most {_MAX_ACCOUNT} characters")
    return value


def _bounded_bytes(box: mailbox.Mailbox[mailbox.Message], key: str) -> bytes:
    """The message's bytes as ``get_bytes`` returns them, but never more than one byte past
    MAX_MESSAGE_BYTES read into memory: a longer message is skipped as too large anyway."""
    with box.get_file(key) as file:
        data = file.read(MAX_MESSAGE_BYTES + 1)
    return data.replace(os.linesep.encode(), b"\n") if os.linesep != "\n" else data


def _raw_messages(path: Path) -> Iterator[bytes]:
    """Every message's bytes, in source order (an mbox's From_ lines are not part of them)."""
    if path.is_dir():
        if not all((path / sub).is_dir() for sub in ("cur", "new", "tmp")):
            raise ImportFailed(f"{path} is a directory but not a Maildir (no cur/new/tmp): "
                               "give an mbox file or a Maildir")
        box: mailbox.Mailbox[mailbox.Message] = mailbox.Maildir(path, factory=None, create=False)
        for key in sorted(box.iterkeys()):  # a stable order: the keys, not the directory's
            try:
                yield _bounded_bytes(box, key)
            except KeyError as exc:  # moved or deleted by a mail client meanwhile
                raise ImportFailed(f"{path} changed while it was read (a message was moved or "
                                   "deleted); nothing of it was imported: import again") from exc
    elif path.is_file():
        mbox = mailbox.mbox(path, factory=None, create=False)
        try:
            for key in mbox.iterkeys():
                yield _bounded_bytes(mbox, key)
        finally:
            mbox.close()
    else:
        raise ImportFailed(f"{path} does not exist or is not a file or directory: give an "
                           "mbox file or a Maildir")


def _addrs(addrs: tuple[MailAddress, ...]) -> str:
    return json.dumps([[a.name, a.address] for a in addrs], ensure_ascii=False)


def _list_key(m: ParsedMessage) -> str | None:
    """Marks a list message (the census groups them itself): its list identifier and From
    domain, else its sender."""
    if m.list_unsubscribe is None and m.list_id is None:
        return None
    address = m.sender[0].address if m.sender else ""
    identifier = list_identifier(m.list_id)
    if identifier is not None:
        return f"list:{identifier}@{address.rpartition('@')[2]}"
    return "from:" + address


def _row(m: ParsedMessage) -> tuple[object, ...]:
    return (
        m.message_key, m.account, m.thread_id, m.message_id,
        None if m.date is None else int(m.date.timestamp()),
        m.subject, _addrs(m.sender), _addrs(m.to), _addrs(m.cc), _addrs(m.reply_to),
        m.direction, json.dumps(m.headers, ensure_ascii=False), m.text, int(m.truncated),
        _list_key(m), m.list_id, m.list_unsubscribe, m.list_unsubscribe_post,
        json.dumps(m.auth_results, ensure_ascii=False),
    )


_INSERT = (
    "INSERT OR IGNORE INTO messages (message_key, account, thread_id, message_id, date_ts, "
    "subject, sender, to_addrs, cc_addrs, reply_to, direction, headers, body, truncated, "
    "list_key, list_id, list_unsubscribe, list_unsubscribe_post, auth_results) "
    "VALUES (" + ", ".join("?" * 19) + ")"
)


def import_path(data_dir: Path, account: str, path: Path, *,
                workers: int | None = 1, owner: str | None = None) -> ImportReport:
    """Import the mbox file or Maildir at ``path`` under ``account`` into the cache in
    ``data_dir`` (toolhost-email's data directory). Importing it again adds nothing.

    ``workers``: processes that parse in parallel once a source has more than one batch of new
    mail; None is the CPU count, at most 4. The default, 1, parses in this process: a worker
    pool is spawned, and spawning re-imports the caller's ``__main__``, which only a program
    built for it (the console script) can promise. Storing is always this process's, in one
    transaction.

    ``owner``: the principal the account belongs to (``owners``), set in the same
    transaction; an account that is already another principal's is refused.

    :raises ImportFailed: the source cannot be read, or the account is another principal's;
        nothing of it was stored.
    """
    account = normalize_account(account)
    if owner is not None and not owner.strip():
        raise ImportFailed("--owner must name a principal (as its token or the issuer names it)")
    if workers is None:
        workers = min(os.cpu_count() or 1, _MAX_WORKERS)
    conn = open_writable(data_dir)
    try:
        return _import(conn, account, Path(path), max(1, workers),
                       None if owner is None else owner.strip())
    finally:
        conn.close()


def parse_batch(account: str, raws: list[bytes]) -> list[tuple[object, ...] | str]:
    """Each message's row, or the reason it is skipped (runs in a worker process too)."""
    out: list[tuple[object, ...] | str] = []
    for raw in raws:
        parsed = parse_message(account, raw)
        out.append(parsed.reason if isinstance(parsed, Malformed) else _row(parsed))
    return out


Parsed = list[tuple[object, ...] | str]


class _Batches:
    """Batches of new messages, parsed here or in a process pool (started only for a source
    with more than one batch), stored in source order by the importing process."""

    def __init__(self, conn: sqlite3.Connection, account: str, workers: int) -> None:
        self.conn, self.account, self.workers = conn, account, workers
        self.added = 0
        self.skipped: Counter[str] = Counter()
        self._pool: ProcessPoolExecutor | None = None
        self._pending: deque[tuple[list[str], Future[Parsed] | Parsed]] = deque()
        # Keys handed to a worker and not stored yet: a message twice in one source is one.
        self._in_flight: set[str] = set()

    def add(self, chunk: list[tuple[str, bytes]]) -> None:
        marks = ", ".join("?" * len(chunk))
        known = {row[0] for row in self.conn.execute(
            f"SELECT message_key FROM messages WHERE message_key IN ({marks})",
            [key for key, _ in chunk])}
        keys: list[str] = []
        raws: list[bytes] = []
        for key, raw in chunk:
            if key in known or key in self._in_flight:
                continue
            known.add(key)
            self._in_flight.add(key)
            keys.append(key)
            raws.append(raw)
        if self._pool is None and self.workers > 1 and len(raws) >= _CHUNK // 2:
            # spawn, not fork: the importing process may have threads (a host, a test).
            self._pool = ProcessPoolExecutor(self.workers,
                                             mp_context=multiprocessing.get_context("spawn"))
        work: Future[Parsed] | Parsed = (
            parse_batch(self.account, raws) if self._pool is None
            else self._pool.submit(parse_batch, self.account, raws))
        self._pending.append((keys, work))
        self._store(self.workers * 2 if self._pool is not None else 0)

    def finish(self) -> None:
        self._store(0)

    def _store(self, keep: int) -> None:
        while len(self._pending) > keep:
            keys, work = self._pending.popleft()
            results = work.result() if isinstance(work, Future) else work
            rows = [r for r in results if not isinstance(r, str)]
            self.skipped.update(r for r in results if isinstance(r, str))
            before = self.conn.total_changes
            self.conn.executemany(_INSERT, rows)
            self.added += self.conn.total_changes - before
            self._in_flight.difference_update(keys)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)


def _import(conn: sqlite3.Connection, account: str, path: Path, workers: int,
            owner: str | None) -> ImportReport:
    seen = 0
    batches = _Batches(conn, account, workers)
    conn.execute("BEGIN IMMEDIATE")
    try:
        if owner is not None:
            try:
                claim(conn, account, owner)
            except OwnerConflict as exc:
                raise ImportFailed(str(exc)) from None
        chunk: list[tuple[str, bytes]] = []
        for raw in _raw_messages(path):
            seen += 1
            chunk.append((message_key_for(account, raw), raw))
            if len(chunk) >= _CHUNK:
                batches.add(chunk)
                chunk = []
        if chunk:
            batches.add(chunk)
        batches.finish()
        generation = (bump_generation(conn) if batches.added else
                      int(conn.execute("SELECT value FROM meta WHERE key = 'generation'")
                          .fetchone()[0]))
        conn.execute("COMMIT")
    except ImportFailed:
        conn.execute("ROLLBACK")
        raise
    except (OSError, mailbox.Error, sqlite3.Error, ValueError, BrokenExecutor) as exc:
        conn.execute("ROLLBACK")
        raise ImportFailed(f"{path} could not be read to its end ({type(exc).__name__}); "
                           "nothing of it was imported") from exc
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    finally:
        batches.close()
    skipped = batches.skipped
    return ImportReport(account=account, path=str(path), seen=seen, added=batches.added,
                        duplicates=seen - batches.added - sum(skipped.values()),
                        skipped=dict(sorted(skipped.items())), generation=generation)
