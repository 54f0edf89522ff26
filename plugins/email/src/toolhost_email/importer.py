"""Import one mbox file or one Maildir into the cache: idempotent, one transaction per source.

``import_path(data_dir, account, path)`` is what ``toolhost-email import`` runs; it takes only
an account a From header can carry (``checked_account``, D506), whoever calls it. A message that
cannot be parsed is skipped and counted with its reason; a source that cannot be read to its
end (an I/O error, a file that is neither an mbox nor a Maildir) imports nothing at all. A
source with no message in it (a file whose first line that is not blank is no "From " line,
a Maildir without a message file) is refused before the cache is opened, so nothing is
written. A Maildir entry that is not a regular file (a symbolic link, a FIFO, a directory, a
device) is skipped without being opened, and counted (``NOT_REGULAR_FILE``). An mbox is read
under the shared lock its writers take, and one that changes while it is read (a mail client
or a delivery that takes no lock) imports nothing: import again (``mbox.Reading``).

What the import holds does not grow with the source: a batch ends at ``_CHUNK`` messages or
once it weighs ``_CHUNK_BYTES``, a message over the size bound is known as it is read and only
its key kept, and the batches read and not stored yet weigh at most ``_PENDING_BYTES``. A
message weighs its bytes and the most its row can hold (``rows.row_bound``): a row can be
many times its message (a header's JSON, a header stored twice), and it is what a batch turns
into.
"""

from __future__ import annotations

import errno
import os
import re
import sqlite3
import stat
import string
import sys
import threading
import unicodedata
from collections import Counter, deque
from collections.abc import Callable, Generator, Iterator, Mapping
from concurrent.futures import BrokenExecutor, Executor, Future
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, Final

import attrs

from toolhost_email import mbox
from toolhost_email.owners import OwnerConflict, claim
from toolhost_email.parse import MAX_MESSAGE_BYTES, message_keys
from toolhost_email.rows import Parsed, parse_batch, row_bound, rows_weight
from toolhost_email.store import begin, bump_generation, open_writable, rollback

__all__ = ["NOT_REGULAR_FILE", "ImportFailed", "ImportReport", "checked_account", "import_path",
           "normalize_account"]

_MAX_ACCOUNT: Final = 320  # RFC 5321's longest path
#: RFC 5322's specials, which no unquoted local part holds (``@`` is counted apart).
_SPECIALS: Final = frozenset('\\"(),:;<>[]')
#: What an ASCII character of a domain label may be (the account is lower-cased already).
_LETTERS_DIGITS_HYPHEN: Final = frozenset(string.ascii_lowercase + string.digits + "-")
#: Messages per existence check and insert batch (under SQLite's 999 bound variables).
_CHUNK: Final = 500
#: A batch also ends once its messages weigh this much (``_message_weight``): 500 messages of
#: up to 25 MiB each were held at once, so an import's memory grew with the mailbox's
#: attachments; and 32 MiB of messages whose headers held control characters made 384 million
#: characters of rows.
_CHUNK_BYTES: Final = 32 << 20
#: What the batches read and not yet stored may weigh together (those handed to the pool and
#: not parsed yet their messages' ``_message_weight``, the others the bytes of their rows'
#: strings): past it, a batch is parsed here rather than handed on, and the oldest is waited
#: for and stored. (A batch whose strings hold wide characters weighs more once parsed than
#: its ``_message_weight``, which counts characters; it is then stored first.)
_PENDING_BYTES: Final = 2 * _CHUNK_BYTES
#: The skip reason (``parse.SKIP_REASONS``) of a message over MAX_MESSAGE_BYTES, known as it
#: is read: only its key is kept (a repeat of it is a duplicate, as for any skipped message).
_TOO_LARGE: Final = "too_large"
_MAX_WORKERS: Final = 4
#: Batches waiting in the pool per worker, so that none waits for the importing process.
_AHEAD: Final = 2
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
#: A line an mbox writer quoted (mboxrd: "From " and every ">...From " gained one ">").
_QUOTED_FROM: Final = re.compile(rb"^>(>*From )", re.MULTILINE)
#: prctl(2)'s option: the signal a process gets when its parent (the importer) ends.
_PR_SET_PDEATHSIG: Final = 1


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


def normalize_account(account: str, what: str = "--account") -> str:
    """The account address as stored: trimmed, lower-cased; refused when it is no address
    (``what``: how the operator named it, for the message). Any account already cached passes:
    ``owners clear`` and ``erase`` take it so."""
    value = account.strip().lower()
    if (not value or len(value) > _MAX_ACCOUNT or value.count("@") != 1
            or any(c.isspace() or c in "<>" for c in value) or value.startswith("@")
            or value.endswith("@")):
        raise ImportFailed(f"{what} must be one mail address like owner@example.org, "
                           f"at most {_MAX_ACCOUNT} characters")
    return value


def _label(label: str) -> bool:
    """A DNS label: letters, digits and inner hyphens, 63 at most (IDN letters and marks
    too, as a From header of RFC 6532 carries them)."""
    return 0 < len(label) <= 63 and label[0] != "-" and label[-1] != "-" and all(
        c in _LETTERS_DIGITS_HYPHEN if c.isascii() else unicodedata.category(c)[0] in "LMN"
        for c in label)


def checked_account(account: str, what: str = "--account") -> str:
    """An account to import mail as or to give an owner (D506): ``normalize_account``'s, and
    one address a From header can carry, or the owner's own mail never matches it and counts
    as received. Refused: a control or invisible format character (U+200B prints as nothing,
    so two accounts would look alike), a special in the local part, a domain that is not DNS
    labels.

    :raises ImportFailed: one line naming the account as ``what`` and why it is refused.
    """
    value = normalize_account(account, what)
    local, _, domain = value.partition("@")
    hidden = next((c for c in value if unicodedata.category(c)[0] == "C"), None)
    if hidden is not None:
        why = f"it holds the invisible or control character U+{ord(hidden):04X}"
    elif any(c in _SPECIALS for c in local):
        why = "its local part holds one of " + " ".join(sorted(_SPECIALS))
    elif len(domain) > 253 or not all(_label(label) for label in domain.split(".")):
        why = "its domain is not DNS labels (letters, digits, inner hyphens, 63 at most each)"
    else:
        return value
    raise ImportFailed(f"{what} must be one mail address like owner@example.org: {why} "
                       f"({value!r})")


@attrs.frozen
class _Unquoted:
    """An mbox message whose ">From " lines were unquoted: ``plain`` is the message (as a
    Maildir holds it), ``quoted`` its bytes in the mbox, under whose key an import before
    unquoting stored it."""

    plain: bytes
    quoted: bytes


#: A source's messages: each one's bytes (``_Unquoted`` for an mbox message that had quoted
#: "From " lines), or NOT_REGULAR_FILE for an entry skipped unopened.
Messages = Generator[bytes | _Unquoted | str, None, None]


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


def _changed(path: Path) -> ImportFailed:
    return ImportFailed(f"{path} changed while it was read (a mail client or a delivery wrote "
                        "it); nothing of it was imported: import again")


def _mbox_messages(reading: mbox.Reading) -> Messages:
    """The messages as ``mailbox.mbox`` reads them, each read no further than one byte past
    MAX_MESSAGE_BYTES: a longer message is skipped as too large anyway."""
    try:
        for raw in reading.messages(MAX_MESSAGE_BYTES + 1):
            # Undo one level of the writer's quoting (mboxrd), so the message and its key are
            # the Maildir copy's. One cut at the size bound stays as read: it is skipped
            # anyway, and unquoting would shrink it under the bound.
            plain = (_QUOTED_FROM.sub(rb"\1", raw)
                     if b">From " in raw and len(raw) <= MAX_MESSAGE_BYTES else raw)
            yield raw if plain == raw else _Unquoted(plain, raw)
    except mbox.Changed:
        raise _changed(reading.path) from None


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


#: Raises ImportFailed when the source is no longer the one read; called before COMMIT.
Unchanged = Callable[[], None]


def _no_check() -> None:
    """A Maildir's messages are each one file, read whole or found missing (``_maildir``)."""


@contextmanager
def _source(path: Path) -> Iterator[tuple[Messages, Unchanged]]:
    """Every message's bytes, in source order (an mbox's From_ lines are not part of them), or
    ``NOT_REGULAR_FILE`` for a Maildir entry skipped unopened; and the check that the source
    is still the one read.

    :raises ImportFailed: ``path`` is no mbox or Maildir, or holds no message, or is an mbox
        another program holds locked for writing: raised on entry, before the caller opens
        the cache.
    """
    try:
        is_dir = path.is_dir()
        is_file = not is_dir and path.is_file()
    except OSError as exc:  # a name too long, a parent it may not search: is_dir() raises
        raise _unreadable(path, exc) from exc
    if is_dir:
        with _maildir(path) as messages:
            yield messages, _no_check
        return
    if not is_file:
        raise ImportFailed(f"{path} does not exist or is not a file or directory: give an "
                           "mbox file or a Maildir")
    try:
        reading = mbox.Reading(path)
    except mbox.Locked:
        raise ImportFailed(f"{path} is locked by another program writing it (a mail client or "
                           "a delivery); nothing of it was imported: import again when it is "
                           "done") from None
    except OSError as exc:
        raise _unreadable(path, exc) from exc
    with reading:
        try:
            is_mbox = _starts_with_from_line(reading.file)
        except OSError as exc:
            raise _unreadable(path, exc) from exc
        if not is_mbox:
            raise _no_messages(path)

        def unchanged() -> None:
            try:
                reading.unchanged()
            except mbox.Changed:
                raise _changed(path) from None

        messages = _mbox_messages(reading)
        try:
            yield messages, unchanged
        finally:
            messages.close()


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

    ``workers``: processes that parse in parallel, this one among them, once a source has more
    than one batch of new mail (a pool of ``workers - 1`` processes); None is the CPU count, at
    most 4. The default, 1, parses in this process alone: a worker pool may be spawned, and
    spawning re-imports the caller's ``__main__``, which only a program built for it (the
    console script) can promise. Storing is always this process's, in one transaction.

    ``owner``: the principal the account belongs to (``owners``), set in the same
    transaction; an account that is already another principal's is refused.

    ``on_read(n)``: called as each message is read, with how many were read so far (the
    console script's progress line).

    :raises ImportFailed: the account is no address a From header carries
        (``checked_account``), the source cannot be read, or the account is another
        principal's; nothing of it was stored.
    """
    account = checked_account(account)
    if owner is not None and not owner.strip():
        raise ImportFailed("--owner must name a principal (as its token or the issuer names it)")
    if workers is None:
        workers = min(os.cpu_count() or 1, _MAX_WORKERS)
    path = Path(path)
    with _source(path) as (messages, unchanged):
        conn = open_writable(data_dir)
        try:
            return _import(conn, account, path, messages, unchanged, max(1, workers),
                           None if owner is None else owner.strip(), on_read)
        finally:
            conn.close()


def _message_weight(raw: bytes) -> int:
    """What a message read and not parsed yet weighs: its bytes, and the most characters its
    row can hold."""
    return len(raw) + row_bound(raw)


@attrs.define
class _Pending:
    """A batch not stored yet: its keys, its rows (or their future), and its weight
    (``_PENDING_BYTES``)."""

    keys: list[str]
    work: Future[Parsed] | Parsed
    weight: int


class _Batches:
    """Batches of new messages, parsed here and in a pool of ``workers - 1`` processes
    (started only for a source with more than one batch), stored in source order by the
    importing process.

    A batch goes to the pool while fewer than ``_AHEAD`` per worker wait there; otherwise (while
    the workers start, and whenever each has its next batches) this process parses it itself
    rather than wait for one, so that it is one of the ``workers`` parsing and a machine's
    cores are neither idle nor one process short or over."""

    def __init__(self, conn: sqlite3.Connection, account: str, workers: int) -> None:
        self.conn, self.account, self.pool_size = conn, account, workers - 1
        self.added = 0
        self.skipped: Counter[str] = Counter()
        self._pool: Executor | None = None
        # Each batch not stored yet, in source order; ``_weight`` adds their weights up.
        self._pending: deque[_Pending] = deque()
        self._weight = 0
        # Keys handed on to be parsed and not stored (yet): a message twice in one source is one.
        # A skipped message's key stays, so that its repeat is a duplicate wherever it was
        # parsed and however long that took, not a second skip.
        self._handed_on: set[str] = set()

    def add(self, chunk: list[tuple[str, bytes | None, int]],
            earlier: Mapping[str, tuple[str, ...]], *, last: bool = False) -> None:
        """``chunk``: each message's key, bytes (None for one too large to keep) and
        ``_message_weight``. ``earlier``: a message's key -> the keys earlier versions gave it
        (``message_keys``). ``last``: the source has no more; the pool starts only for a
        source of more than one batch of new mail (D154)."""
        batch, size = self._new(chunk, earlier)
        if not batch:
            return
        if self._pool is None and self.pool_size and not last and (
                len(batch) >= _CHUNK // 2 or size >= _CHUNK_BYTES // 2):
            self._pool = _process_pool(self.pool_size)
        work = self._parse(batch, size)
        pending = _Pending([key for key, _ in batch], work,
                           size if isinstance(work, Future) else rows_weight(work))
        self._pending.append(pending)
        self._weight += pending.weight
        self._store(self.pool_size * _AHEAD * 2 if self._pool is not None else 0)

    def _new(self, chunk: list[tuple[str, bytes | None, int]],
             earlier: Mapping[str, tuple[str, ...]]) -> tuple[list[tuple[str, bytes]], int]:
        """The messages of ``chunk`` neither in the cache (under their key, or a key an
        earlier version gave them: ``earlier``) nor handed on earlier, marked as handed on,
        and their weight; one too large is counted skipped here and never handed on."""
        known = self._cached([key for key, _, _ in chunk])
        known_before = self._cached([k for keys in earlier.values() for k in keys])
        batch: list[tuple[str, bytes]] = []
        weight = 0
        for key, raw, message_weight in chunk:
            if key in known or key in self._handed_on or not known_before.isdisjoint(
                    earlier.get(key, ())):
                continue
            known.add(key)
            self._handed_on.add(key)  # and kept there: its repeat is a duplicate
            if raw is None:
                self.skipped[_TOO_LARGE] += 1
            else:
                batch.append((key, raw))
                weight += message_weight
        return batch, weight

    def _cached(self, keys: list[str]) -> set[str]:
        """Those of ``keys`` (at most two per message of a chunk) the cache holds."""
        if not keys:
            return set()
        marks = ", ".join("?" * len(keys))
        return {row[0] for row in self.conn.execute(
            f"SELECT message_key FROM messages WHERE message_key IN ({marks})", keys)}

    def _parse(self, batch: list[tuple[str, bytes]], size: int) -> Future[Parsed] | Parsed:
        """Handed to the pool while its workers have fewer than ``_AHEAD`` batches each
        waiting and ``size`` (its messages' ``_message_weight``) keeps what waits under
        ``_PENDING_BYTES``; parsed here otherwise."""
        self._settle()
        waiting = sum(isinstance(p.work, Future) and not p.work.done() for p in self._pending)
        if (self._pool is not None and waiting < self.pool_size * _AHEAD
                and (not self._pending or self._weight + size <= _PENDING_BYTES)):
            return self._pool.submit(parse_batch, self.account, batch)
        return parse_batch(self.account, batch)

    def finish(self) -> None:
        self._store(0)

    def _settle(self) -> None:
        """Each batch the pool has parsed weighs its rows from now on, no longer the most
        they could have held."""
        for pending in self._pending:
            work = pending.work
            if isinstance(work, Future) and work.done() and work.exception() is None:
                pending.work = work.result()
                weight = rows_weight(pending.work)
                self._weight += weight - pending.weight
                pending.weight = weight

    def _store(self, keep: int) -> None:
        """Store batches from the first, in source order: each one already parsed, and then
        more, waiting for each, until at most ``keep`` are left and they weigh no more than
        ``_PENDING_BYTES``."""
        self._settle()
        while self._pending and (len(self._pending) > keep or self._weight > _PENDING_BYTES
                                 or _parsed(self._pending[0].work)):
            pending = self._pending.popleft()
            self._weight -= pending.weight
            keys, work = pending.keys, pending.work
            results = work.result() if isinstance(work, Future) else work
            rows = [r for r in results if not isinstance(r, str)]
            self.skipped.update(r for r in results if isinstance(r, str))
            before = self.conn.total_changes
            self.conn.executemany(_INSERT, rows)
            self.added += self.conn.total_changes - before
            self._handed_on.difference_update(
                key for key, result in zip(keys, results, strict=True)
                if not isinstance(result, str))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)


def _process_pool(size: int) -> Executor:
    # Imported here: a source of one batch (and every re-import) never needs them.
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(size, mp_context=multiprocessing.get_context(_start_method()),
                               initializer=_worker_start, initargs=(os.getpid(),))


def _worker_start(importer: int) -> None:
    """First thing in each pool worker: end with the importing process ``importer``, and let
    go of the caller's terminal or pipe.

    A worker outlives a killed importer otherwise (SIGKILL, SIGTERM: no shutdown runs), blocked
    on its queues forever, holding the caller's stdout (a ``| tee`` never ends), the cache's
    files and the mbox. Linux kills it with the importer (PR_SET_PDEATHSIG); elsewhere that is
    not available, and the worker still ends if the importer was gone before it started.
    (The signal follows the thread that started the worker: the one running ``import_path``,
    which shuts the pool down before it returns.)"""
    _die_with_parent()
    if os.getppid() != importer:  # it died before the request above was in place
        os._exit(1)
    # Anything the worker would print is the importer's to say; and the caller's pipe must
    # see its end when the importer's does.
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)


def _die_with_parent() -> None:
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # no C library to ask (a static build): as elsewhere
        pass


def _start_method() -> str:
    """How the pool starts its workers: by fork when this process runs no thread but its own
    (Linux: /proc/self/task), so that a worker costs no interpreter start-up and shutdown
    (some 0.2 s of CPU each, a fifth of parsing 10,000 messages); by spawn otherwise (in a host
    or a test runner: a process forked from one with threads can deadlock)."""
    try:
        alone = len(os.listdir("/proc/self/task")) == 1
    except OSError:  # no procfs: not Linux
        alone = False
    return "fork" if alone and threading.active_count() == 1 else "spawn"


def _parsed(work: Future[Parsed] | Parsed) -> bool:
    return not isinstance(work, Future) or work.done()


def _import(conn: sqlite3.Connection, account: str, path: Path,
            messages: Iterator[bytes | _Unquoted | str], unchanged: Unchanged,
            workers: int, owner: str | None,
            on_read: Callable[[int], None] | None = None) -> ImportReport:
    seen = read = 0
    batches = _Batches(conn, account, workers)
    begin(conn)
    try:
        if owner is not None:
            try:
                claim(conn, account, owner)
            except OwnerConflict as exc:
                raise ImportFailed(str(exc)) from None
        chunk: list[tuple[str, bytes | None, int]] = []
        chunk_weight = 0
        earlier: dict[str, tuple[str, ...]] = {}
        for raw in messages:
            seen += 1
            if on_read is not None:
                on_read(seen)
            if isinstance(raw, str):  # a Maildir entry that is no regular file, not opened
                batches.skipped[raw] += 1
                continue
            read += 1
            # A cache filled by an earlier version may hold it under another key (before
            # unquoting, or with the client's mark fields counted): not a new message.
            plain, quoted = (raw.plain, (raw.quoted,)) if isinstance(
                raw, _Unquoted) else (raw, ())
            key, formers = message_keys(account, plain, *quoted)
            if len(plain) > MAX_MESSAGE_BYTES:  # read one byte past the bound: too large
                chunk.append((key, None, 0))
            else:
                if formers:
                    earlier[key] = formers
                weight = _message_weight(plain)
                chunk.append((key, plain, weight))
                chunk_weight += weight
            if len(chunk) >= _CHUNK or chunk_weight >= _CHUNK_BYTES:
                batches.add(chunk, earlier)
                chunk, chunk_weight, earlier = [], 0, {}
        if chunk:
            batches.add(chunk, earlier, last=True)
        batches.finish()
        if not read:  # the source changed since it was checked: nothing of it is a message
            raise _no_messages(path, seen)
        generation = (bump_generation(conn) if batches.added else
                      int(conn.execute("SELECT value FROM meta WHERE key = 'generation'")
                          .fetchone()[0]))
        unchanged()  # each read was checked; this covers the time since the last one
        conn.execute("COMMIT")
    except ImportFailed:
        rollback(conn)
        raise
    except sqlite3.Error as exc:
        # The cache, not the source, failed (a full disk, an I/O error): SQLite may have
        # rolled back already, hence ``rollback``, which does not raise over this.
        rollback(conn)
        name = getattr(exc, "sqlite_errorname", "") or type(exc).__name__
        raise ImportFailed(f"the mail cache could not be written ({name}): check the free "
                           f"space and the disk; nothing of {path} was imported") from exc
    except (OSError, ValueError, BrokenExecutor) as exc:
        rollback(conn)
        raise ImportFailed(f"{path} could not be read to its end ({type(exc).__name__}); "
                           "nothing of it was imported") from exc
    except BaseException:
        rollback(conn)
        raise
    finally:
        batches.close()
    skipped = batches.skipped
    return ImportReport(account=account, path=str(path), seen=seen, added=batches.added,
                        duplicates=seen - batches.added - sum(skipped.values()),
                        skipped=dict(sorted(skipped.items())), generation=generation)
