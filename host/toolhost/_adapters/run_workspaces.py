"""A run's workspace on one host: one generation at a time, whichever process uses it.

The seed holds a workspace for a worker's claim on the run: a cache, discarded when the run
pauses (a call left waiting for approval) or ends. An approval answered within the call is
not a pause. When a paused call is approved and run (``toolhost approve``, another process),
its workspace becomes the run's workspace for the calls that follow in that run, until the
run's next pause or end: the session that paused goes on in it. So the run's workspace is
named on disk, not held in one process's memory::

    workspaces/.lock               flock'd (exclusive) while any run's registration changes
    workspaces/.sized-v2-*.ext4    the quota's empty filesystem each generation's image is
                                   copied from, made once (``sized_fs``, D267)
    workspaces/<run>/run.json      the run is live on this host: {"directory": null | "/abs",
                                   "command": true when it ends with its command (``own``),
                                   "registration": a random id, new each time the run is
                                   registered while not live}
    workspaces/<run>/current       the name of the run's current generation (absent: none yet,
                                   or the run paused since)
    workspaces/<run>/<gen>/        that generation's root: what the tools and the sandbox see
    workspaces/<run>/<gen>.stamps  its provenance stamps (``workspace_stamps``), beside the
                                   root, never in it
    workspaces/<run>/<gen>.img     the image of the filesystem mounted on the root, where the
                                   host can mount (``sized_fs``: the quota held, D265)

A generation is made by the first use after the run started or paused; every process of the
host that uses the run's workspace then uses that one, but only under the registration it
started in. A call that started before the run's end (``toolhost runs end``) and first reaches
for the workspace after it is refused ("the run has ended"), and the run stays ended: the end
removed ``run.json``, and its registration with it, which is the tombstone. A command naming
the run afresh registers it under a new one, which is not the late call's. A process holds a
shared ``flock`` on the generation's directory while it has it open; a pause or end removes the ``current`` name
at once and the directory only when no other process holds it (else the last holder, finding
its generation no longer current, removes it when it lets go). Every lock is unlocked
before its descriptor is closed: a child another thread forked meanwhile (until it execs)
shares the descriptor, and is no holder. Whatever an end still left (its process killed
between the end's steps) is in a run directory no run is registered in, and is removed at
each recovery once nobody holds it (``sweep_detached``). A mounted generation is
unmounted before it is moved away or anything under it is removed; one that cannot be
unmounted is kept, as a held one is. An operator's directory
(``--workspace DIR``, ``TOOLHOST_MCP_WORKSPACE``) is the run's workspace whatever happens: a
pause closes it and never deletes it. Nothing claims it, so a call's first use of it asks
whether the run is still live under its registration: a late call writes nothing there.

A run of one command's own (``toolhost call`` without ``--run``) is live while that command
holds a shared ``flock`` on the run's directory (``own``): one whose command was killed is
not live, and is ended by the next approval of one of its calls (a recovery's re-run), by the
next command naming it (``start``, which registers it afresh) and at each recovery, as a
detached workspace is swept.

A call that paused in an operator's directory has it on its row (``recorded_directory``). Its
approval after the run ended here (its command, or its session, is gone) runs in that
directory again, as a run of the approval's own registered for the call (``for_approval``),
once the directory still is what the row names and passes an operator's workspace's checks;
else the approval is refused and the call does not run. An approval finding the run live
somewhere other than where its call paused (another directory, or generations, where the row
recorded a directory or none: the id registered afresh since is another run) is refused too:
the call runs where it paused or nowhere. So a live run stays where it was registered: a
command naming it with another directory is refused (``start``).

Any other call approved for a run that is not live here (it ended, or lives on another host)
gets a workspace of its own, discarded after the call: what it wrote reaches the run only through
its result and ``artifact.export``. It lives in ``workspaces/.detached/<run>-g<id>``, held by
a shared ``flock`` as a generation is; no run's end or pause ever comes for it, so one a
killed process left (its hold died with it) is swept when the next one is made and at each
recovery (``sweep_detached``).

A discarded generation is moved to ``workspaces/.trash`` under the lock and removed after it.
A removal that fails is logged and left there; the next block that empties the trash (a later
pause or end, or this process's first block) tries it again: a failure never reaches the
caller, whose run has ended all the same.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import enum
import errno
import fcntl
import json
import os
import re
import socket
import stat
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

import attrs

from toolhost._adapters.fs_workspace import WorkspaceHandle, open_up, remove_tree
from toolhost._adapters.sized_fs import IMAGE_SUFFIX, SizedFilesystems, is_mounted
from toolhost._adapters.system_clock import new_id
from toolhost._model.invocations import valid_operator_directory
from toolhost._model.printable import escaped
from toolhost._model.runs import valid_run_id
from toolhost._model.workspace import (
    READ_CHUNK,
    Listing,
    Provenance,
    RunEnded,
    WorkspaceUnavailable,
    WorkspaceUsage,
    WriteResult,
)

__all__ = ["ApprovalRefusal", "KeptDirectory", "ListedRun", "RunWorkspace", "RunWorkspaces",
           "UnnamedRow", "directory_refusal", "kept_directory"]

_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _O_CLOEXEC
_RUN_FILE = "run.json"
_CURRENT = "current"
#: A generation's name: what ``claim`` makes, and nothing a run id could be mistaken for.
_GENERATION = re.compile(r"g[0-9a-f]{32}")
#: A workspace ``make_detached`` made (``detached_path``'s own, the testing kit's, have no
#: ``g``): held while it is used, so the sweep may remove one nobody holds.
_DETACHED = re.compile(r".+-g[0-9a-f]{32}")
_SWEPT_AGAIN = "left in workspaces/.detached; the next approved call or recover tries again"
#: Why a workspace whose run has ended is refused (the operator's detail of the failure).
_RUN_ENDED = "the run has ended"
_ENDED_AGAIN = "its command is gone; the next recover ends it again"
#: How many characters of a recorded directory a refusal shows: a hand-edited value may be
#: any length, and the line must stay one a terminal shows.
_PATH_SHOWN = 200


def _held(path: Path) -> int:
    """A descriptor of the workspace directory ``path`` holding a shared lock: a sweep or a
    pause elsewhere removes only what nobody holds.

    :raises WorkspaceUnavailable: it cannot be opened or locked (no file handles left).
    """
    fd = -1
    try:
        fd = os.open(path, _O_DIR)
        fcntl.flock(fd, fcntl.LOCK_SH)
    except OSError as exc:
        if fd >= 0:
            os.close(fd)
        name = errno.errorcode.get(exc.errno or 0, "no errno")
        raise WorkspaceUnavailable(f"the workspace directory cannot be opened ({name})") from None
    return fd


def _let_lock_go(fd: int) -> None:
    """Close ``fd``, a descriptor that may hold a ``flock``, unlocking it first. A ``flock``
    belongs to the open file, which a child forked meanwhile (another thread's
    ``subprocess.Popen``, a sandbox's or a mount's, until it execs) shares through its copy
    of every descriptor: closed without the unlock, the lock stays held until the child
    execs, and a removal that finds it held then leaves the workspace to a last holder that
    never lets go. The unlock lets it go for every copy at once."""
    with contextlib.suppress(OSError):
        fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)


def _private_dir(path: Path) -> None:
    """Make ``path`` (and its parents) reachable by the host's user only."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        path.chmod(0o700)


def _write_text(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` atomically (a temp file renamed over it)."""
    temp = path.with_name(f".{path.name}.{new_id()}.tmp")
    temp.write_text(text, encoding="utf-8")
    os.replace(temp, path)


class UnnamedRow(enum.Enum):
    """``RunWorkspaces.for_approval``'s ``recorded`` when its caller names no row (the
    registry's own callers): the approval takes the run's live workspace wherever it is, as
    before rows recorded a directory. A row's None is what it says: no operator's directory."""

    ANY = "no row named"


class RunWorkspaces:
    """Every run's workspace on this host, under ``TOOLHOST_DATA_DIR/workspaces``. With
    ``filesystems``, each workspace made here is a filesystem of the quota's size where the
    host can mount (else, and without, a plain directory)."""

    def __init__(self, root: Path, filesystems: SizedFilesystems | None = None) -> None:
        self.root = root
        self.filesystems = filesystems
        self._lock = threading.Lock()
        #: Whether this process has emptied the trash yet (its first block does).
        self._swept = False
        #: The runs this process owns (``own``), by id: a descriptor holding their lock.
        self._owned: dict[str, int] = {}

    @contextlib.contextmanager
    def _locked(self) -> Iterator[list[Path]]:
        """Exclusive over every process of the host (and every thread of this one). What the
        block puts in the list it yields is removed once the lock is released: removing a
        large tree must not hold up every other run's registration. Then, and in this
        process's first block, whatever earlier removals left in the trash too."""
        trash: list[Path] = []
        with self._lock:
            _private_dir(self.root)
            fd = os.open(self.root / ".lock", os.O_RDWR | os.O_CREAT | _O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield trash
            finally:
                _let_lock_go(fd)
            sweep, self._swept = bool(trash) or not self._swept, True
        if sweep:
            self._empty_trash(trash)

    def _empty_trash(self, trash: list[Path]) -> None:
        """Remove ``trash`` and every other tree left in ``.trash`` (a removal that failed, or
        whose process died), each on its own: one that fails is logged and left for the next
        sweep, and the others are still removed."""
        bin_ = self.root / ".trash"
        left = [bin_ / name for name in _listdir(bin_) if bin_ / name not in trash]
        for path in [*trash, *left]:
            try:
                _remove_trashed(path)
            except OSError as exc:
                _log_not_removed(path, exc)

    def run_dir(self, run_id: str) -> Path:
        return self.root / run_id

    # ------------------------------------------------------------------ runs

    def start(self, run_id: str, directory: Path | None = None,
              deadline_at: dt.datetime | None = None) -> tuple[RunWorkspace, dt.datetime | None]:
        """The live run's workspace, and the run's deadline: registered now (a run already
        live keeps its generation and its registration), in ``directory`` when given (the
        operator's, never deleted; kept as an absolute path), else in the directory the run
        was registered with, else in generations made here. A run live already keeps the earlier of its
        deadline and ``deadline_at``: a later command cannot extend it, nor move it to
        another directory (``_moved``). A run whose command is gone (``own``) is not live:
        it is ended first, and registered afresh.

        :raises OSError: ``directory`` does not exist.
        :raises WorkspaceUnavailable: the run is live in another place than ``directory``.
        """
        if directory is not None:
            directory = directory.resolve(strict=True)
        with self._locked() as trash:
            run_dir = self.run_dir(run_id)
            registered = _read_run(run_dir)
            if registered is not None and self._command_gone(run_id, registered):
                # A command's own run whose command was killed (an approval's, a one-shot
                # call's) is not live, as `runs list` says: it is ended now, as an approval
                # and `own` end it, and the run is registered afresh (D565).
                self._end_gone(run_id, trash)
                registered = _read_run(run_dir)
            _private_dir(run_dir)
            registration = None
            if registered is not None:
                moved = None if run_id in self._owned else _moved(run_id, registered, directory)
                if moved is not None:
                    raise WorkspaceUnavailable(moved)
                deadline_at = _earlier(registered.deadline_at, deadline_at)
                if directory is None:
                    directory = registered.directory
                registration = registered.registration
            registration = registration or new_id()  # a run not live: registered afresh
            _write_text(run_dir / _RUN_FILE, json.dumps({
                "directory": None if directory is None else str(directory),
                "deadline": None if deadline_at is None else deadline_at.isoformat(),
                "registration": registration,
                # Kept only while this process holds it: a named run given a killed
                # one-shot run's id is the operator's, live until `runs end` (D221).
                **({"command": True} if run_id in self._owned else {})}))
        workspace = RunWorkspace(self, run_id, directory=directory, registration=registration)
        if directory is not None:
            workspace.current()  # the caller named it: it must exist now (OSError if not)
        return workspace, deadline_at

    def own(self, run_id: str) -> None:
        """Register ``run_id`` as this process's own run, live until its ``end`` or this
        process's death (``toolhost call`` without ``--run``, D221; ``toolhost demo``'s and
        ``artifacts upload``'s runs): a shared ``flock`` on the run's directory, held from
        now on, says the command is still there. Where no lock can be taken the run is
        registered as any other (live until ended). A run of that id a killed command left
        (the demo's id is always the same) is ended first: its leftovers are not this one's.

        :raises WorkspaceUnavailable: it cannot be registered (no file handles or space left).
        """
        with self._locked() as trash:
            registered = _read_run(self.run_dir(run_id))
            if registered is not None and self._command_gone(run_id, registered):
                self._end_gone(run_id, trash)
            self._register_own(run_id, None)

    def _register_own(self, run_id: str, directory: Path | None) -> str:
        """``own``'s registration, under the lock: the run's ``run.json`` (in ``directory``
        when given) and this process's hold on it; the registration's id.

        :raises WorkspaceUnavailable: it cannot be registered (no file handles or space left).
        """
        run_dir = self.run_dir(run_id)
        fd = -1
        try:
            _private_dir(run_dir)
            fd = os.open(run_dir, _O_DIR)
            try:
                fcntl.flock(fd, fcntl.LOCK_SH)
            except OSError:
                os.close(fd)
                fd = -1
            # Flagged only once held: under the registry's lock nobody can find it unheld.
            registration = new_id()
            _write_text(run_dir / _RUN_FILE, json.dumps(
                {"directory": None if directory is None else str(directory),
                 "registration": registration,
                 **({"command": True} if fd >= 0 else {})}))
        except OSError as exc:  # no file handles, no space: nothing registered
            if fd >= 0:
                _let_lock_go(fd)
            self._remove_run_dir_if_empty(run_id)
            name = errno.errorcode.get(exc.errno or 0, "no errno")
            raise WorkspaceUnavailable(f"the run cannot be registered ({name})") from None
        if fd >= 0:
            self._owned[run_id] = fd
        return registration

    def for_approval(self, run_id: str,
                     recorded: Mapping[str, Any] | Literal[UnnamedRow.ANY] | None = UnnamedRow.ANY,
                     check: Callable[[Path], str | None] | None = None) -> RunWorkspace:
        """The workspace an approved call of ``run_id`` runs in: the run's, if it is live on
        this host where the call paused (``_elsewhere``; without a row named, wherever it
        is); else the operator's directory the call paused in (``recorded``, the row's
        ``operator_directory``, when it names this host), registered as a run of this
        process's own until the call's workspace is closed, once it passes
        ``directory_refusal`` and then ``check`` (an operator's workspace's rules: the
        caller's, which knows the settings); else one of the call's own (which ``RunWorkspace.close`` removes). A run
        whose command is gone (``own``) is not live: it is ended now, so no generation is
        made in it that nothing would ever end.

        :raises WorkspaceUnavailable: the recorded directory is refused, or the run is live
            elsewhere (the line says why): the call must not run, neither there nor anywhere
            else.
        """
        named = recorded is not UnnamedRow.ANY
        kept = kept_directory(recorded if recorded is not UnnamedRow.ANY else None)
        directory = None if kept is None else kept.path
        registration = None
        with self._locked() as trash:
            registered = _read_run(self.run_dir(run_id))
            if registered is not None and self._command_gone(run_id, registered):
                self._end_gone(run_id, trash)
                registered = None
            if registered is not None:
                refused = _elsewhere(run_id, registered, kept) if named else None
                if refused is not None:
                    raise WorkspaceUnavailable(refused)
            elif kept is not None:
                refused = directory_refusal(kept)
                if refused is not None:
                    raise WorkspaceUnavailable(refused)
                registration = self._register_own(run_id, kept.path)
        if registered is not None:
            return RunWorkspace(self, run_id, directory=registered.directory,
                                registration=registered.registration)
        if directory is None:
            return RunWorkspace(self, run_id, detached=True)
        # Checked again once registered (as ``call --workspace`` is, D482): a run or a
        # server that took a directory nested with it meanwhile checked before it was here.
        refused = check(directory) if check is not None else None
        if refused is not None:
            self.end(run_id)
            raise WorkspaceUnavailable(refused)
        return RunWorkspace(self, run_id, directory=directory, ends_on_close=True,
                            registration=registration)

    def approval_refusal(self, run_id: str, recorded: Mapping[str, Any] | None,
                         check: Callable[[Path], str | None]) -> str | None:
        """The line ``for_approval`` would refuse the approval with now, checked without
        registering or ending anything (``toolhost approve`` and the inbox ask before they
        take the row, so a refused call stays awaiting approval); None when it would not
        refuse it."""
        refused = self.approval_refused(run_id, recorded, check)
        return None if refused is None else refused.line

    def approval_refused(self, run_id: str, recorded: Mapping[str, Any] | None,
                         check: Callable[[Path], str | None]) -> ApprovalRefusal | None:
        """``approval_refusal``, with the same refusal's words naming no directory where
        there are such words (the run live elsewhere: the inbox's to a login the paths are
        kept from)."""
        try:
            kept = kept_directory(recorded)
        except WorkspaceUnavailable as exc:
            return ApprovalRefusal(str(exc))
        registered = self._live(run_id)
        if registered is not None:
            return _elsewhere_refusal(run_id, registered, kept)
        if kept is None:
            return None
        refused = directory_refusal(kept) or check(kept.path)
        return None if refused is None else ApprovalRefusal(refused)

    def approval_directory(self, run_id: str, recorded: Mapping[str, Any] | None
                           ) -> Path | None:
        """The operator's directory an approval of a call of ``run_id`` (whose row recorded
        ``recorded``) runs it in, as ``for_approval`` chooses now: the live run's, else the
        recorded one on this host; None for a workspace the host makes. What the approver is
        told before the call runs (only once ``approval_refusal`` passed it: the live run's
        is then the recorded one).

        :raises WorkspaceUnavailable: ``recorded`` names this host but no directory.
        """
        registered = self._live(run_id)
        if registered is not None:
            return registered.directory
        kept = kept_directory(recorded)
        return None if kept is None else kept.path

    def _live(self, run_id: str) -> _Registered | None:
        """``run_id``'s registration if it is live here as ``for_approval`` tells (a run whose
        command is gone is not: the approval ends it), read without ending anything."""
        if _read_run(self.run_dir(run_id)) is None:
            return None  # not registered: asked without making the registry's directory
        with self._locked():  # ``_command_gone`` tries the run's lock: not beside ``own``'s
            registered = _read_run(self.run_dir(run_id))
            if registered is None or self._command_gone(run_id, registered):
                return None
            return registered

    def live(self) -> list[tuple[str, Path | None, bool]]:
        """(run id, operator directory or None, whether it has a generation now) of every
        run live on this host, by id."""
        return [(run.run_id, run.directory, run.has_workspace) for run in self.listed()]

    def listed(self) -> list[ListedRun]:
        """Every run registered on this host, by id, and whether its command is gone (a
        one-shot run the next recovery ends): only read, nothing is ended here."""
        with self._locked():
            return [ListedRun(run_id, registered.directory, self._current(run_id) is not None,
                              self._command_gone(run_id, registered))
                    for run_id, registered in self._registered()]

    def live_under(self, run_id: str, registration: str | None) -> bool:
        """Whether ``run_id`` is live here under ``registration`` (``claim``'s rule), read
        without the registry's lock (``run.json`` is replaced whole), as ``registered`` reads."""
        return _live_under(_read_run(self.run_dir(run_id)), registration)

    def registered(self, run_id: str) -> bool:
        """Whether ``run_id`` is registered on this host now, read without the registry's lock
        (``run.json`` is replaced whole), as ``operator_directories`` reads."""
        return _read_run(self.run_dir(run_id)) is not None

    def operator_directories(self) -> list[tuple[str, Path]]:
        """(run id, directory) of every run live on this host in an operator's directory,
        read without the registry's lock (``run.json`` is replaced whole) and without making
        anything: what an operator's new workspace is checked against before its run
        starts (``workspace_refusal``). A run whose command is gone is not live (``runs
        list`` says so, and the next command naming it ends it, D565), so its directory holds
        nobody's workspace."""
        return [(run_id, registered.directory) for run_id, registered in self._registered()
                if registered.directory is not None
                and not self._command_gone(run_id, registered)]

    def _registered(self) -> list[tuple[str, _Registered]]:
        """Every run live on this host, by id, with what its ``run.json`` says."""
        runs = []
        for entry in _listdir(self.root):
            if not valid_run_id(entry):  # .lock, .trash, .detached
                continue
            registered = _read_run(self.run_dir(entry))
            if registered is not None:
                runs.append((entry, registered))
        return runs

    def end(self, run_id: str, registration: str | None = None) -> bool:
        """The run is over here: it is no longer live, and its generations are removed (a
        held one once its holder lets go; one a killed process held, now). False when the
        run was neither live nor had anything left here. With ``registration`` (a workspace
        ending the run it started in), a run registered afresh since is another run: left
        live, only this process's hold on the ended one is let go."""
        with self._locked() as trash:
            registered = _read_run(self.run_dir(run_id))
            if registered is not None and not _live_under(registered, registration):
                held = self._owned.pop(run_id, None)
                if held is not None:
                    _let_lock_go(held)
                return False
            return self._end(run_id, trash)

    # ------------------------------------------------------------------ generations

    def claim(self, run_id: str, registration: str | None = None) -> tuple[str, int]:
        """The run's current generation (made now if it has none) and a descriptor of it
        holding a shared lock, taken before the registry's lock is let go: between the two a
        pause elsewhere could remove it. Only for a run live under ``registration`` (the one
        its workspace was started in; None: any): a run ended meanwhile stays ended, and one
        registered again since is another run, never one a late call of the ended one uses.

        :raises WorkspaceUnavailable: the run has ended (nothing is made or registered); or
            the lock could not be taken (no file handles left): an unheld generation is one a
            pause elsewhere removes under the call. It stays the run's, for the next call.
        """
        with self._locked():
            run_dir = self.run_dir(run_id)
            if not _live_under(_read_run(run_dir), registration):
                raise RunEnded(_RUN_ENDED)
            generation = self._current(run_id)
            if generation is None:
                generation = f"g{new_id()}"
                _private_dir(run_dir / generation)
                self._size(run_dir / generation)
                _write_text(run_dir / _CURRENT, generation)
            return generation, _held(run_dir / generation)

    def drop(self, run_id: str, generation: str | None = None) -> None:
        """Pause: the run's current generation (``generation``, when it is still the current
        one) stops being the run's at once, and is removed once no process holds it."""
        with self._locked() as trash:
            current = self._current(run_id)
            if current is None or (generation is not None and current != generation):
                return
            with contextlib.suppress(FileNotFoundError):
                (self.run_dir(run_id) / _CURRENT).unlink()
            self._discard(run_id, current, trash)

    def let_go(self, run_id: str, generation: str) -> None:
        """A process closed ``generation``: if it is no longer the run's, remove it (unless
        another process still holds it, which then removes it itself)."""
        with self._locked() as trash:
            if self._current(run_id) != generation:
                self._discard(run_id, generation, trash)
                if not (self.run_dir(run_id) / _RUN_FILE).exists():
                    self._remove_run_dir_if_empty(run_id)

    def generation_path(self, run_id: str, generation: str) -> Path:
        return self.run_dir(run_id) / generation

    def detached_path(self, run_id: str, *, marker: str = "") -> Path:
        """A workspace of one approved call's own (its run is not live here), apart from the
        runs' directories: what a command writes there can never look like a run's files."""
        detached = self.root / ".detached"
        _private_dir(detached)
        return detached / f"{run_id}-{marker}{new_id()}"

    def make_detached(self, run_id: str) -> tuple[Path, int]:
        """A detached workspace (``detached_path``), made now and sized as a generation is,
        with a descriptor of it holding a shared lock (as ``claim``'s): taken before the
        registry's lock is let go, so no sweep can take it for one a killed process left.
        Those are swept first.

        :raises WorkspaceUnavailable: the lock could not be taken (no file handles left):
            what was made is removed, never handed out unheld for a sweep to remove under
            the call.
        """
        with self._locked() as trash:
            self._sweep_detached(trash)
            path = self.detached_path(run_id, marker="g")
            _private_dir(path)
            self._size(path)
            try:
                # After the mount: the lock is on the filesystem's root, which a sweep opens.
                return path, _held(path)
            except WorkspaceUnavailable:
                self._unmake_detached(path)
                raise

    def _unmake_detached(self, path: Path) -> None:
        """Remove a detached workspace just made, under the lock, that nobody could hold: it
        is new and empty, so nothing needs opening (no handle may be left). One that stays
        (still mounted, or not removable) is the next sweep's: it finds it unheld."""
        try:
            if self.release(path):
                os.rmdir(path)
        except OSError as exc:
            _log_not_removed(path, exc, _SWEPT_AGAIN)

    def sweep_detached(self) -> None:
        """Remove every detached workspace no process holds, end every run whose command
        is gone (``own``): its process was killed (an approver's or a ``toolhost call``'s
        SIGKILL, a host's OOM kill), and no run's end or pause will come for it; and remove
        what an ended run left that no process holds (``_sweep_ended``). A failure is
        logged, never raised: the next sweep tries again."""
        if not self.root.is_dir():
            return
        try:
            with self._locked() as trash:
                for run_id, registered in self._registered():
                    if self._command_gone(run_id, registered):
                        self._end_gone(run_id, trash)
                self._sweep_ended(trash)
                if (self.root / ".detached").is_dir():
                    self._sweep_detached(trash)
        except OSError as exc:
            _log_not_removed(self.root / ".detached", exc, _SWEPT_AGAIN)

    def release(self, path: Path) -> bool:
        """Unmount the workspace at ``path`` if it is a filesystem of its own, and remove its
        image: True when ``path`` may now be removed, False when it is still mounted."""
        if self.filesystems is None:
            return not is_mounted(path)
        return self.filesystems.release(path, _image_of(path))

    def release_all(self) -> list[Path]:
        """Unmount every workspace under the root (the data directory is about to be
        removed: no process may use it any more); the ones still mounted."""
        kept = []
        with self._locked():
            places = [self.root / ".detached"] + [self.run_dir(name) for name in
                                                  _listdir(self.root) if valid_run_id(name)]
            for place in places:
                for name in _listdir(place):
                    path = place / name
                    if path.is_dir() and not path.is_symlink() and not self.release(path):
                        kept.append(path)
        return kept

    def _size(self, path: Path) -> None:
        """Make ``path`` (a new, empty directory) a filesystem of the quota, if the host can;
        else it stays a directory, and ``toolhost check`` says the quota is not held."""
        if self.filesystems is not None:
            # A copy of the quota's template, one for the whole directory (D267).
            self.filesystems.make(path, _image_of(path), templates=self.root)

    # ------------------------------------------------------------------ under the lock

    def _current(self, run_id: str) -> str | None:
        try:
            name = (self.run_dir(run_id) / _CURRENT).read_text(encoding="utf-8").strip()
        except OSError:
            return None
        # A name this module made, whose directory still exists (a current file left by a
        # crash after its directory was removed names nothing).
        if not _GENERATION.fullmatch(name):
            return None
        return name if (self.run_dir(run_id) / name).is_dir() else None

    def _end(self, run_id: str, trash: list[Path]) -> bool:
        """``end``, under the lock."""
        run_dir = self.run_dir(run_id)
        if not run_dir.is_dir():
            return False
        live = _read_run(run_dir) is not None
        for name in (_CURRENT, _RUN_FILE):
            with contextlib.suppress(FileNotFoundError):
                (run_dir / name).unlink()
        held = self._owned.pop(run_id, None)
        if held is not None:
            _let_lock_go(held)  # no longer live: nobody need tell whether this process is there
        left = [g for g in _generations(run_dir) if not self._discard(run_id, g, trash)]
        if not left:
            self._remove_run_dir_if_empty(run_id)
        return live or bool(trash)

    def _end_gone(self, run_id: str, trash: list[Path]) -> None:
        """End a run whose command is gone; a failure is logged (the run may stay listed,
        and the next recovery tries again), never raised: nobody waits on that run."""
        try:
            self._end(run_id, trash)
        except OSError as exc:
            _log_not_removed(self.run_dir(run_id), exc, _ENDED_AGAIN)

    def _command_gone(self, run_id: str, registered: _Registered) -> bool:
        """Whether ``run_id`` is a run of one command's own (``own``) whose command is no
        longer there: nobody holds the lock on its directory (the hold died with it)."""
        if not registered.command:
            return False  # a named run, a server's, or one recorded before the flag
        try:
            fd = os.open(self.run_dir(run_id), _O_DIR)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # held (EWOULDBLOCK), or no lock to tell by: live, as before
        finally:
            _let_lock_go(fd)
        return True

    def _sweep_detached(self, trash: list[Path]) -> None:
        """Move each detached workspace no process holds to the trash (its mount released
        and its image removed first); one still held is its holder's to remove."""
        place = self.root / ".detached"
        for name in _listdir(place):
            path = place / name
            if path.is_symlink() or not path.is_dir():
                continue
            # A mounted one is make_detached's too (an older one, named without the marker).
            if _DETACHED.fullmatch(name) or is_mounted(path):
                try:
                    self._trash_unheld(path, f"detached-{name}", trash)
                except OSError as exc:
                    _log_not_removed(path, exc, _SWEPT_AGAIN)

    def _sweep_ended(self, trash: list[Path]) -> None:
        """Remove the generations no process holds (unmounted first) of every run directory
        no run is registered in, and the directory once nothing is left in it: what an end
        left that its last holder never came for (a process killed between the end's steps,
        or a holder that was only a forked child's copy of the lock, before ``_let_lock_go``).
        Nobody else removes it: the run is not live, so no pause or end comes for it. Under
        the lock, no run is being registered there; a generation still held is its holder's,
        kept, as ``_end`` keeps it."""
        for run_id in _listdir(self.root):
            run_dir = self.run_dir(run_id)
            if (not valid_run_id(run_id) or run_dir.is_symlink() or not run_dir.is_dir()
                    or _read_run(run_dir) is not None):
                continue
            try:
                self._end(run_id, trash)
            except OSError as exc:
                _log_not_removed(run_dir, exc, "an ended run's workspace, left in its run "
                                 "directory; the next recover tries again")

    def _discard(self, run_id: str, generation: str, trash: list[Path]) -> bool:
        """Move a generation no process holds to the trash, which ``_locked`` empties once
        the lock is let go; True when it is gone (a held one is its last holder's to
        remove: False)."""
        path = self.generation_path(run_id, generation)
        if not self._trash_unheld(path, f"{run_id}-{generation}", trash):
            return False
        with contextlib.suppress(FileNotFoundError):
            path.with_name(f"{generation}.stamps").unlink()
        return True

    def _trash_unheld(self, path: Path, name: str, trash: list[Path]) -> bool:
        """Move the workspace at ``path`` to the trash as ``name`` unless a process holds it
        (its shared ``flock``) or it stays mounted: True when it is gone."""
        # The root is the host's (0700); a command may have taken its owner's permission
        # away (``chmod 0 /workspace``), which would keep it from being opened or moved.
        open_up(path)
        try:
            fd = os.open(path, _O_DIR)
        except OSError:
            return True
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                    return False
                raise
            # Nobody holds it, and nobody can claim it while the registry is locked: unmount
            # before it moves (a mount point cannot) and before anything removes under it.
            if not self.release(path):
                return False
            bin_ = self.root / ".trash"
            _private_dir(bin_)
            gone = bin_ / name
            os.rename(path, gone)
            trash.append(gone)
            return True
        finally:
            _let_lock_go(fd)

    def _remove_run_dir_if_empty(self, run_id: str) -> None:
        run_dir = self.run_dir(run_id)
        with contextlib.suppress(OSError):
            for leftover in [*run_dir.glob(".*.tmp"), *run_dir.glob("g*.stamps"),
                             *run_dir.glob(f"g*{IMAGE_SUFFIX}")]:
                if leftover.suffix != IMAGE_SUFFIX or not leftover.with_suffix("").exists():
                    leftover.unlink()
            run_dir.rmdir()


@attrs.frozen
class ListedRun:
    """A run registered on this host, as ``toolhost runs list`` shows it."""

    run_id: str
    #: The operator's directory it runs in, or None (generations made here).
    directory: Path | None
    #: Whether it has a generation now.
    has_workspace: bool
    #: A run of one command's own (``RunWorkspaces.own``) whose command is gone: not live,
    #: though still registered until the next recovery (or ``runs end``) ends it.
    command_gone: bool


@attrs.frozen
class _Registered:
    """What ``run.json`` says of a live run."""

    directory: Path | None
    deadline_at: dt.datetime | None
    #: The run ends with its command (``RunWorkspaces.own``); absent in older files: False.
    command: bool = False
    #: Which registration of the run this is (``RunWorkspaces.claim``); absent in older files.
    registration: str | None = None


@attrs.frozen
class ApprovalRefusal:
    """Why an approval would be refused now (``RunWorkspaces.approval_refused``)."""

    #: The line, naming the directories: ``toolhost approve``'s, and an approvals.admin's.
    line: str
    #: The same refusal and remedy naming no directory, where the run is live elsewhere than
    #: where the call paused (D559), for a person the paths are kept from (D458); None for a
    #: directory that no longer passes, whose words are about its path.
    pathless: str | None = None


@attrs.frozen
class KeptDirectory:
    """An operator's directory a row recorded on this host (``kept_directory``)."""

    path: Path
    #: (st_dev, st_ino) when the call paused; None on a row recorded without them.
    identity: tuple[int, int] | None
    #: The boot id of the machine it paused on, if it could be read there.
    boot: str | None


def kept_directory(recorded: Mapping[str, Any] | None) -> KeptDirectory | None:
    """The operator's directory a row's ``operator_directory`` names on this host; None when
    it names none, or one on another host (an approval there runs in a workspace of its
    own, D219).

    :raises WorkspaceUnavailable: it names this host but no directory (the store's reader
        refuses such a row as damaged; a caller passing one runs the call nowhere).
    """
    if not recorded or recorded.get("host") != socket.gethostname():
        return None
    try:
        valid_operator_directory(recorded)
    except TypeError:
        raise WorkspaceUnavailable(
            "the operator's directory the call paused in is recorded as "
            f"{_quoted(str(recorded.get('path')))}, which is not a directory's path") from None
    device, inode = recorded.get("device"), recorded.get("inode")
    return KeptDirectory(Path(recorded["path"]),
                         None if device is None or inode is None else (device, inode),
                         recorded.get("boot"))


def directory_refusal(kept: KeptDirectory) -> str | None:
    """Why ``kept``, recorded resolved when its call paused, is no longer that directory:
    gone, not a directory, unreachable, reached through a link now (which a tool could have
    swapped in to move the approved call elsewhere), or another directory at that path (one
    recreated or mounted over it, another mount namespace's, or another machine's by the same
    name: D469 tells directories apart by (st_dev, st_ino)); None when it still is."""
    shown = _quoted(str(kept.path))
    try:
        found = os.stat(kept.path)
        real = os.path.realpath(kept.path)
    except (FileNotFoundError, NotADirectoryError):
        found = None
    except (OSError, ValueError) as exc:  # too long, a parent not searchable, a failed mount
        name = errno.errorcode.get(getattr(exc, "errno", None) or 0, "no errno")
        return f"the operator's directory {shown} the call paused in cannot be reached ({name})"
    if found is None or not stat.S_ISDIR(found.st_mode):
        return (f"the operator's directory {shown} the call paused in no longer exists "
                "(or is no longer a directory)")
    if real != str(kept.path):
        return (f"the operator's directory {shown} the call paused in now leads to "
                f"{_quoted(real)}")
    boot = _boot()
    if kept.boot is not None and boot is not None and kept.boot != boot:
        return (f"the operator's directory {shown} the call paused in was on this machine "
                "before it restarted (or on another machine by this name): the directory "
                "there now cannot be told to be that one (deny the call, and make it again)")
    if kept.identity != (found.st_dev, found.st_ino):
        why = ("its row does not say which directory it was" if kept.identity is None
               else "it is another directory now, at the same path")
        return (f"the operator's directory {shown} the call paused in cannot be told to be "
                f"the one it paused in: {why} (deny the call, and make it again)")
    return None


def _elsewhere(run_id: str, live: _Registered, kept: KeptDirectory | None) -> str | None:
    """Why an approval of a call of ``run_id`` whose row recorded ``kept`` (None: no
    operator's directory on this host) must not run in the run's live workspace: the run is
    live somewhere other than where the call paused, registered afresh or given another
    directory since (D536: another run). The same path is checked as the directory it was
    (``directory_refusal``). None when the call runs there."""
    refused = _elsewhere_refusal(run_id, live, kept)
    return None if refused is None else refused.line


def _elsewhere_refusal(run_id: str, live: _Registered,
                       kept: KeptDirectory | None) -> ApprovalRefusal | None:
    """``_elsewhere``'s refusal, with its words naming no directory when the run is live
    in another place (``ApprovalRefusal.pathless``)."""
    if live.directory == (None if kept is None else kept.path):
        refused = None if kept is None else directory_refusal(kept)
        return None if refused is None else ApprovalRefusal(refused)
    then = ("not in an operator's directory on this host" if kept is None
            else f"in {_quoted(str(kept.path))}")
    # One remedy, whoever reads it (D559): the paths are what only some may read.
    remedy = (f"it would run elsewhere; deny it, or end the run (toolhost runs end {run_id}) "
              "and approve it again")
    return ApprovalRefusal(
        f"run {run_id!r} is live in {_place(live.directory)}, but the call paused {then}: "
        f"{remedy}",
        f"run {run_id!r} is live in another place than the one the call paused in: {remedy}")


def _moved(run_id: str, live: _Registered, directory: Path | None) -> str | None:
    """Why a command naming ``run_id`` live here may not give it ``directory`` (resolved):
    the run is live in another place (another directory, or generations the host makes),
    and a run's workspace stays where it was registered (its paused calls recorded that
    place); None when ``directory`` is not given or is the run's."""
    if directory is None or directory == live.directory:
        return None
    return (f"run {run_id!r} is live in {_place(live.directory)}, not in "
            f"{_quoted(str(directory))}: a run's workspace stays where it started; name the "
            f"run without a directory, or end it first (toolhost runs end {run_id})")


def _place(directory: Path | None) -> str:
    """Where a live run's workspace is, as a refusal names it."""
    return ("a workspace the host makes" if directory is None
            else f"the operator's directory {_quoted(str(directory))}")


def _quoted(path: str) -> str:
    """A recorded path as a refusal shows it: quoted, escaped, and cut to ``_PATH_SHOWN``."""
    cut = path if len(path) <= _PATH_SHOWN else path[:_PATH_SHOWN - 1] + "…"
    return escaped(repr(cut))


def _boot() -> str | None:
    """This machine's boot id, as a row's owner records it; None where ``/proc`` has none."""
    # Imported here: only an operator's directory needs it, and the SQLite store may be unused.
    from toolhost._adapters.sqlite_invocations import this_process

    boot = this_process().get("boot")
    return boot if isinstance(boot, str) else None


def _read_run(run_dir: Path) -> _Registered | None:
    """The run's registration, or None when it is not live here."""
    try:
        data: Any = json.loads((run_dir / _RUN_FILE).read_text("utf-8"))
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (OSError, ValueError):  # damaged: live, with nothing more known of it
        data = {}
    if not isinstance(data, dict):
        data = {}
    directory, deadline = data.get("directory"), data.get("deadline")
    # Only an absolute directory: a relative one would mean whatever directory a later
    # command happened to run in.
    path = Path(directory) if isinstance(directory, str) and directory else None
    try:
        deadline_at = dt.datetime.fromisoformat(deadline) if isinstance(deadline, str) else None
    except ValueError:
        deadline_at = None
    if deadline_at is not None and deadline_at.utcoffset() is None:
        deadline_at = None
    registration = data.get("registration")
    return _Registered(path if path is not None and path.is_absolute() else None, deadline_at,
                       data.get("command") is True,
                       registration if isinstance(registration, str) and registration else None)


def _live_under(registered: _Registered | None, registration: str | None) -> bool:
    """Whether the run is live (``registered``) under ``registration``: not ended since, nor
    registered afresh. One not known (None: a caller naming none, a damaged or older
    ``run.json``) is taken as the run's, as a damaged file is taken as live."""
    if registered is None:
        return False
    known = registered.registration
    return registration is None or known is None or known == registration


def _earlier(a: dt.datetime | None, b: dt.datetime | None) -> dt.datetime | None:
    return b if a is None else a if b is None else min(a, b)


def _image_of(path: Path) -> Path:
    """The image of the filesystem mounted on ``path``, beside it: ``<name>.img``."""
    return path.with_name(path.name + IMAGE_SUFFIX)


def _remove_trashed(path: Path) -> None:
    """Remove one tree in the trash, unless another process is removing it now: whoever does
    holds an exclusive ``flock`` on it (which dies with its process).

    :raises OSError: it could not be removed (whatever is left stays in the trash).
    """
    open_up(path)
    try:
        fd = os.open(path, _O_DIR)
    except FileNotFoundError:
        return  # removed meanwhile, by whoever held it
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return
        remove_tree(path)
    finally:
        _let_lock_go(fd)


def _log_not_removed(path: Path, exc: OSError, detail: str = "left in workspaces/.trash; "
                     "the next pause or end of a run tries again") -> None:
    """A discarded workspace stays where it is for now: the operator learns why."""
    try:
        from toolhost._pipeline.log import get_logger

        get_logger().warning(
            "workspace_not_removed", path=str(path),
            error=errno.errorcode.get(exc.errno or 0, str(exc.errno)), detail=detail)
    except Exception:  # a log that fails never fails the run's end
        pass


def _listdir(path: Path) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def _generations(run_dir: Path) -> list[str]:
    try:
        return sorted(n for n in os.listdir(run_dir) if _GENERATION.fullmatch(n)
                      and (run_dir / n).is_dir())
    except OSError:
        return []


class RunWorkspace:
    """One run's workspace as this process uses it: the Workspace port (and the sandbox's,
    and ``RunBoundWorkspace``), on the run's current generation, or on the operator's
    directory.

    The generation is looked up at the first operation after ``refresh`` (which the pipeline
    calls when a call starts and no other call of the run is executing here), so a call runs
    in one generation from start to end, and a process that finds its run paused and resumed
    elsewhere moves to the new one. ``discard`` is a pause, ``end`` the run's end, and
    ``close`` lets the descriptors go: the generation stays the run's, and a workspace of one
    approved call's own (``RunWorkspaces.for_approval`` of a run not live here) is removed.
    """

    def __init__(self, registry: RunWorkspaces, run_id: str, *,
                 directory: Path | None = None, detached: bool = False,
                 ends_on_close: bool = False, registration: str | None = None) -> None:
        self._registry = registry
        self.run_id = run_id
        self._directory = directory
        #: The run's registration this workspace was started in (``RunWorkspaces.claim``).
        self._registration = registration
        self._detached = detached
        #: An approved call's run registered in the operator's directory its row recorded
        #: (``for_approval``): it is live only while the call runs.
        self._ends_on_close = ends_on_close
        self._handle: WorkspaceHandle | None = None
        self._generation: str | None = None
        #: A shared flock on the generation's (or detached workspace's) directory, held while
        #: this process has it.
        self._hold: int | None = None
        self._stale = True
        #: Set by ``end``: a tool body still running after its run ended (a sync body that
        #: ignored its cancellation) must not claim the run a fresh generation, left behind.
        self._ended = False
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ lifecycle

    def refresh(self) -> None:
        """Look the run's generation up again at the next operation (a call starts)."""
        self._stale = True

    def current(self) -> WorkspaceHandle:
        """The handle of the run's workspace for this call (made on first use)."""
        with self._lock:
            if self._ended:
                raise RunEnded(_RUN_ENDED)
            if self._directory is not None:
                return self._directory_handle(self._directory)
            handle = self._handle
            if handle is not None and (not self._stale or self._detached):
                return handle
            if self._detached:
                path, self._hold = self._registry.make_detached(self.run_id)
                handle = self._handle = WorkspaceHandle(path, owned=True)
            else:
                generation, hold = self._registry.claim(self.run_id, self._registration)
                if handle is not None and generation == self._generation:
                    _let_lock_go(hold)  # this process holds it already
                else:
                    self._let_go()
                    handle = self._open_generation(generation, hold)
            self._stale = False
            return handle

    def _directory_handle(self, directory: Path) -> WorkspaceHandle:
        """The operator's directory, once a call's first use finds the run still live under
        the registration this workspace started in, as ``claim`` finds a generation: a call
        reaching for it after the run's end elsewhere (``toolhost runs end``) writes nothing
        in the operator's files (D529); one already using it goes on, as in a generation."""
        handle = self._handle
        if handle is not None and not self._stale:
            return handle
        if not self._registry.live_under(self.run_id, self._registration):
            raise RunEnded(_RUN_ENDED)
        if handle is None:
            handle = self._handle = WorkspaceHandle(directory)
        self._stale = False
        return handle

    def check_live(self) -> None:
        """Refuse (``RunEnded``) once the run this workspace started in has ended, here or in
        another process: a late call publishes nothing as the ended run's (an attachment), as
        it writes nothing in its workspace (D529). A workspace of one approved call's own
        (its run was not live here when the call was approved) is never refused: its files
        reach the run through what it publishes (D219).

        :raises RunEnded: the run has ended, or was registered afresh since.
        """
        if self._ended:
            raise RunEnded(_RUN_ENDED)
        if not self._detached and not self._registry.live_under(self.run_id,
                                                                self._registration):
            raise RunEnded(_RUN_ENDED)

    def _open_generation(self, generation: str, hold: int | None) -> WorkspaceHandle:
        path = self._registry.generation_path(self.run_id, generation)
        self._hold, self._generation = hold, generation
        handle = self._handle = WorkspaceHandle(
            path, owned=False, stamps=path.with_name(f"{generation}.stamps"))
        return handle

    def _let_go(self) -> None:
        """Close this process's hold on its generation (removing it if it is no longer the
        run's and nobody else holds it)."""
        handle, self._handle = self._handle, None
        if handle is not None:
            handle.close()
        hold, self._hold = self._hold, None
        if hold is not None:
            _let_lock_go(hold)
        generation, self._generation = self._generation, None
        if generation is not None:
            self._registry.let_go(self.run_id, generation)

    def close(self) -> None:
        """Let the descriptors go; the generation stays the run's for later calls (a
        detached workspace, one approved call's own, is removed)."""
        with self._lock:
            if self._generation is not None:
                self._let_go()
            elif self._handle is not None:
                handle, self._handle = self._handle, None
                handle.close()
                # Unmounted first: nothing is removed under a mounted filesystem.
                if self._detached and self._registry.release(handle.root):
                    handle.discard()
                # Let go only now: until it is removed, no sweep may take it for a leftover.
                hold, self._hold = self._hold, None
                if hold is not None:
                    _let_lock_go(hold)
            self._stale = True
            if self._ends_on_close:
                self._registry.end(self.run_id, self._registration)

    def recorded_directory(self) -> Mapping[str, Any] | None:
        """What a call pausing in this workspace records of it on its row: the operator's
        directory, the host it is on (a path on another machine names another directory),
        and which directory it is (st_dev, st_ino, the boot id: a directory at that path
        later, or seen elsewhere by the same host name, may be another one); None for a
        workspace the host made, and for a path the record cannot hold as text."""
        if self._directory is None:
            return None
        path = str(self._directory)
        try:
            path.encode("utf-8")
        except UnicodeEncodeError:  # a name that is no UTF-8: a detached workspace, as before
            return None
        recorded: dict[str, Any] = {"host": socket.gethostname(), "path": path}
        try:
            found = os.stat(path)
        except OSError:  # gone already: recorded without its identity, an approval refuses it
            return recorded
        recorded.update(device=found.st_dev, inode=found.st_ino)
        boot = _boot()
        if boot is not None:
            recorded["boot"] = boot
        return recorded

    def pause(self) -> None:
        """The run pauses: its generation stops being the run's at once (whatever runs next
        in the run, anywhere on the host, starts a fresh one); this process's calls still
        executing in it go on, and ``discard`` lets it go when they end."""
        with self._lock:
            if self._directory is None and not self._detached:
                self._registry.drop(self.run_id, self._generation)

    def discard(self) -> None:
        """The run pauses, and this process is done with the workspace: it is dropped (an
        operator's directory is only closed), and its next use starts a fresh one."""
        with self._lock:
            self.pause()
            self.close()

    def end(self) -> None:
        """The run is over: discard, and no longer live on this host. Nothing uses this
        workspace again (``current`` refuses)."""
        with self._lock:
            self._ended = True
            self.close()
            if not self._detached:
                self._registry.end(self.run_id, self._registration)

    # ------------------------------------------------------------------ the Workspace port

    def read(self, path: str) -> bytes:
        return self.current().read(path)

    def read_chunks(self, path: str, chunk_size: int = READ_CHUNK) -> Any:
        return self.current().read_chunks(path, chunk_size)

    def write(self, path: str, data: bytes, *,
              provenance: Provenance = Provenance.TOOL_WRITTEN) -> WriteResult:
        return self.current().write(path, data, provenance=provenance)

    def listdir(self, path: str = "", *, recursive: bool = False, limit: int = 1000) -> Listing:
        return self.current().listdir(path, recursive=recursive, limit=limit)

    def provenance(self, path: str) -> Provenance:
        return self.current().provenance(path)

    def sandbox_root(self) -> contextlib.AbstractContextManager[int]:
        return self.current().sandbox_root()

    def usage(self, *, max_bytes: int, max_entries: int, max_depth: int) -> WorkspaceUsage:
        return self.current().usage(max_bytes=max_bytes, max_entries=max_entries,
                                    max_depth=max_depth)

    @property
    def root(self) -> Path:
        return self.current().root
