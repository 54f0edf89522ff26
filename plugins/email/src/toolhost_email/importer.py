"""Import one mbox file or one Maildir into the cache: idempotent, one transaction per source.

``import_path(data_dir, account, path)`` is what ``toolhost-email import`` runs. A message that
cannot be parsed is skipped and counted with its reason; a source that cannot be read to its
end (an I/O error, a file that is neither an mbox nor a Maildir) imports nothing at all. A
source with no message in it (a file whose first line that is not blank is no "From " line,
a Maildir without a message file) is refused before the cache is opened, so nothing is
written. A Maildir entry that is not a regular file (a symbolic link, a FIFO, a directory, a
device) is skipped without being opened, and counted (``NOT_REGULAR_FILE``).
"""

from __future__ import annotations

import errno
import json
import mailbox
import multiprocessing
import os
import sqlite3
import stat
from collections import Counter, deque
from collections.abc import Callable, Generator, Iterator, Mapping
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool as BrokenExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, Final

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

__all__ = ["NOT_REGULAR_FILE", "ImportFailed", "ImportReport", "import_path",
           "normalize_account"]

_MAX_ACCOUNT: Final = 320  # RFC 5321's longest path
#: Messages per existence check and insert batch (under SQLite's 999 bound variables).
_CHUNK: Final = 500
_MAX_WORKERS: Final = 4
#: Why a Maildir entry was skipped unopened: it is no regular file (a symbolic link, a FIFO,
#: a directory, a device, a socket). Counted in the report beside ``parse.SKIP_REASONS``.
NOT_REGULAR_FILE: Final = "not_regular_file"
_O_CLOEXEC: Final = getattr(os, "O_CLOEXEC", 0)
_O_DIR: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _O_CLOEXEC
#: A message file: never through a link, and a FIFO that slipped in opens without a writer.
_O_ENTRY: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _O_CLOEXEC
#: What open(O_NOFOLLOW) says of a link (ELOOP; EMLINK on FreeBSD), ENXIO of a socket.
_NOT_A_FILE_ERRNOS: Final = frozenset({errno.ELOOP, errno.EMLINK, errno.ENXIO})
#: How much of a line the mbox check reads at a time.
_PROBE: Final = 8192


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
    #: Skipped messages per reason (``parse.SKIP_REASONS``, and ``NOT_REGULAR_FILE`` for a
    #: Maildir entry that was not opened; such an entry is counted in ``seen`` too).
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


#: A source's messages: each one's bytes, or NOT_REGULAR_FILE for an entry skipped unopened.
Messages = Generator[bytes | str, None, None]


def _no_messages(path: Path, not_files: int = 0) -> ImportFailed:
    skipped = f" ({not_files} entries skipped: not regular files)" if not_files else ""
    return ImportFailed(f"no messages found in {path}{skipped}: import reads an mbox file (its "
                        'first line starts with "From ") or a Maildir directory (with cur/, '
                        "new/ and tmp/)")


def _unreadable(path: Path, exc: OSError) -> ImportFailed:
    return ImportFailed(f"{path} could not be read ({type(exc).__name__}); nothing of it was "
                        "imported")


def _starts_with_from_line(file: BinaryIO) -> bool:
    """Whether the first line that is not blank starts with "From ", as every mbox message
    does (mailbox.mbox would take the first "From " line anywhere for the start of one)."""
    at_line_start = True
    while line := file.readline(_PROBE):
        if line.strip():
            return at_line_start and line.startswith(b"From ")
        at_line_start = line.endswith(b"\n")
    return False


def _mbox_messages(path: Path) -> Messages:
    mbox = mailbox.mbox(path, factory=None, create=False)
    try:
        for key in mbox.iterkeys():
            yield _bounded_bytes(mbox, key)
    finally:
        mbox.close()


def _read_entry(folder: int, name: str) -> bytes | None:
    """The message file ``name`` of the directory ``folder`` (a descriptor), read no further
    than the size bound; None, unread, when it is no regular file (any more)."""
    try:
        fd = os.open(name, _O_ENTRY, dir_fd=folder)
    except OSError as exc:
        if exc.errno in _NOT_A_FILE_ERRNOS:
            return None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with open(fd, "rb", closefd=False) as file:
            return file.read(MAX_MESSAGE_BYTES + 1)
    finally:
        os.close(fd)


def _maildir_messages(path: Path, folders: Mapping[str, int],
                      entries: list[tuple[str, str, str, bool]]) -> Messages:
    for _, sub, name, regular in entries:
        try:
            data = _read_entry(folders[sub], name) if regular else None
        except FileNotFoundError as exc:  # moved or deleted by a mail client meanwhile
            raise ImportFailed(f"{path} changed while it was read (a message was moved or "
                               "deleted); nothing of it was imported: import again") from exc
        yield NOT_REGULAR_FILE if data is None else data


@contextmanager
def _maildir(path: Path) -> Iterator[Messages]:
    """The Maildir's message files in cur/ and new/, listed once, in key order (the keys,
    not the directory's order), each entry classified without following a link."""
    if not all((path / sub).is_dir() for sub in ("cur", "new", "tmp")):
        raise ImportFailed(f"{path} is a directory but not a Maildir (no cur/new/tmp): "
                           "give an mbox file or a Maildir")
    folders: dict[str, int] = {}
    try:
        entries: list[tuple[str, str, str, bool]] = []
        for sub in ("cur", "new"):
            try:
                folders[sub] = folder = os.open(path / sub, _O_DIR)
                with os.scandir(folder) as listing:
                    entries.extend((entry.name.split(":")[0], sub, entry.name,
                                    entry.is_file(follow_symlinks=False))
                                   for entry in listing if not entry.name.startswith("."))
            except OSError as exc:
                if sub not in folders and (path / sub).is_symlink():  # ELOOP, or ENOTDIR
                    raise ImportFailed(f"{path / sub} is a symbolic link: a Maildir's cur/ and "
                                       "new/ are read only as its own directories") from None
                raise _unreadable(path, exc) from exc
        entries.sort()
        files = sum(regular for *_, regular in entries)
        if not files:
            raise _no_messages(path, len(entries))
        messages = _maildir_messages(path, folders, entries)
        try:
            yield messages
        finally:
            messages.close()
    finally:
        for fd in folders.values():
            os.close(fd)


@contextmanager
def _source(path: Path) -> Iterator[Messages]:
    """Every message's bytes, in source order (an mbox's From_ lines are not part of them), or
    ``NOT_REGULAR_FILE`` for a Maildir entry skipped unopened.

    :raises ImportFailed: ``path`` is no mbox or Maildir, or holds no message: raised on entry,
        before the caller opens the cache.
    """
    if path.is_dir():
        with _maildir(path) as messages:
            yield messages
        return
    if not path.is_file():
        raise ImportFailed(f"{path} does not exist or is not a file or directory: give an "
                           "mbox file or a Maildir")
    try:
        with path.open("rb") as file:
            is_mbox = _starts_with_from_line(file)
    except OSError as exc:
        raise _unreadable(path, exc) from exc
    if not is_mbox:
        raise _no_messages(path)
    messages = _mbox_messages(path)
    try:
        yield messages
    finally:
        messages.close()


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
                workers: int | None = 1, owner: str | None = None,
                on_read: Callable[[int], None] | None = None) -> ImportReport:
    """Import the mbox file or Maildir at ``path`` under ``account`` into the cache in
    ``data_dir`` (toolhost-email's data directory). Importing it again adds nothing.

    ``workers``: processes that parse in parallel once a source has more than one batch of new
    mail; None is the CPU count, at most 4. The default, 1, parses in this process: a worker
    pool is spawned, and spawning re-imports the caller's ``__main__``, which only a program
    built for it (the console script) can promise. Storing is always this process's, in one
    transaction.

    ``owner``: the principal the account belongs to (``owners``), set in the same
    transaction; an account that is already another principal's is refused.

    ``on_read(n)``: called as each message is read, with how many were read so far (the
    console script's progress line).

    :raises ImportFailed: the source cannot be read, or the account is another principal's;
        nothing of it was stored.
    """
    account = normalize_account(account)
    if owner is not None and not owner.strip():
        raise ImportFailed("--owner must name a principal (as its token or the issuer names it)")
    if workers is None:
        workers = min(os.cpu_count() or 1, _MAX_WORKERS)
    path = Path(path)
    with _source(path) as messages:
        conn = open_writable(data_dir)
        try:
            return _import(conn, account, path, messages, max(1, workers),
                           None if owner is None else owner.strip(), on_read)
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


def _import(conn: sqlite3.Connection, account: str, path: Path, messages: Iterator[bytes | str],
            workers: int, owner: str | None,
            on_read: Callable[[int], None] | None = None) -> ImportReport:
    seen = read = 0
    batches = _Batches(conn, account, workers)
    conn.execute("BEGIN IMMEDIATE")
    try:
        if owner is not None:
            try:
                claim(conn, account, owner)
            except OwnerConflict as exc:
                raise ImportFailed(str(exc)) from None
        chunk: list[tuple[str, bytes]] = []
        for raw in messages:
            seen += 1
            if on_read is not None:
                on_read(seen)
            if isinstance(raw, str):  # a Maildir entry that is no regular file, not opened
                batches.skipped[raw] += 1
                continue
            read += 1
            chunk.append((message_key_for(account, raw), raw))
            if len(chunk) >= _CHUNK:
                batches.add(chunk)
                chunk = []
        if chunk:
            batches.add(chunk)
        batches.finish()
        if not read:  # the source changed since it was checked: nothing of it is a message
            raise _no_messages(path, seen)
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
