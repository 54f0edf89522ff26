"""The Workspace port on the local filesystem: the one place containment lives.

Tools never resolve a path; they hand the caller's string to the handle. The rule rejects
rather than normalizes:

1. reject a non-string, a NUL, a control character, a backslash, or a path over 4096 bytes;
2. reject an absolute path;
3. reject ``..``, ``.`` and empty components — and any component that NFKC-normalizes to one
   of them (fullwidth full stops, the two-dot leader), so a lookalike cannot mean one thing here and another elsewhere;
4. walk component by component from the root directory's fd with ``O_NOFOLLOW``, refusing
   any symlink, holding each directory fd through to the operation;
5. open the last component relative to its parent fd and check its type with ``fstat``; a
   regular file with other hard links is not read (one of them may be outside the root).

Every advisory against the widely used filesystem tool server was a check-then-use race or a
check that saw a different string from the one the operation used; here the fds from the walk
are the ones the operation uses, and the checked string is the one split into components. A
rejected path raises ``WorkspaceEscape``, which tools do not catch: the pipeline maps it to
ToolValidationError (step 9), one behaviour and one message for every workspace tool.

The operating system's own failures are never a bare ``OSError`` (the tool would fail as
``tool.internal.unexpected``): a path the process may not read or write is ``WorkspaceEscape``
like any other path the workspace cannot use; running out of space or file handles, a
read-only or failing filesystem, is ``WorkspaceUnavailable``, one static line each. A write
that fails leaves nothing behind: not its temp file, not the parent directories it created.
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import os
import stat
import threading
import unicodedata
from collections.abc import Callable, Generator, Iterator
from functools import partial
from pathlib import Path
from typing import ClassVar, TypeVar

import attrs

from toolhost._adapters.system_clock import new_id
from toolhost._adapters.workspace_stamps import Stamp, StampBook
from toolhost._model.workspace import (
    MAX_PATH_BYTES,
    READ_CHUNK,
    ListedEntry,
    Listing,
    Provenance,
    WorkspaceEscape,
    WorkspaceIsDirectory,
    WorkspaceNotDirectory,
    WorkspaceNotFound,
    WorkspaceUnavailable,
    WorkspaceUsage,
    WriteResult,
)

__all__ = [
    "WorkspaceHandle",
    "open_up",
    "remove_tree",
]

_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _O_CLOEXEC
#: Bytes of the target's name kept in its temp file's name: with ``.``, ``.``, the 32-digit id
#: and ``.tmp`` that is at most 238 bytes, under every filesystem's NAME_MAX (255 bytes).
_TEMP_NAME_BYTES = 200
#: The temp files this process's writes have in flight, each as its directory's
#: ``(st_dev, st_ino)`` and its name: all a listing hides. Anyone can make a file named like a
#: temp file, or lock one; nothing in the workspace can add to this set. (A set's add, discard
#: and ``in`` are atomic: no lock.)
_IN_FLIGHT: set[tuple[int, int, str]] = set()
_T = TypeVar("_T")



# ----------------------------------------------------------------- steps 1-3: the string


def _components(path: object, *, allow_root: bool = False) -> list[str]:
    if not isinstance(path, str):
        raise WorkspaceEscape("path is not a string")
    if path == "" and allow_root:
        return []
    if "\x00" in path:
        raise WorkspaceEscape("path contains NUL")
    try:
        encoded = path.encode("utf-8")
    except UnicodeEncodeError:
        raise WorkspaceEscape("path is not valid Unicode") from None
    if len(encoded) > MAX_PATH_BYTES:
        raise WorkspaceEscape("path is longer than 4096 bytes")
    if any(unicodedata.category(c) == "Cc" for c in path) or "\\" in path:
        raise WorkspaceEscape("path contains a control character or a backslash")
    if path.startswith("/"):
        raise WorkspaceEscape("absolute path")
    parts = path.split("/")
    for part in parts:
        folded = unicodedata.normalize("NFKC", part)
        if part in ("", ".", "..") or folded in (".", "..") or "/" in folded or "\\" in folded:
            raise WorkspaceEscape("path has an empty, '.' or '..' component (or a lookalike)")
    return parts


# ----------------------------------------------------------------- steps 4-5: the walk


def _classify(name: str, parent_fd: int) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    except OSError as exc:  # ENAMETOOLONG and the like: not a path this workspace can hold
        raise WorkspaceEscape(_os_reason(exc)) from None


def _errno_name(exc: OSError) -> str:
    return str(errno.errorcode.get(exc.errno or 0, exc.errno))


def _os_reason(exc: OSError) -> str:
    if exc.errno == errno.ENAMETOOLONG:
        return "a path component is longer than the filesystem allows"
    return f"the path cannot be used ({_errno_name(exc)})"


_NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})
_NO_HANDLES = frozenset({errno.EMFILE, errno.ENFILE})


def _failure(exc: OSError, *, writing: bool) -> Exception:
    """What an ``OSError`` from the filesystem is to a tool: the path's fault (WorkspaceEscape,
    WorkspaceNotFound) or the workspace's (WorkspaceUnavailable). Static reasons only: the
    OS's text can carry a path."""
    code = exc.errno
    if code in (errno.EACCES, errno.EPERM):
        return WorkspaceEscape("a directory on the path is not writable" if writing
                               else "the path is not readable")
    if code == errno.ENAMETOOLONG:
        return WorkspaceEscape(_os_reason(exc))
    if code == errno.ENOENT:  # a directory on the path removed by someone else meanwhile
        return WorkspaceNotFound("a directory on the path was removed")
    if code in _NO_SPACE:
        return WorkspaceUnavailable("no space is left for the workspace")
    if code in _NO_HANDLES:
        return WorkspaceUnavailable("too many files are open")
    if code == errno.EROFS:
        return WorkspaceUnavailable("the workspace is on a read-only filesystem")
    return WorkspaceUnavailable(f"the workspace could not be used ({_errno_name(exc)})")


def _temp_name(name: str) -> str:
    """``.<name>.<id>.tmp``, the name cut to ``_TEMP_NAME_BYTES`` bytes of UTF-8 on a character
    boundary (a cut inside a character drops that character whole), so the temp name of any
    name the filesystem allows is one it allows too."""
    kept = name.encode("utf-8")[:_TEMP_NAME_BYTES].decode("utf-8", errors="ignore")
    return f".{kept}.{new_id()}.tmp"


def _open_dir(name: str, parent_fd: int, *, create: bool = False, last: bool = False,
              made: list[tuple[int, str]] | None = None) -> int:
    """Open one directory component under ``parent_fd``, never through a symlink.

    A file where a directory should be is WorkspaceNotDirectory for the last component (a
    listing of a file) and WorkspaceNotFound on the way to it (``notes.md/x`` does not exist).
    With ``create``, a missing directory is made, and ``(parent_fd, name)`` appended to
    ``made`` so a write that fails later can remove it again. ``mkdir``'s own failure (no
    space, no permission) is raised as the ``OSError`` it is, for the caller to map.
    """
    try:
        return os.open(name, _O_DIR, dir_fd=parent_fd)
    except OSError as exc:
        if exc.errno == errno.ENOENT and create:
            try:
                os.mkdir(name, 0o755, dir_fd=parent_fd)
            except FileExistsError:
                pass  # made by someone else meanwhile: theirs, not ours to remove
            else:
                if made is not None:
                    made.append((parent_fd, name))
            return _open_dir(name, parent_fd, last=last)
        if exc.errno == errno.ENOENT:
            raise WorkspaceNotFound(name) from None
        info = _classify(name, parent_fd)
        if info is not None and stat.S_ISLNK(info.st_mode):
            raise WorkspaceEscape("path goes through a symlink") from None
        if info is not None and exc.errno == errno.ENOTDIR:
            if not stat.S_ISREG(info.st_mode):
                raise WorkspaceEscape(
                    "path is not a regular file (FIFO, socket or device)") from None
            if last:
                raise WorkspaceNotDirectory(name) from None
            raise WorkspaceNotFound(name) from None
        if exc.errno == errno.EMFILE:
            # The walk holds one fd a level: a path a few thousand levels deep runs out (D43).
            raise WorkspaceEscape("the path is nested deeper than this process can open") from None
        if exc.errno == errno.EACCES:
            raise WorkspaceEscape("a directory on the path is not readable") from None
        if exc.errno == errno.ENFILE:
            raise _failure(exc, writing=False) from None
        raise WorkspaceEscape(_os_reason(exc)) from None


@contextlib.contextmanager
def _in_flight(parent_fd: int, temp: str) -> Generator[None, None, None]:
    """While entered, the temp file ``temp`` in the directory ``parent_fd`` is a write of this
    process in flight, which listings leave out (``_listable``). Entered before the file is
    created, so a listing that meets the file knows it already.

    Another process's writes are not known here: their temp files are listed, like a killed
    write's leftover or a file a command named so. A name or a lock, which anyone can make,
    never hides a file."""
    info = os.fstat(parent_fd)
    held = (info.st_dev, info.st_ino, temp)
    _IN_FLIGHT.add(held)
    try:
        yield
    finally:
        _IN_FLIGHT.discard(held)


def _listable(entries: Iterator[os.DirEntry[str]],
              directory: tuple[int, int]) -> Iterator[os.DirEntry[str]]:
    """Files and directories a listing can show: never a symlink, a FIFO, a socket or a
    device, nor a name that is not UTF-8 (it could not be shown in a JSON result, nor read),
    nor a temp file of this process's writes in flight in ``directory`` (its ``(st_dev,
    st_ino)``; ``_in_flight``), tested as each name is met."""
    for entry in entries:
        if _IN_FLIGHT and (*directory, entry.name) in _IN_FLIGHT:
            continue
        try:
            entry.name.encode("utf-8")
        except UnicodeEncodeError:
            continue
        if entry.is_symlink():
            continue
        if entry.is_dir(follow_symlinks=False) or entry.is_file(follow_symlinks=False):
            yield entry


def _name_key(item: tuple[bytes, os.DirEntry[str]]) -> bytes:
    return item[0]


def _smallest(entries: Iterator[os.DirEntry[str]], count: int) -> (
        tuple[list[os.DirEntry[str]], bool]):
    """The ``count`` bytewise-smallest of ``entries``, and whether there were more."""
    kept: list[tuple[bytes, os.DirEntry[str]]] = []
    more = False
    for entry in entries:
        key = os.fsencode(entry.name)
        if len(kept) >= count and key >= kept[-1][0]:
            more = True
            continue
        bisect.insort(kept, (key, entry), key=_name_key)
        if len(kept) > count:
            kept.pop()
            more = True
    return [entry for _, entry in kept], more


def _smallest_listable(dir_fd: int, count: int) -> tuple[list[os.DirEntry[str]], bool]:
    """The ``count`` bytewise-smallest listable entries of ``dir_fd``, and whether it holds
    more. This process's writes' temp files in flight are not listed (each would show a
    partial file under a name about to vanish); any other file is, whatever its name."""
    info = os.fstat(dir_fd)
    with os.scandir(dir_fd) as it:
        return _smallest(_listable(it, (info.st_dev, info.st_ino)), count)


def remove_tree(root: Path) -> None:
    """Remove a workspace however deep it is, with two fds and no recursion.

    ``shutil.rmtree`` recurses once per level (and a 4096-byte path allows about 2000), so
    instead every subdirectory is renamed up to the top level before it is emptied: the tree
    is flattened as it is removed. Symlinks are unlinked, never followed. A directory the
    host may not open or empty (a sandbox's command runs as the host's own uid on a host that
    is not root, and can ``chmod 0`` one) is given its owner's rwx, where the host's euid owns
    it, and the step tried again (``_retried``).

    :raises OSError: EBUSY for a filesystem mounted below ``root`` (a workspace's own, D265),
        before anything in it is removed: unmount it first; PermissionError for a directory
        the host may not empty and does not own.
    """
    try:
        top = _retried(partial(os.open, root, _O_DIR), None, (None, root))
    except OSError:
        return
    try:
        device = os.fstat(top).st_dev
        while True:
            names = _retried(partial(_entries, top), device, top)
            if not names:
                break
            for name, is_dir in names:
                if not is_dir:
                    _retried(partial(os.unlink, name, dir_fd=top), device, top)
                    continue
                sub = _retried(partial(os.open, name, _O_DIR, dir_fd=top), device,
                               top, (top, name))
                try:
                    if os.fstat(sub).st_dev != device:
                        raise OSError(errno.EBUSY, "a filesystem is mounted here",
                                      os.path.join(root, name))
                    inner = _retried(partial(_entries, sub), device, sub)
                    for child, child_is_dir in inner:
                        if child_is_dir:
                            # Moving a directory to another parent rewrites its ``..``: it
                            # needs write permission on the directory itself too.
                            _retried(partial(os.rename, child, f".rm-{new_id()}",
                                             src_dir_fd=sub, dst_dir_fd=top),
                                     device, sub, top, (sub, child))
                        else:
                            _retried(partial(os.unlink, child, dir_fd=sub), device, sub)
                finally:
                    os.close(sub)
                _retried(partial(os.rmdir, name, dir_fd=top), device, top)
    finally:
        os.close(top)
    with contextlib.suppress(OSError):
        os.rmdir(root)


def open_up(path: Path) -> bool:
    """Give the directory at ``path`` its owner's rwx back if the host's euid owns it and a
    sandbox's command took some away (``_owner_rwx``; never through a symlink at its end).
    True when its mode changed."""
    return _open_up(path, None)


def _entries(dir_fd: int) -> list[tuple[str, bool]]:
    """The names in the directory ``dir_fd``, each with whether it is a directory (never
    following a symlink)."""
    with os.scandir(dir_fd) as it:
        return [(e.name, e.is_dir(follow_symlinks=False)) for e in it]


#: A directory a step of ``remove_tree`` involves: the directory ``fd`` itself, or
#: ``(fd, name)`` the directory ``name`` under ``fd`` (None: ``name`` is a path).
_Place = int | tuple[int | None, str | Path]


def _retried(operation: Callable[[], _T], device: int | None, *places: _Place) -> _T:
    """``operation``; if it was refused (EACCES, EPERM), tried once more after each directory
    it involves, in order, was given its owner's rwx where the host may (``_owner_rwx``,
    on the filesystem ``device`` only, when given). Refused again, it raises."""
    try:
        return operation()
    except PermissionError:
        opened = [_owner_rwx(place, device) if isinstance(place, int) else
                  _open_up(place[1], place[0], device=device) for place in places]
        if not any(opened):
            raise
    return operation()


def _owner_rwx(fd: int, device: int | None = None) -> bool:
    """Give the directory ``fd`` (open for reading, or ``O_PATH``) its owner's read, write and
    search permission, if this process's effective uid owns it and it lacks one (and, with
    ``device``, it is on that filesystem); its other bits stay. True when its mode changed.

    On a host that is not root the sandbox runs as the host's own uid, so every directory a
    command makes is the host's, whatever mode the command left it in; the host gives back
    only what its owner needs, to walk and remove it, and never another user's."""
    try:
        info = os.fstat(fd)
        if (not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid()
                or (device is not None and info.st_dev != device)
                or info.st_mode & stat.S_IRWXU == stat.S_IRWXU):
            return False
        mode = stat.S_IMODE(info.st_mode) | stat.S_IRWXU
        try:
            os.fchmod(fd, mode)
        except OSError as exc:
            if exc.errno != errno.EBADF:
                raise
            # An O_PATH descriptor takes no fchmod; its /proc link names that very inode.
            os.chmod(f"/proc/self/fd/{fd}", mode)
    except OSError:
        return False
    return True


def _open_up(name: str | Path, dir_fd: int | None, *, device: int | None = None,
             expected: _DirId | None = None) -> bool:
    """``_owner_rwx`` of the directory ``name`` under ``dir_fd`` (None: a path), reached
    without reading it and never through a symlink; with ``expected``, only while it is
    still that directory (device, inode)."""
    try:
        fd = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | _O_CLOEXEC,
                     dir_fd=dir_fd)
    except OSError:
        return False
    try:
        if expected is not None and _dir_id(os.fstat(fd)) != expected:
            return False
        return _owner_rwx(fd, device)
    except OSError:
        return False
    finally:
        os.close(fd)


#: What one sandbox walk visits at most: entries (of any type) and directory levels. A command
#: can make far more than a run could ever read (a million files, a tree 25 000 levels deep);
#: a walk that reaches either cap stops, and is incomplete (see ``_SandboxWalk``).
_SANDBOX_WALK_ENTRIES = 250_000
_SANDBOX_WALK_DEPTH = 4096
#: How often one walk comes down again from the root after a directory it stood in moved
#: (each costs an open a level): past it the walk stops, incomplete. An honest command's
#: rename meets the walk inside the renamed directory once in a while, not 32 times a walk.
_WALK_RETURNS = 32
#: Provenance records one workspace keeps at most: past it a sandbox's file is not stamped
#: (it reads UNKNOWN, untrusted like SANDBOX_WRITTEN).
_STAMPS_LIMIT = 250_000
_SET_ID = stat.S_ISUID | stat.S_ISGID

#: (device, inode, size, mtime_ns, ctime_ns): what a stamp compares.
_FileKey = tuple[int, int, int, int, int]
#: (device, inode): which directory a walk listed, to check it is the one it opens later.
_DirId = tuple[int, int]
#: One level of a ``_BoundedWalk``: the name it was entered by (the root's: ""), its (device,
#: inode), its subdirectories not yet walked (name, device, inode), and the tool path of its
#: entries' prefix (None: no tool can name them).
_Level = tuple[str, _DirId, list[tuple[str, int, int]], str | None]


def _dir_id(info: os.stat_result) -> _DirId:
    return (info.st_dev, info.st_ino)


#: Opening a directory so that listing it leaves its access time alone: allowed to its owner
#: and to root (CAP_FOWNER). A listing's atime told a sandboxed command when the usage walk
#: passed each directory, the clock its trap needed (D414).
_O_NOATIME: int = getattr(os, "O_NOATIME", 0)


def _open_dir_quietly(name: str, dir_fd: int) -> int:
    """``os.open(name, _O_DIR)``, with O_NOATIME where the kernel allows it (EPERM: not the
    directory's owner; then as any open, whose own refusal is the caller's)."""
    if _O_NOATIME:
        try:
            return os.open(name, _O_DIR | _O_NOATIME, dir_fd=dir_fd)
        except PermissionError:
            pass
    return os.open(name, _O_DIR, dir_fd=dir_fd)


def _open_same_dir(name: str, dir_fd: int, expected: _DirId | None, *,
                   quiet: bool = False) -> tuple[int, _DirId] | None:
    """The fd and (device, inode) of directory ``name`` under ``dir_fd`` (``..`` to climb),
    never through a symlink, if it is still the directory ``expected`` the walk listed or came
    down from (None: whichever is there, entered for the first time); None, with nothing left
    open, if another one is there now (swapped since, or the tree moved: ``..`` of a
    directory moved elsewhere is not where the walk came from).

    ``quiet``: opened leaving its access time alone where allowed (``_open_dir_quietly``).

    :raises OSError: it cannot be opened (FileNotFoundError: removed since it was listed).
    """
    fd = _open_dir_quietly(name, dir_fd) if quiet else os.open(name, _O_DIR, dir_fd=dir_fd)
    try:
        found = _dir_id(os.fstat(fd))
    except BaseException:
        os.close(fd)
        raise
    if expected is None or found == expected:
        return fd, found
    os.close(fd)
    return None


def _file_key(info: os.stat_result) -> _FileKey:
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def _clear_set_id(name: str, dir_fd: int, info: os.stat_result) -> os.stat_result:
    """Clear the set-id bits of a file a sandbox left (its uid inside maps to the host's
    owner: a set-uid file there would be one on the host), through an fd opened without
    following a symlink and checked to be the file that was listed. The new status, or the
    old one when the file has gone or changed meanwhile."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _O_CLOEXEC,
                     dir_fd=dir_fd)
    except OSError:
        return info
    try:
        now = os.fstat(fd)
        if not stat.S_ISREG(now.st_mode) or (now.st_dev, now.st_ino) != (info.st_dev, info.st_ino):
            return info
        os.fchmod(fd, stat.S_IMODE(now.st_mode) & ~_SET_ID)
        return os.fstat(fd)
    except OSError:
        return info
    finally:
        os.close(fd)


def _tool_path(prefix: str | None, name: str) -> str | None:
    """``prefix + name`` when a tool could name it (UTF-8, at most MAX_PATH_BYTES), else None;
    a directory that no tool can name has no nameable descendants either."""
    if prefix is None:
        return None
    try:
        path = prefix + name
        if len(path.encode("utf-8")) <= MAX_PATH_BYTES:
            return path
    except UnicodeEncodeError:  # os.scandir's surrogate escapes of bytes that are not UTF-8
        pass
    return None


@attrs.define
class _BoundedWalk:
    """One depth-first walk of a workspace with caps, beside a process that may be changing
    it: the one copy of the whole-tree walk (subclasses say what an entry counts for). Each
    step down or up is ``_open_same_dir``, as in a listing's walk (``_ListingWalk``).

    ``complete`` is False when the walk may have missed something: a directory that could
    not be opened or listed, or one swapped since it was listed (the walk goes on with the
    rest: a command cannot hide a tree behind one unreadable directory), one it stood in that
    moved, or ``stopped``: a cap passed, or more than ``_WALK_RETURNS`` such moves. Where a
    directory moved (or was removed) with the walk in it, the way up by ``..`` is not the way
    it came down: it comes down again from the root by the names and (device, inode) it came
    down by, as a listing does (``_ListingWalk.go_to``), and goes on with what is left; a
    level it cannot reach so (removed, moved or swapped meanwhile) is missed with what it
    still held. So moving a directory while the walk is in it hides nothing else from it
    (D135); the walk is incomplete all the same (it may have counted what left, or recorded
    a name no longer there), and a sandbox's quota kills a command whose every measurement
    is. ``entries`` counts every entry met, ``depth`` the directory levels below the root
    entered (``a/b`` entered: 2). A directory the walk may not open, list or search (EACCES,
    EPERM) is the subclass's to judge (``refused``).
    """

    max_entries: int
    max_depth: int
    complete: bool = True
    stopped: bool = False
    entries: int = 0
    depth: int = 0
    #: How often the walk came down again from the root (``_WALK_RETURNS`` at most).
    returns: int = 0
    #: Whether directories are opened leaving their access times alone (``_UsageWalk``).
    quiet: ClassVar[bool] = False

    def stop(self) -> None:
        self.complete = False
        self.stopped = True

    def visit(self, name: str, dir_fd: int, info: os.stat_result, prefix: str | None) -> None:
        """Count one entry of the directory ``dir_fd`` (``prefix``: its tool path, or None)."""

    def refused(self, dir_fd: int, name: str | None, expected: _DirId | None) -> bool:
        """The walk may not open the directory ``name`` under ``dir_fd`` (``expected``: the
        one listed, or come down from for ``..``), or, with None, search ``dir_fd`` itself
        (EACCES, EPERM). True when it was opened up, to be tried once more. Here it is
        missed: the walk is incomplete and goes on with the rest."""
        self.complete = False
        return False

    def _enter(self, name: str, dir_fd: int,
               expected: _DirId | None) -> tuple[int, _DirId] | None:
        """``_open_same_dir``, tried once more if ``refused`` opened the directory up."""
        try:
            return _open_same_dir(name, dir_fd, expected, quiet=self.quiet)
        except PermissionError:
            if not self.refused(dir_fd, name, expected):
                raise
        return _open_same_dir(name, dir_fd, expected, quiet=self.quiet)

    def scan(self, dir_fd: int, prefix: str | None) -> list[tuple[str, int, int]]:
        """Visit one directory's entries as they stream past; return only its subdirectories
        (name, device, inode), the one thing kept for later."""
        subdirs: list[tuple[str, int, int]] = []
        try:
            with os.scandir(dir_fd) as it:
                for entry in it:
                    self.entries += 1
                    if self.entries > self.max_entries:
                        self.stop()
                        break
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        continue  # removed since it was listed
                    except PermissionError:
                        # Listed but not searchable (``chmod u-x``): no entry can be stat'd.
                        if not self.refused(dir_fd, None, None):
                            raise
                        info = entry.stat(follow_symlinks=False)
                    self.visit(entry.name, dir_fd, info, prefix)
                    if self.stopped:
                        break
                    if stat.S_ISDIR(info.st_mode):
                        subdirs.append((entry.name, info.st_dev, info.st_ino))
        except OSError:
            self.complete = False  # cannot be listed (whole or in part)
        return subdirs

    def walk(self, root: int, *, named: bool = True) -> None:
        """Depth first from ``root`` with at most three fds open, however deep the tree: it
        descends by name and climbs back by ``..``, checking that ``..`` is the directory it
        came from (else the tree moved: it comes down again from ``root``). A level keeps
        only its name, its subdirectories' names and its tool path; a symlink is never
        followed. ``named=False``: no tool path is built (every ``prefix`` is None)."""
        current = _open_dir_quietly(".", root) if self.quiet else os.dup(root)
        try:
            top = "" if named else None
            stack: list[_Level] = [("", _dir_id(os.fstat(current)), self.scan(current, top), top)]
            while not self.stopped:
                _, _, pending, prefix = stack[-1]
                if not pending:
                    stack.pop()
                    if not stack:
                        return
                    try:
                        parent = self._enter("..", current, stack[-1][1])
                    except OSError:
                        parent = None  # no way up (refused, or gone): come down instead
                    if parent is None:
                        # Somewhere else now: back to the rest the way the walk came down.
                        # What it held was counted, maybe by a name it no longer has.
                        self.complete = False
                        self.returns += 1
                        if self.returns > _WALK_RETURNS:
                            self.stop()
                            continue
                        os.close(current)
                        current = -1
                        current = self._come_back(root, stack)
                        continue
                    os.close(current)
                    current, _ = parent
                    continue
                name, device, inode = pending.pop()
                self.depth = max(self.depth, len(stack))
                if len(stack) > self.max_depth:
                    self.stop()
                    return
                try:
                    child = self._enter(name, current, (device, inode))
                except FileNotFoundError:
                    continue  # removed since it was listed
                except OSError:
                    self.complete = False  # unreadable, or swapped for a symlink
                    continue
                if child is None:
                    self.complete = False  # swapped since it was listed
                    continue
                os.close(current)
                current, _ = child
                directory = _tool_path(prefix, name)
                below = None if directory is None else directory + "/"
                stack.append((name, (device, inode), self.scan(current, below), below))
        except OSError:
            self.stop()
        finally:
            if current != -1:
                os.close(current)

    def _come_back(self, root: int, stack: list[_Level]) -> int:
        """An fd of the deepest level of ``stack`` the walk can reach again from ``root`` by
        the names and (device, inode) it came down by; the levels below it are dropped with
        what they still held (the walk is incomplete)."""
        current = os.dup(root)
        try:
            for depth in range(1, len(stack)):
                name, expected, _, _ = stack[depth]
                try:
                    child = self._enter(name, current, expected)
                except OSError:
                    child = None
                if child is None:  # removed, moved or swapped since: what it held is missed
                    del stack[depth:]
                    self.complete = False
                    break
                os.close(current)
                current, _ = child
        except BaseException:
            os.close(current)
            raise
        return current


@attrs.define
class _SandboxWalk(_BoundedWalk):
    """The provenance walk after (or before) a sandbox ran in a workspace.

    ``files``: every regular file a tool could name, by its path, and its key. Set-id bits
    (with ``clear_set_id``) are cleared on every regular file the walk meets, whatever its
    name. A directory the walk may not open or search that the host's euid owns (on a host
    that is not root, any a command made: ``chmod 0 d``) gets its owner's rwx back and is
    walked: no command of the call runs now, and a workspace left so could be neither
    measured (``_UsageWalk``: every later call would be refused) nor removed.
    """

    clear_set_id: bool = False
    files: dict[str, _FileKey] = attrs.field(factory=dict)

    def refused(self, dir_fd: int, name: str | None, expected: _DirId | None) -> bool:
        if _owner_rwx(dir_fd) if name is None else _open_up(name, dir_fd, expected=expected):
            return True
        return super().refused(dir_fd, name, expected)

    def visit(self, name: str, dir_fd: int, info: os.stat_result, prefix: str | None) -> None:
        if stat.S_ISREG(info.st_mode):
            if self.clear_set_id and info.st_mode & _SET_ID:
                info = _clear_set_id(name, dir_fd, info)
            path = _tool_path(prefix, name)
            if path is not None:
                self.files[path] = _file_key(info)


def _sandbox_walk(root: int, *, clear_set_id: bool = False) -> _SandboxWalk:
    """Walk the workspace at ``root`` (see ``_SandboxWalk``)."""
    walk = _SandboxWalk(_SANDBOX_WALK_ENTRIES, _SANDBOX_WALK_DEPTH, clear_set_id=clear_set_id)
    walk.walk(root)
    return walk


@attrs.define
class _UsageWalk(_BoundedWalk):
    """The usage measurement: disk blocks of every entry, each inode once (a hard-linked
    file's blocks are counted at its first link met), stopping once past ``max_bytes``.

    A directory it may not open or search fails the measurement: what it holds cannot be
    counted, and it is no race that the next measurement could miss (a command's ``chmod
    300 d`` on a host that is not root, which then writes under ``d``). So one such
    directory cannot hide a tree from the quota: the workspace cannot be measured, and the
    sandbox is killed (D135). Left as it is while the command runs: the host changes no mode
    under a running command (``_SandboxWalk`` gives it back afterwards)."""

    #: A command must not learn from atimes when the walk passed (D414).
    quiet: ClassVar[bool] = True
    max_bytes: int = 0
    disk_bytes: int = 0
    _linked: set[tuple[int, int]] = attrs.field(factory=set)

    def refused(self, dir_fd: int, name: str | None, expected: _DirId | None) -> bool:
        raise WorkspaceUnavailable(
            "a directory in the workspace may not be listed or searched, so what the "
            "workspace holds cannot be measured")

    def visit(self, name: str, dir_fd: int, info: os.stat_result, prefix: str | None) -> None:
        if info.st_nlink > 1 and not stat.S_ISDIR(info.st_mode):
            if (info.st_dev, info.st_ino) in self._linked:
                return
            self._linked.add((info.st_dev, info.st_ino))
        self.disk_bytes += info.st_blocks * 512
        if self.disk_bytes > self.max_bytes:
            self.stop()


#: The size of a file entry a listing has kept but not yet measured: it is measured only when
#: the walk reaches it in key order, so an entry dropped for smaller ones costs no ``stat``.
_UNSIZED = -1
#: What a listing keeps with a directory to walk before the walk enters it: its (device,
#: inode) is taken then, and checked on every later way back into it.
_UNENTERED: _DirId = (-1, -1)


def _first(item: tuple[bytes, ListedEntry, _DirId | None]) -> bytes:
    return item[0]


def _path_bytes(kept: _Kept) -> int:
    return (kept.limit + 1) * MAX_PATH_BYTES


@attrs.define
class _Kept:
    """The ``limit`` + 1 smallest entries a listing has met, by key (the UTF-8 of the
    relative path): one more than it returns tells it was truncated. A directory to walk is
    kept with ``_UNENTERED``, then with its (device, inode) once entered, so every later way
    back into it is checked (None: not to be walked).

    Their keys total at most ``max_bytes``, (limit + 1) paths as long as a tool can name: a
    path has no length bound of its own (255-byte names 1,000 levels deep), and limit+1 of
    them held 246 MiB. The smallest keys that fit are kept, so the listing stays a prefix, cut
    (truncated) short of ``limit`` only where some path is longer than a tool can name."""

    limit: int
    max_bytes: int = attrs.field(default=attrs.Factory(_path_bytes, takes_self=True))
    items: list[tuple[bytes, ListedEntry, _DirId | None]] = attrs.field(factory=list)
    #: An entry was met and not kept. The listing is then truncated even if a kept file
    #: vanished later and fewer than ``limit`` remain: what was not kept is never met again.
    overflowed: bool = False
    #: The smallest key met and not kept: no key from it on can be in the listing any more.
    cut: bytes | None = None
    #: The bytes of the keys in ``items``.
    held: int = 0

    def admits(self, key: bytes) -> bool:
        """False when an entry of this key would not be kept now, nor any larger one; True
        when it would, or when it would go before a kept one (then its own length may still
        push it out)."""
        if self.cut is not None and key >= self.cut:
            return False
        if not self.items or key < self.items[-1][0]:
            return True  # whatever it pushes out, what sorts before it fits (``add``)
        return len(self.items) <= self.limit and self.held + len(key) <= self.max_bytes

    def add(self, key: bytes, entry: ListedEntry, directory: _DirId | None = None) -> None:
        if not self.admits(key):
            self.left_out(key)
            return
        bisect.insort(self.items, (key, entry, directory), key=_first)
        self.held += len(key)
        # The largest go first: what remains is the prefix of what was met.
        while len(self.items) > self.limit + 1 or self.held > self.max_bytes:
            dropped = self.items.pop()[0]
            self.held -= len(dropped)
            self.left_out(dropped)

    def left_out(self, key: bytes) -> None:
        """An entry of this key was met and is not kept."""
        self.overflowed = True
        if self.cut is None or key < self.cut:
            self.cut = key

    @property
    def truncated(self) -> bool:
        return len(self.items) > self.limit or self.overflowed

    def _at(self, key: bytes) -> int | None:
        at = bisect.bisect_left(self.items, key, key=_first)
        return at if at < len(self.items) and self.items[at][0] == key else None

    def directory(self, key: bytes) -> _DirId | None:
        """The (device, inode) kept with the directory of this key; None if none is kept."""
        at = self._at(key)
        return None if at is None else self.items[at][2]

    def entered(self, key: bytes, directory: _DirId) -> None:
        at = self._at(key)
        if at is not None:
            self.items[at] = (key, self.items[at][1], directory)

    def sized(self, key: bytes, size: int | None) -> None:
        """Give the kept file of this key its size; None: it is gone, drop it."""
        at = self._at(key)
        if at is None:
            return
        if size is None:
            del self.items[at]
            self.held -= len(key)
        else:
            _, entry, _ = self.items[at]
            self.items[at] = (key, ListedEntry(entry.path, entry.kind, size), None)

    def next_to_visit(self, after: bytes) -> tuple[bytes, ListedEntry, _DirId | None] | None:
        """The first kept entry with a key past ``after`` that the walk must visit: a file to
        measure, or a directory something under which could still be kept, or, while the
        listing is not truncated, could not (its first entry then makes it so: the length of
        the paths under it, unlike their count, does not show in ``items``). None: done."""
        for at in range(bisect.bisect_right(self.items, after, key=_first), len(self.items)):
            key, entry, directory = self.items[at]
            if entry.byte_count == _UNSIZED or (directory is not None and (
                    not self.truncated or self.admits(key + b"/"))):
                return self.items[at]
        return None


@attrs.define
class _ListingWalk:
    """One listing: the entries of the directory ``start`` (``prefix``: their path's), and with
    ``recursive`` everything below it, offered to ``kept``.

    It visits kept entries in key order, depth first in effect: a file to measure it, a
    directory to list it while something under it could still be kept. So ``kept`` is all it
    remembers: memory is bounded by the limit, not by the tree's size or depth. Like
    ``_BoundedWalk`` it holds one directory fd besides ``start`` however deep it goes, moving
    by ``..`` and by name through ``_open_same_dir``, never through a symlink, and checking
    that every directory it goes back into is the one it entered before; where the tree moved
    it comes down again from ``start``. A directory it cannot enter so (removed, unreadable,
    swapped, moved) is listed, its entries are not, and nor are files it cannot reach again.
    """

    start: int
    prefix: str
    kept: _Kept
    recursive: bool
    #: Where the walk stands (an fd of its own), the directories from ``start`` down to
    #: there (name and (device, inode)), and their names joined by ``/``.
    current: int = -1
    below: list[tuple[str, _DirId]] = attrs.field(factory=list)
    here: str = ""
    start_id: _DirId = (0, 0)

    def run(self) -> None:
        self.start_id = _dir_id(os.fstat(self.start))
        self.current = os.dup(self.start)
        try:
            self.scan("")
            visited = b""  # each entry visited sorts after the one before
            while (found := self.kept.next_to_visit(visited)) is not None:
                visited, entry, directory = found
                relative = entry.path[len(self.prefix):]
                if directory is not None:
                    if self.go_to(relative, directory):
                        self.scan(relative)
                    continue
                parent, _, name = relative.rpartition("/")
                size = None
                within = self.kept.directory((self.prefix + parent).encode("utf-8")) \
                    if parent else self.start_id
                # Removed since it was listed, or its directory moved meanwhile: not listed.
                if within is not None and self.go_to(parent, within):
                    with contextlib.suppress(FileNotFoundError):
                        size = os.stat(name, dir_fd=self.current, follow_symlinks=False).st_size
                self.kept.sized(visited, size)
        finally:
            os.close(self.current)

    def scan(self, relative: str) -> None:
        """Offer the entries of the directory where the walk stands (``relative`` to
        ``start``) to ``kept``, smallest first, until one is refused: every later one, and
        everything under it, sorts after that one."""
        # Only the limit+1 smallest listable names of a directory can be kept, so only those
        # are held, however large the directory.
        children, more = _smallest_listable(self.current, self.kept.limit + 1)
        if more:
            self.kept.overflowed = True
        prefix = f"{self.prefix}{relative}/" if relative else self.prefix
        # Files before the first subdirectory to walk are measured now, where the walk stands;
        # those after it wait for their turn: what is under it may push them out.
        later = False
        for entry in children:
            path = prefix + entry.name
            key = path.encode("utf-8")
            if not self.kept.admits(key):
                self.kept.left_out(key)
                return
            if entry.is_dir(follow_symlinks=False):
                self.kept.add(key, ListedEntry(path, "directory", 0),
                              _UNENTERED if self.recursive else None)
                later = later or self.recursive
            elif later:
                self.kept.add(key, ListedEntry(path, "file", _UNSIZED))
            else:
                try:
                    size = entry.stat(follow_symlinks=False).st_size
                except FileNotFoundError:
                    continue  # removed since scandir: not listed
                self.kept.add(key, ListedEntry(path, "file", size))

    def go_to(self, target: str, directory: _DirId) -> bool:
        """Stand in the directory ``target`` (its path below ``start``, "" for ``start``) if
        it is still ``directory``; False where the walk cannot get there (it then stands on
        the way)."""
        if target == self.here:
            return True
        names = target.split("/") if target else []
        if not self.here or target.startswith(self.here + "/"):
            common = len(self.below)  # below where it stands: a subdirectory, most often
        else:
            common = 0
            for (name, _), part in zip(self.below, names, strict=False):
                if name != part:
                    break
                common += 1
        if len(self.below) - common > common:
            self._restart()  # coming down again from the start is shorter than climbing
        while len(self.below) > common:
            above = self.below[-2][1] if len(self.below) > 1 else self.start_id
            try:
                parent = _open_same_dir("..", self.current, above)
            except OSError:
                parent = None
            if parent is None:  # moved: the way up is not the way it came down
                self._restart()
                break
            os.close(self.current)
            self.current, _ = parent
            name, _ = self.below.pop()
            self.here = self.here[:-len(name) - 1] if self.below else ""
        for depth in range(len(self.below), len(names)):
            wanted = directory if depth == len(names) - 1 else self.kept.directory(
                (self.prefix + "/".join(names[:depth + 1])).encode("utf-8"))
            if wanted is None or (wanted == _UNENTERED and depth < len(names) - 1):
                return False
            try:
                child = _open_same_dir(names[depth], self.current,
                                       None if wanted == _UNENTERED else wanted)
            except OSError:
                return False  # removed, unreadable, or a symlink now
            if child is None:
                return False  # another directory there now
            os.close(self.current)
            self.current, found = child
            if wanted == _UNENTERED:
                self.kept.entered((self.prefix + target).encode("utf-8"), found)
            self.below.append((names[depth], found))
            self.here = f"{self.here}/{names[depth]}" if self.here else names[depth]
        return True

    def _restart(self) -> None:
        fd = os.dup(self.start)
        os.close(self.current)
        self.current = fd
        self.below.clear()
        self.here = ""


class _RootFd:
    """A root directory fd and the operations using it (see ``WorkspaceHandle._root_fd``)."""

    __slots__ = ("detached", "fd", "users")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.users = 0
        self.detached = False


class _ReadState:
    """What one read's generator tells its ``_FileChunks``: the descriptor while it is open,
    and its state at the end of the file."""

    __slots__ = ("at_end", "fd")

    def __init__(self) -> None:
        self.fd: int | None = None
        self.at_end: os.stat_result | None = None


def _read_file(handle: WorkspaceHandle, path: str, chunk_size: int,
               state: _ReadState) -> Generator[bytes, None, None]:
    """The chunks of ``path``, the descriptor closed when they end, fail or are dropped."""
    parts = _components(path)
    with handle._parent(parts) as parent:
        fd = state.fd = handle._open_file(parts[-1], parent)
    try:
        while True:
            try:
                chunk = os.read(fd, chunk_size)
            except OSError as exc:
                raise _failure(exc, writing=False) from None
            if not chunk:
                # The descriptor's own state at the end: what provenance() judges.
                state.at_end = os.fstat(fd)
                return
            yield chunk
    finally:
        state.fd = None
        os.close(fd)


class _FileChunks:
    """``WorkspaceHandle.read_chunks``: a lazy read of one file, and whose bytes it read.

    An iterator (and a ``ProvenancedChunks``) rather than a bare generator, so the one object
    that holds the descriptor can also say, after the last chunk, whether that descriptor was
    the file the handle stamped: checking the path before and after the read cannot see a
    directory swapped in for the read and swapped back. The generator holds a ``_ReadState``,
    not this object: no cycle, so a read dropped unfinished closes its descriptor at once, not
    at the next garbage collection.
    """

    def __init__(self, handle: WorkspaceHandle, path: str, chunk_size: int) -> None:
        self._handle = handle
        self._path = path
        self._state = _ReadState()
        self._chunks = _read_file(handle, path, chunk_size, self._state)

    def __iter__(self) -> _FileChunks:
        return self

    def __next__(self) -> bytes:
        return next(self._chunks)

    def close(self) -> None:
        self._chunks.close()

    def provenance(self) -> Provenance:
        info = self._state.at_end
        if info is None and self._state.fd is not None:
            info = os.fstat(self._state.fd)
        return self._handle._provenance_of(self._path, info)


class WorkspaceHandle:
    """One run's workspace: a directory the handle holds open from first use to ``close``.

    ``owned`` handles were created for the run (under TOOLHOST_DATA_DIR) and are removed by
    ``discard``; a directory an operator named is never removed. The directory is created and
    opened on first use, so a run that never touches its workspace costs nothing.
    """

    def __init__(self, root: Path | str, *, owned: bool = False,
                 stamps: Path | None = None) -> None:
        self._root = Path(root)
        self._owned = owned
        self._current: _RootFd | None = None
        # ``stamps``: the log a workspace shared between processes keeps its provenance in.
        self._stamps = StampBook(stamps)
        self._lock = threading.Lock()
        self._fd_lock = threading.Lock()
        if not owned:
            # An operator's directory must exist now, not at first call (an OSError here is
            # the caller's to report: it named the directory).
            self._current = _RootFd(
                os.open(self._root, os.O_RDONLY | os.O_DIRECTORY | _O_CLOEXEC))

    @property
    def root(self) -> Path:
        return self._root

    def _open_root(self) -> int:
        if self._owned:
            try:
                self._root.mkdir(mode=0o700, parents=True, exist_ok=True)
            except OSError as exc:
                raise WorkspaceUnavailable(
                    f"the workspace directory cannot be created ({_errno_name(exc)})"
                ) from None
        try:
            return os.open(self._root, os.O_RDONLY | os.O_DIRECTORY | _O_CLOEXEC)
        except OSError as exc:
            raise WorkspaceUnavailable(
                f"the workspace directory cannot be opened ({_errno_name(exc)})") from None

    @contextlib.contextmanager
    def _root_fd(self) -> Iterator[int]:
        """The root directory's fd, held open for the duration of the block.

        A sync tool abandoned at its deadline may still be walking when its run ends and the
        workspace is closed. Closing the fd under it would let the kernel hand the same
        number to an unrelated open, and the walk would go on relative to that directory. So
        ``close`` only detaches the fd while operations use it, and the last of them closes
        it; an operation after ``close`` gets a fresh fd (an owned workspace, a fresh, empty
        directory).
        """
        with self._fd_lock:
            if self._current is None:
                self._current = _RootFd(self._open_root())
            root = self._current
            root.users += 1
        try:
            yield root.fd
        finally:
            with self._fd_lock:
                root.users -= 1
                if root.detached and root.users == 0:
                    os.close(root.fd)

    def close(self) -> None:
        with self._fd_lock:
            root, self._current = self._current, None
            if root is None:
                return
            root.detached = True
            if root.users == 0:
                os.close(root.fd)

    def discard(self) -> None:
        """Close, and remove the directory if it was created for the run: the workspace is
        a cache, discarded when the run finishes or pauses."""
        self.close()
        if self._owned:
            remove_tree(self._root)

    def __enter__(self) -> WorkspaceHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def _parent(self, parts: list[str], *, create: bool = False) -> Iterator[int]:
        """The fd of the directory holding the last component, walked from the root fd.

        With ``create``, missing directories are made; if anything then fails, before the
        body or in it, the directories made here are removed again, deepest first (``rmdir``
        removes only an empty directory and never follows a symlink)."""
        fds: list[int] = []
        made: list[tuple[int, str]] = []
        # The removal runs inside the root fd's block: a handle closed meanwhile lets the
        # root fd go when the block ends, and its number could name another directory by then.
        with self._root_fd() as fd:
            try:
                for name in parts[:-1]:
                    fd = _open_dir(name, fd, create=create, made=made)
                    fds.append(fd)
                yield fd
            except BaseException:
                for parent_fd, name in reversed(made):
                    with contextlib.suppress(OSError):
                        os.rmdir(name, dir_fd=parent_fd)
                raise
            finally:
                for opened in fds:
                    os.close(opened)

    # ------------------------------------------------------------- read

    def read_chunks(self, path: str, chunk_size: int = READ_CHUNK) -> _FileChunks:
        """The file's bytes in chunks, from one fd opened and type-checked once; after the last
        chunk, ``provenance()`` says whose bytes they were (``ProvenancedChunks``).

        Reading is lazy: the first chunk opens the file (so a bad path raises there), and a
        caller that stops iterating stops the reading (the fd is closed when the chunks are
        closed or dropped).

        :raises WorkspaceEscape, WorkspaceNotFound, WorkspaceIsDirectory, WorkspaceUnavailable:
        """
        return _FileChunks(self, path, chunk_size)

    def read(self, path: str) -> bytes:
        """The whole file (tools that stream should use ``read_chunks``)."""
        return b"".join(self.read_chunks(path))

    @staticmethod
    def _open_file(name: str, parent: int) -> int:
        # O_NONBLOCK: opening a FIFO must never block; it is refused by fstat below anyway.
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _O_CLOEXEC
        try:
            fd = os.open(name, flags, dir_fd=parent)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                raise WorkspaceNotFound(name) from None
            if exc.errno == errno.ELOOP:
                raise WorkspaceEscape("path is a symlink") from None
            if exc.errno == errno.EACCES:
                raise WorkspaceEscape("file is not readable") from None
            if exc.errno in (errno.ENXIO, errno.ENODEV):  # a socket, or a device with no driver
                raise WorkspaceEscape("path is not a regular file (FIFO, socket or device)") from None
            if exc.errno in _NO_HANDLES or exc.errno in (errno.ENOMEM, errno.EIO):
                raise _failure(exc, writing=False) from None
            raise WorkspaceEscape(_os_reason(exc)) from None
        info = os.fstat(fd)
        if stat.S_ISREG(info.st_mode) and info.st_nlink == 1:
            os.set_blocking(fd, True)
            return fd
        os.close(fd)
        if stat.S_ISREG(info.st_mode):
            # Another name for these bytes exists, and it may be outside the root: a hard link
            # is a path the walk cannot see. (A write replaces the name, never the bytes, so
            # writing to it is safe.)
            raise WorkspaceEscape("file has other hard links")
        if stat.S_ISDIR(info.st_mode):
            raise WorkspaceIsDirectory(name)
        raise WorkspaceEscape("path is not a regular file (FIFO, socket or device)")

    # ------------------------------------------------------------- write

    def write(
        self, path: str, data: bytes, *, provenance: Provenance = Provenance.TOOL_WRITTEN
    ) -> WriteResult:
        """Write atomically (temp file in the same directory, fsync, rename), creating missing
        parent directories inside the root, and record provenance in the same operation.

        Replacing a file keeps its permission bits; a file its owner may not write (no
        ``S_IWUSR``) is not replaced, as a plain write would not (the rename would). A write
        that fails removes its temp file and the directories it created.

        :raises WorkspaceEscape, WorkspaceIsDirectory, WorkspaceNotDirectory,
            WorkspaceNotFound, WorkspaceUnavailable:
        """
        parts = _components(path)
        with self._lock:
            try:
                return self._write(parts, path, data, provenance)
            except OSError as exc:
                raise _failure(exc, writing=True) from None

    def _write(self, parts: list[str], path: str, data: bytes,
               provenance: Provenance) -> WriteResult:
        name = parts[-1]
        with self._parent(parts, create=True) as parent:
            existing = _classify(name, parent)
            if existing is not None and stat.S_ISLNK(existing.st_mode):
                raise WorkspaceEscape("path is a symlink")
            if existing is not None and stat.S_ISDIR(existing.st_mode):
                raise WorkspaceIsDirectory(name)
            if existing is not None and not stat.S_ISREG(existing.st_mode):
                raise WorkspaceEscape("path is not a regular file (FIFO, socket or device)")
            if existing is not None and not existing.st_mode & stat.S_IWUSR:
                raise WorkspaceEscape("file is read-only")
            temp = _temp_name(name)
            with _in_flight(parent, temp):
                info, written = self._write_temp(parent, temp, name, data, existing)
            os.fsync(parent)
            # Bytes another process wrote into the temp file since are not this write's: the
            # file is left unstamped, read as anyone's (a sandbox command's text came back as
            # INTERNAL_TOOL, stamped with ours).
            if (info.st_size, info.st_mtime_ns) == (written.st_size, written.st_mtime_ns):
                self._stamps.apply({path: Stamp(info.st_dev, info.st_ino, info.st_size,
                                                info.st_mtime_ns, info.st_ctime_ns, provenance)})
        return WriteResult(path=path, byte_count=len(data), created=existing is None)

    @staticmethod
    def _write_temp(parent: int, temp: str, name: str, data: bytes,
                    existing: os.stat_result | None) -> tuple[os.stat_result, os.stat_result]:
        """``data`` into the new file ``temp``, fsynced and renamed to ``name`` (its temp file
        removed if anything fails); the file as its fd sees it after the rename, and after
        our own last byte."""
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _O_CLOEXEC,
                     0o644, dir_fd=parent)
        try:
            if existing is not None:
                # The replaced file's permission bits (not set-id or sticky: a write is
                # not a way to make a set-id file).
                os.fchmod(fd, stat.S_IMODE(existing.st_mode) & 0o777)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            # What our own writes left. The temp file has a name until the rename: a
            # command of the same run may open it meanwhile (D348).
            written = os.fstat(fd)
            os.fsync(fd)
            try:
                # rename replaces whatever now sits at `name` (even a symlink swapped in
                # since the check) without following it.
                os.rename(temp, name, src_dir_fd=parent, dst_dir_fd=parent)
            except OSError as exc:
                with contextlib.suppress(OSError):
                    os.unlink(temp, dir_fd=parent)
                if exc.errno in (errno.EISDIR, errno.ENOTEMPTY, errno.EEXIST):
                    raise WorkspaceIsDirectory(name) from None
                raise
            # Stamped from our own fd after the rename (which sets ctime): whatever is at
            # `name` later is ours only while inode, size, mtime and ctime all still match.
            info = os.fstat(fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=parent)
            raise
        finally:
            os.close(fd)
        return info, written

    # ------------------------------------------------------------- provenance

    def provenance(self, path: str) -> Provenance:
        """TOOL_WRITTEN (or SANDBOX_WRITTEN) only while the file is still the one written."""
        stamp = self._stamps.get(path)
        if stamp is None:
            return Provenance.UNKNOWN
        try:
            parts = _components(path)
            with self._parent(parts) as parent:
                info = _classify(parts[-1], parent)
        except (WorkspaceEscape, WorkspaceNotFound, WorkspaceNotDirectory, WorkspaceUnavailable):
            return Provenance.UNKNOWN
        return self._provenance_of(path, info)

    def _provenance_of(self, path: str, info: os.stat_result | None) -> Provenance:
        """The stamp's provenance if ``info`` (a stat of the path, or of an fd read from it)
        is still exactly the file the host stamped at ``path``."""
        stamp = self._stamps.get(path)
        if stamp is None or info is None or not stat.S_ISREG(info.st_mode):
            return Provenance.UNKNOWN
        if _file_key(info) != stamp.key:
            return Provenance.UNKNOWN
        return stamp.provenance

    # ------------------------------------------------------------- sandbox

    @contextlib.contextmanager
    def sandbox_root(self) -> Iterator[int]:
        """A duplicate fd of the root for a sandbox to bind (``bwrap --bind-fd``), valid for
        the block only; then every regular file created or changed during the block is
        recorded SANDBOX_WRITTEN and the set-id bits of every regular file are cleared.

        Changed means its (device, inode, size, mtime, ctime) differ from before the block:
        ctime moves on every write, rename, link or chmod and no process can set it back. A
        symlink, FIFO or device the sandbox made is never followed, opened or recorded (the
        workspace refuses them anyway). After a complete walk the records of paths that are
        no longer files are dropped. A walk that cannot finish (past ``_SANDBOX_WALK_ENTRIES``
        or ``_SANDBOX_WALK_DEPTH``, a directory it cannot open, a tree that moved) fails
        safe: every record of the workspace is dropped, so every file reads UNKNOWN, and the
        root loses its group and other permissions, so no other local user can reach a set-id
        file the walk did not see.

        :raises WorkspaceUnavailable: the root cannot be created or opened.
        """
        with self._root_fd() as root:
            before = _sandbox_walk(root).files
            bind = os.dup(root)
            try:
                yield bind
            finally:
                os.close(bind)
                with self._lock:
                    self._record_sandbox_changes(root, before)

    def usage(self, *, max_bytes: int, max_entries: int, max_depth: int) -> WorkspaceUsage:
        """What the workspace holds now: disk blocks in bytes (each inode once, the root's
        own excluded), entries, deepest level. The walk stops as soon as one figure passes
        its ``max_*``, and the result is then incomplete; so it is when a directory moved or
        could not be read meanwhile (what was counted stands), or no fd was left to start
        it. Safe from another thread while a ``sandbox_root`` block runs: it only reads,
        through its own fds.

        :raises WorkspaceUnavailable: the root cannot be created or opened, or a directory in
            it may not be listed or searched (``_UsageWalk``).
        """
        walk = _UsageWalk(max_entries, max_depth, max_bytes=max_bytes)
        with self._root_fd() as root:
            try:
                walk.walk(root, named=False)
            except OSError:  # os.dup of the root: no fd to spare now, a later call may have
                walk.stop()
        return WorkspaceUsage(disk_bytes=walk.disk_bytes, entries=walk.entries,
                              depth=walk.depth, complete=walk.complete)

    def _record_sandbox_changes(self, root: int, before: dict[str, _FileKey]) -> None:
        after = _sandbox_walk(root, clear_set_id=True)
        if not after.complete:
            self._stamps.clear()
            with contextlib.suppress(OSError):
                os.fchmod(root, stat.S_IMODE(os.fstat(root).st_mode) & 0o700)
            return
        # Records of paths that are not (regular) files any more: a stamp never outlives them.
        known = set(self._stamps.paths())
        changes: dict[str, Stamp | None] = {
            path: None for path in known if path not in after.files}
        kept = len(known) - len(changes)
        for path, key in after.files.items():
            if before.get(path) != key and (path in known or kept < _STAMPS_LIMIT):
                changes[path] = Stamp(*key, Provenance.SANDBOX_WRITTEN)
                kept += path not in known
        self._stamps.apply(changes)

    # ------------------------------------------------------------- list

    def listdir(self, path: str = "", *, recursive: bool = False, limit: int = 1000) -> Listing:
        """Entries under ``path`` in bytewise order of their relative path, at most ``limit``,
        truncated from the tail (a truncated listing is a prefix of the full one). Symlinks are
        neither followed nor listed, nor is anything that is not a file or directory, nor the
        temp file of a write in flight. Memory is bounded by ``limit``, and open directories by
        a constant, not by the size or depth of the tree: the paths kept total at most
        ``(limit + 1) * MAX_PATH_BYTES`` bytes, and a listing whose paths pass that is cut there
        (truncated), which only a path longer than a tool can name can make happen.

        :raises WorkspaceEscape, WorkspaceNotFound, WorkspaceNotDirectory, WorkspaceUnavailable:
        """
        parts = _components(path, allow_root=True)
        try:
            return self._listdir(parts, path, recursive, limit)
        except OSError as exc:
            raise _failure(exc, writing=False) from None

    def _listdir(self, parts: list[str], path: str, recursive: bool, limit: int) -> Listing:
        kept = _Kept(limit)
        if not parts:
            with self._root_fd() as start:
                _ListingWalk(start, "", kept, recursive).run()
        else:
            with self._parent(parts) as parent:
                start = _open_dir(parts[-1], parent, last=True)
            try:
                _ListingWalk(start, path + "/", kept, recursive).run()
            finally:
                os.close(start)
        return Listing(entries=tuple(entry for _, entry, _ in kept.items[:limit]),
                       truncated=kept.truncated)

