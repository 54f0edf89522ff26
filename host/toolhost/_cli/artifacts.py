"""The artifact commands: ``toolhost artifacts list``, ``get``, ``upload`` and ``purge``.

Everything goes through the ArtifactStore port of the host's pipeline (the store the data
directory holds), as the approval commands go through its invocation store. Names and media
types are shown as the store holds them, rendered so a crafted one cannot pass for something
else: a name is JSON-quoted (it may hold newlines), and every character that does not print is
shown as its JSON escape.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import stat
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from toolhost._cli.common import (
    CommandError,
    OutputFailed,
    Parser,
    add_command,
    load,
    load_stores,
    positive_int,
    print_json,
    signals_raised,
)
from toolhost._cli.exit_codes import ExitCode
from toolhost._cli.progress_line import ProgressLine
from toolhost._composition import escaped

if TYPE_CHECKING:
    from toolhost._composition import ArtifactRecord, ArtifactStore, Stores

__all__ = ["COMMANDS", "LIST_LIMIT", "OPERATOR", "add_parsers"]

#: Who an upload belongs to unless ``--principal`` says: the CLI's principal (Host.start_run).
OPERATOR = "operator"
#: How much of a file is read (upload) or written (get) at a time: the store streams it,
#: never holding it whole.
_CHUNK = 1024 * 1024
#: How many bytes of the target's name a temp file of ``get -o`` keeps (NAME_MAX is 255).
_TEMP_STEM = 200
#: ``toolhost._ports.artifacts.LIST_LIMIT``, stated again so that building the parser (every
#: command, ``--help`` too) does not import the port and its values; a test keeps them equal.
LIST_LIMIT = 100


def add_parsers(sub: argparse._SubParsersAction[Parser], run: str | None) -> None:
    add_command(sub, run, "artifacts", _arguments,
                help="list, fetch, upload and purge the stored artifacts")


def _arguments(artifacts: argparse.ArgumentParser) -> None:
    verbs = artifacts.add_subparsers(dest="artifacts_command", metavar="COMMAND", required=True)

    listing = verbs.add_parser("list", help="list artifacts, oldest first")
    listing.add_argument("--run", metavar="R", help="only run R's")
    listing.add_argument("--conversation", metavar="C", help="only conversation C's")
    listing.add_argument("--limit", type=positive_int, default=LIST_LIMIT, metavar="N",
                         help=f"list at most N of them (default {LIST_LIMIT})")
    listing.add_argument("--after", metavar="ID",
                         help="start after this artifact (the last id of the previous page)")
    listing.add_argument("--json", action="store_true", help="print the records as JSON")

    get = verbs.add_parser("get", help="write an artifact's exact bytes to a file, after "
                                       "checking them against its checksum")
    get.add_argument("id", help="the artifact id `list` printed")
    get.add_argument("-o", "--output", required=True, metavar="FILE",
                     help="where to write them (replaced atomically); - for stdout")

    upload = verbs.add_parser("upload", help="store a file as a conversation's upload, sent "
                                             "(claimed), and print its id")
    upload.add_argument("file", help="the file to upload")
    upload.add_argument("--conversation", required=True, metavar="C",
                        help="the conversation it is uploaded to")
    upload.add_argument("--principal", default=OPERATOR, metavar="P",
                        help=f"whose upload it is (default {OPERATOR!r}, the CLI's principal)")
    upload.add_argument("--name", metavar="N", help="its name (default: the file's name)")
    upload.add_argument("--media-type", metavar="T",
                        help="its media type (default: from the name's extension)")

    purge = verbs.add_parser("purge", help="remove expired artifacts, content no artifact "
                                           "references, and staged uploads untouched for an "
                                           "hour")
    purge.add_argument("--json", action="store_true", help="print what was removed as JSON")


def _store() -> tuple[Stores, ArtifactStore]:
    # The record's stores alone: reading or purging artifacts loads no plugin.
    stores = load_stores()
    return stores, stores.artifacts


def _quoted(value: str) -> str:
    """``value`` as a one-line JSON string, every character that does not print escaped."""
    import json

    return escaped(json.dumps(value, ensure_ascii=False))


# ---------------------------------------------------------------------- list


def record_json(record: ArtifactRecord) -> dict[str, Any]:
    """One ``list --json`` record."""
    return {
        "id": record.id,
        "run_id": record.run_id,
        "conversation_id": record.conversation_id,
        "principal_id": record.principal_id,
        "origin": record.origin.value,
        "name": record.name,
        "media_type": record.media_type,
        "byte_count": record.size,
        "checksum": record.checksum,
        "trust": record.trust.value,
        "created_at": _instant(record.created_at),
        "expires_at": None if record.expires_at is None else _instant(record.expires_at),
        "claimed": record.claimed,
    }


def _instant(value: Any) -> str:
    return str(value.isoformat(timespec="microseconds"))


def cmd_list(args: argparse.Namespace) -> int:
    """The page's records on stdout; a row that cannot be read as a record (changed behind
    the store's back) is one line on stderr and skipped, and the command still succeeds."""
    from toolhost._composition import ArtifactNotFound, ArtifactRecord

    for flag, value in (("--run", args.run), ("--conversation", args.conversation)):
        if value == "":
            raise CommandError(f"{flag} must not be empty")
    _, store = _store()
    try:
        listed = store.list_rows(run_id=args.run, conversation_id=args.conversation,
                                 limit=args.limit + 1, after=args.after)
    except ArtifactNotFound:
        raise CommandError(f"--after {args.after!r} is not an artifact (toolhost artifacts "
                           "list shows them)", ExitCode.FAILED) from None
    more, listed = len(listed) > args.limit, listed[:args.limit]
    records = [r for r in listed if isinstance(r, ArtifactRecord)]
    for damaged in listed:
        if not isinstance(damaged, ArtifactRecord):
            print(f"toolhost: artifact {escaped(damaged.id)} is damaged "
                  f"({escaped(damaged.field)}): skipped", file=sys.stderr)
    if args.json:
        print_json([record_json(r) for r in records])
    elif not listed:
        print(f"no artifacts{_scope(args)}")
    else:
        for r in records:
            print(f"{escaped(r.id)}  {_instant(r.created_at)}  {r.origin.value}  {r.size}  "
                  f"{escaped(r.media_type)}  {_quoted(r.name)}")
    if more:
        print(f"toolhost: the first {args.limit} are listed; more follow (toolhost artifacts "
              f"list{_filters(args)} --after {escaped(listed[-1].id)})", file=sys.stderr)
    return ExitCode.OK


def _scope(args: argparse.Namespace) -> str:
    parts = []
    if args.run is not None:
        parts.append(f"in run {_quoted(args.run)}")
    if args.conversation is not None:
        parts.append(f"in conversation {_quoted(args.conversation)}")
    if args.after is not None:
        parts.append(f"after {_quoted(args.after)}")
    return "".join(f" {p}" for p in parts)


def _filters(args: argparse.Namespace) -> str:
    import shlex

    text = ""
    if args.run is not None:
        text += f" --run {escaped(shlex.quote(args.run))}"
    if args.conversation is not None:
        text += f" --conversation {escaped(shlex.quote(args.conversation))}"
    return f"{text} --limit {args.limit}"


# ---------------------------------------------------------------------- get


def cmd_get(args: argparse.Namespace) -> int:
    # The bytes read, as one line on stderr when it is a terminal (a script sees nothing).
    # SIGTERM and SIGHUP raise, as Ctrl-C does, so a partial temp file is removed.
    with signals_raised(), ProgressLine(f"artifact {escaped(args.id)}", unit="bytes") as line:
        return _get(args, line)


def _get(args: argparse.Namespace, line: ProgressLine) -> int:
    if args.output == "-":  # a closed fd 1 never gets here: main() refuses it first
        _, store = _store()
        shown = _Shown(line, store, args.id)
        try:
            _send(store, args.id, _verify(store, args.id, shown), sys.stdout.buffer,
                  "standard output", shown, raw=True)
        except OSError as exc:  # main answers it as every command's (a closed pipe: 141)
            raise OutputFailed(exc.errno, exc.strerror) from None
        return ExitCode.OK
    target = Path(args.output)
    # What the name opens decides, links followed as open() and a shell redirect follow them
    # (`-o /dev/stdout` too, whose /proc/self/fd/1 names no path when it is a pipe): a
    # regular file (or nothing) is replaced atomically where the links lead, and anything
    # else (a FIFO, a pipe, `/dev/null`) is written through, never replaced by a file of ours.
    try:
        mode: int | None = os.stat(target).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:  # a name too long, a loop of links, a file where a directory is
        raise CommandError(f"cannot write {str(target)!r}: {exc.strerror}",
                           ExitCode.FAILED) from None
    if mode is not None and stat.S_ISDIR(mode):
        raise CommandError(f"-o {args.output!r} is a directory: name the file to write")
    stores, store = _store()
    if mode is None or stat.S_ISREG(mode):
        resolved = Path(os.path.realpath(target))
        if resolved.is_relative_to(Path(os.path.realpath(stores.data_dir))):
            raise CommandError(f"-o {args.output!r} is inside the data directory, where the "
                               "host keeps its stores, caches and plugins' files: name a file "
                               "elsewhere")
        _write_atomically(store, args.id, resolved, _Shown(line, store, args.id))
    else:
        _write_through(store, args.id, target, _Shown(line, store, args.id))
    return ExitCode.OK


class _Shown:
    """A get's progress: the bytes of each pass over the content (a check, then the write,
    for an output that cannot take bytes back) out of the artifact's recorded size. Without
    a line (or on one that is not a terminal's), nothing."""

    def __init__(self, line: ProgressLine | None = None, store: ArtifactStore | None = None,
                 artifact_id: str = "") -> None:
        self._line = line if line is not None and line.active else None
        self._done = 0
        self._what = "read"
        self._total: int | None = None
        if self._line is not None and store is not None:  # looked up only to be shown
            with contextlib.suppress(Exception):  # an unknown id is refused by the read
                self._total = store.get(artifact_id).size

    def start(self, what: str) -> None:
        if self._line is not None:
            self._done, self._what = 0, what

    def add(self, chunk: bytes) -> None:
        if self._line is not None:
            self._done += len(chunk)
            self._line.update(self._done, self._total, self._what)


#: What a get that shows nothing reports to.
_NOT_SHOWN = _Shown()


@contextlib.contextmanager
def _refused_read(artifact_id: str, *, whole: bool = False) -> Iterator[None]:
    """The store's refusals as the operator's one line. ``whole``: bytes already went out (a
    second pass, see ``_send``), so the line says what arrived is not all of it."""
    from toolhost._composition import (
        ArtifactCorrupted,
        ArtifactNotFound,
        ArtifactStoreUnavailable,
        DamagedArtifact,
    )

    not_written = f"artifact {artifact_id!r} was not written{' whole' if whole else ''}"
    try:
        yield
    except ArtifactNotFound:
        raise CommandError(f"no artifact {artifact_id!r} (toolhost artifacts list shows them)",
                           ExitCode.FAILED) from None
    except ArtifactCorrupted as exc:
        if isinstance(exc, DamagedArtifact):  # the row, not the content
            raise CommandError(f"{not_written}: its record is damaged "
                               f"({escaped(exc.field)})", ExitCode.FAILED) from None
        raise CommandError(f"{not_written}: its stored content no longer matches its "
                           f"checksum ({exc.reason})", ExitCode.FAILED) from None
    except ArtifactStoreUnavailable as exc:  # an object store that stopped answering
        raise CommandError(f"{not_written}: {exc}", ExitCode.FAILED) from None


def _verify(store: ArtifactStore, artifact_id: str, shown: _Shown = _NOT_SHOWN) -> (
        bytes | None):
    """The first pass for an output that cannot take bytes back (stdout, a FIFO, a device):
    the content read through and verified, writing nothing. Returns it when it fits one
    chunk (the store hands out the chunk that completes the content only once it matched the
    record), else None: ``_send`` then reads it again. Memory stays at two chunks."""
    shown.start("checked")
    with _refused_read(artifact_id), store.read_chunks(artifact_id, _CHUNK) as chunks:
        first = next(chunks, b"")
        shown.add(first)
        second = next(chunks, None)
        if second is None:
            return first
        shown.add(second)
        for chunk in chunks:
            shown.add(chunk)
    return None


def _send(store: ArtifactStore, artifact_id: str, verified: bytes | None, out: BinaryIO,
          shown: str, progress: _Shown = _NOT_SHOWN, *, raw: bool = False) -> None:
    """What ``_verify`` verified, into ``out``: its one chunk, or a second pass. Content is
    immutable and content-addressed, so the second pass can only differ if it was damaged in
    between; it is checked again and the command then fails (what was written is not it).
    ``raw``: a failure to write is raised as the OSError it is (standard output's, for
    ``main`` to answer), not as this command's line."""

    def put(data: bytes | None) -> None:
        try:
            if data is None:
                out.flush()
            else:
                out.write(data)
        except OSError as exc:
            if raw:
                raise
            raise CommandError(f"cannot write {shown}: {exc.strerror}",
                               ExitCode.FAILED) from None

    if verified is not None:
        put(verified)
    else:
        progress.start("written")
        with _refused_read(artifact_id, whole=True), \
                store.read_chunks(artifact_id, _CHUNK) as chunks:
            for chunk in chunks:
                put(chunk)
                progress.add(chunk)
    put(None)


def _write_through(store: ArtifactStore, artifact_id: str, target: Path,
                   progress: _Shown) -> None:
    """The content written into what is at ``target`` (a FIFO, a device), as ``cat > target``.
    Opened only once the content is verified: a refused get never opens it (nor waits, as
    opening a FIFO does, for its reader)."""
    verified = _verify(store, artifact_id, progress)
    shown = repr(str(target))
    try:
        fd = os.open(target, os.O_WRONLY | os.O_NOCTTY | os.O_CLOEXEC)
        with os.fdopen(fd, "wb") as out:
            _send(store, artifact_id, verified, out, shown, progress)
    except OSError as exc:
        raise CommandError(f"cannot write {shown}: {exc.strerror}", ExitCode.FAILED) from None


def _write_atomically(store: ArtifactStore, artifact_id: str, target: Path,
                      progress: _Shown) -> None:
    """The content at ``target``: streamed into a temp file beside it, fsynced, and renamed
    over it only once every chunk arrived, which is once the store matched the size and the
    checksum. On any failure the temp file goes and ``target`` is as it was. The file is
    private to the operator (mode 0600), as the store's own files are."""
    import tempfile  # deferred: it imports random, which nothing else on `toolhost check` needs

    # Opened first: an unknown id or missing content never makes a temp file.
    with _refused_read(artifact_id), store.read_chunks(artifact_id, _CHUNK) as chunks:
        # Named after the target, cut so that with mkstemp's 8 characters and ".part" it is
        # still a legal name when the target's own is near the 255-byte limit.
        stem = os.fsencode(target.name)[:_TEMP_STEM]
        try:
            fd, tmp = tempfile.mkstemp(dir=os.fsdecode(target.parent),
                                       prefix=os.fsdecode(b"." + stem + b"."), suffix=".part")
        except OSError as exc:
            raise CommandError(f"cannot write {str(target)!r}: {exc.strerror}",
                               ExitCode.FAILED) from None
        try:
            progress.start("written")
            with os.fdopen(fd, "wb") as f:
                for chunk in chunks:
                    f.write(chunk)
                    progress.add(chunk)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, target)
        except BaseException as exc:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            if isinstance(exc, OSError):
                raise CommandError(f"cannot write {str(target)!r}: {exc.strerror}",
                                   ExitCode.FAILED) from None
            raise


# ---------------------------------------------------------------------- upload


def cmd_upload(args: argparse.Namespace) -> int:
    from toolhost import ArtifactOrigin, ArtifactTooLarge, Principal, Trust, media_type_for
    from toolhost._composition import ARTIFACT_CEILING, valid_run_id

    for flag, value in (("--principal", args.principal), ("--name", args.name),
                        ("--media-type", args.media_type)):
        if value == "":
            raise CommandError(f"{flag} must not be empty")
    # The ids `toolhost call --conversation` accepts: an upload to any other could never be
    # referenced by a run.
    if not valid_run_id(args.conversation):
        raise CommandError("--conversation must be 1 to 128 letters, digits, '.', '_' or '-', "
                           "starting with a letter or digit")
    name = args.name if args.name is not None else os.path.basename(args.file)
    # The host's one fixed table, as artifact.export uses: the same file, the same type.
    media_type = (args.media_type if args.media_type is not None
                  else media_type_for(name).name)
    try:
        source = open(args.file, "rb")  # noqa: SIM115 - closed by the with below
    except OSError as exc:
        raise CommandError(f"cannot read {args.file!r}: {exc.strerror}") from None
    # SIGTERM and SIGHUP raise, as Ctrl-C does, so the staged bytes are removed and the
    # upload's run ends (D461), never left for purge's hour and a run that never ends.
    with signals_raised(), source:
        host = load(stores=True, tools=False)  # the host's runs, not the stores alone
        # The upload is a run of its own: the operator (or --principal) sending a file into
        # the conversation. The store's retention applies, as to anything a run stores. Held
        # by this command, as `toolhost call`'s own run is (D470): one a SIGKILL leaves is
        # ended by the next recovery.
        run_id = host.new_id()
        host.run_workspaces.own(run_id)
        run = host.start_run(principal=Principal(args.principal, frozenset()),
                             conversation_id=args.conversation, run_id=run_id)
        writer = host.artifact_writer(run)
        try:
            # Claimed (the writer's default): the operator's upload is the user sending it.
            with writer.stream(origin=ArtifactOrigin.UPLOAD, name=name, media_type=media_type,
                               trust=Trust.USER, max_bytes=ARTIFACT_CEILING) as stream, \
                    ProgressLine(f"upload {escaped(name)}", unit="bytes") as line:
                size = _regular_size(source) if line.active else None
                sent = 0
                while chunk := source.read(_CHUNK):
                    stream.write(chunk)
                    sent += len(chunk)
                    line.update(sent, size if size is not None and sent <= size else None,
                                "stored")
                ref = stream.commit()
        except ArtifactTooLarge as exc:
            raise CommandError(f"{args.file!r} is larger than the store's ceiling of "
                               f"{exc.ceiling} bytes; nothing was stored",
                               ExitCode.FAILED) from None
        except ValueError as exc:  # a name or media type the store refuses
            raise CommandError(f"{exc}; nothing was stored") from None
        except OSError as exc:
            raise CommandError(f"cannot read {args.file!r}: {exc.strerror}; nothing was stored",
                               ExitCode.FAILED) from None
        finally:
            host.end_run(run)
    print(ref.id)
    return ExitCode.OK


def _regular_size(source: BinaryIO) -> int | None:
    """The size of what an upload reads, when it is a regular file (a pipe has none)."""
    try:
        info = os.fstat(source.fileno())
    except OSError:
        return None
    return info.st_size if stat.S_ISREG(info.st_mode) else None


# ---------------------------------------------------------------------- purge


def cmd_purge(args: argparse.Namespace) -> int:
    stores, store = _store()
    report = store.purge(stores.clock.now())
    counts = {
        "artifacts": report.artifacts,
        "artifact_bytes": report.artifact_bytes,
        "content_files": report.content_files,
        "staged_uploads": report.staged_uploads,
        "freed_bytes": report.freed_bytes,
    }
    if args.json:
        print_json(counts)
    elif not any(counts.values()):
        # Not "nothing is left": a staged upload is removed only once untouched for an hour
        # (the store's STAGING_STALE_AFTER, D362), and a younger one may still be written.
        print("nothing to purge: no artifact has expired, no content is unreferenced and no "
              "staged upload has been untouched for an hour (a younger one may still be an "
              "upload under way)")
    else:
        print(f"purged {_count(report.artifacts, 'expired artifact')} "
              f"({_count(report.artifact_bytes, 'byte')}); removed "
              f"{_count(report.content_files, 'content file')} and "
              f"{_count(report.staged_uploads, 'stale staged upload')}, freeing "
              f"{_count(report.freed_bytes, 'byte')}")
    return ExitCode.OK


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def cmd_artifacts(args: argparse.Namespace) -> int:
    return _VERBS[args.artifacts_command](args)


_VERBS: dict[str, Callable[[argparse.Namespace], int]] = {
    "list": cmd_list,
    "get": cmd_get,
    "upload": cmd_upload,
    "purge": cmd_purge,
}

COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"artifacts": cmd_artifacts}
