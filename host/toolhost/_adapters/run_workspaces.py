"""A run's workspace on one host: one generation at a time, whichever process uses it.

The seed holds a workspace for a worker's claim on the run: a cache, discarded when the run
pauses (a call left waiting for approval) or ends. An approval answered within the call is
not a pause. When a paused call is approved and run (``toolhost approve``, another process),
its workspace becomes the run's workspace for the calls that follow in that run, until the
run's next pause or end: the session that paused goes on in it. So the run's workspace is
named on disk, not held in one process's memory::

    workspaces/.lock               flock'd (exclusive) while any run's registration changes
    workspaces/<run>/run.json      the run is live on this host: {"directory": null | "/abs"}
    workspaces/<run>/current       the name of the run's current generation (absent: none yet,
                                   or the run paused since)
    workspaces/<run>/<gen>/        that generation's root: what the tools and the sandbox see
    workspaces/<run>/<gen>.stamps  its provenance stamps (``workspace_stamps``), beside the
                                   root, never in it

A generation is made by the first use after the run started or paused; every process of the
host that uses the run's workspace then uses that one. A process holds a shared ``flock`` on
the generation's directory while it has it open; a pause or end removes the ``current`` name
at once and the directory only when no other process holds it (else the last holder, finding
its generation no longer current, removes it when it lets go). An operator's directory
(``--workspace DIR``, ``TOOLHOST_MCP_WORKSPACE``) is the run's workspace whatever happens: a
pause closes it and never deletes it.

A call approved for a run that is not live here (it ended, or lives on another host) gets a
workspace of its own, discarded after the call: what it wrote reaches the run only through
its result and ``artifact.export``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from toolhost._adapters.fs_workspace import WorkspaceHandle, remove_tree
from toolhost._adapters.system_clock import new_id
from toolhost._model.workspace import (
    READ_CHUNK,
    Listing,
    Provenance,
    WorkspaceUsage,
    WriteResult,
)

__all__ = ["RunWorkspace", "RunWorkspaces"]

_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _O_CLOEXEC
_RUN_FILE = "run.json"
_CURRENT = "current"


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


class RunWorkspaces:
    """Every run's workspace on this host, under ``TOOLHOST_DATA_DIR/workspaces``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Exclusive over every process of the host (and every thread of this one)."""
        with self._lock:
            _private_dir(self.root)
            fd = os.open(self.root / ".lock", os.O_RDWR | os.O_CREAT | _O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)

    def run_dir(self, run_id: str) -> Path:
        return self.root / run_id

    # ------------------------------------------------------------------ runs

    def start(self, run_id: str, directory: Path | None = None) -> RunWorkspace:
        """The live run's workspace: registered now (a run already live keeps its
        generation), in ``directory`` when given (the operator's, never deleted), else in
        the directory the run was registered with, else in generations made here."""
        with self._locked():
            run_dir = self.run_dir(run_id)
            _private_dir(run_dir)
            registered = self._directory(run_id)
            if directory is not None or not (run_dir / _RUN_FILE).exists():
                registered = directory
                _write_text(run_dir / _RUN_FILE, json.dumps(
                    {"directory": None if directory is None else str(directory)}))
        workspace = RunWorkspace(self, run_id, directory=registered)
        if directory is not None:
            workspace.current()  # the caller named it: it must exist now (OSError if not)
        return workspace

    def for_approval(self, run_id: str) -> RunWorkspace:
        """The workspace an approved call of ``run_id`` runs in: the run's, if it is live on
        this host, else one of the call's own (``RunWorkspace.release`` discards it)."""
        with self._locked():
            live = (self.run_dir(run_id) / _RUN_FILE).exists()
            directory = self._directory(run_id) if live else None
        if live:
            return RunWorkspace(self, run_id, directory=directory)
        return RunWorkspace(self, run_id, detached=True)

    def live(self) -> list[tuple[str, Path | None, bool]]:
        """(run id, operator directory or None, whether it has a generation now) of every
        run live on this host, by id."""
        runs = []
        with self._locked():
            if not self.root.is_dir():
                return []
            for entry in sorted(os.listdir(self.root)):
                run_dir = self.root / entry
                if (run_dir / _RUN_FILE).exists():
                    runs.append((entry, self._directory(entry), self._current(entry) is not None))
        return runs

    def end(self, run_id: str) -> bool:
        """The run is over here: its generation is removed (once no process holds it) and it
        is no longer live. False when it was not live."""
        with self._locked():
            run_dir = self.run_dir(run_id)
            if not (run_dir / _RUN_FILE).exists():
                return False
            generation = self._current(run_id)
            with contextlib.suppress(FileNotFoundError):
                (run_dir / _CURRENT).unlink()
            with contextlib.suppress(FileNotFoundError):
                (run_dir / _RUN_FILE).unlink()
            if generation is not None:
                self._remove_unheld(run_id, generation)
            self._remove_run_dir_if_empty(run_id)
        return True

    # ------------------------------------------------------------------ generations

    def claim(self, run_id: str) -> str:
        """The run's current generation, made now if it has none. A run ended meanwhile
        (elsewhere) is live again: its holder is still using it."""
        with self._locked():
            run_dir = self.run_dir(run_id)
            generation = self._current(run_id)
            if generation is not None:
                return generation
            _private_dir(run_dir)
            if not (run_dir / _RUN_FILE).exists():
                _write_text(run_dir / _RUN_FILE, json.dumps({"directory": None}))
            generation = f"g{new_id()}"
            _private_dir(run_dir / generation)
            _write_text(run_dir / _CURRENT, generation)
            return generation

    def is_current(self, run_id: str, generation: str) -> bool:
        return self._current(run_id) == generation

    def drop(self, run_id: str, generation: str | None = None) -> None:
        """Pause: the run's current generation (``generation``, when it is still the current
        one) stops being the run's, and is removed once no process holds it."""
        with self._locked():
            current = self._current(run_id)
            if current is None or (generation is not None and current != generation):
                return
            with contextlib.suppress(FileNotFoundError):
                (self.run_dir(run_id) / _CURRENT).unlink()
            self._remove_unheld(run_id, current)

    def let_go(self, run_id: str, generation: str) -> None:
        """A process closed ``generation``: if it is no longer the run's, remove it (unless
        another process still holds it, which then removes it itself)."""
        with self._locked():
            if self._current(run_id) != generation:
                self._remove_unheld(run_id, generation)
                if not (self.run_dir(run_id) / _RUN_FILE).exists():
                    self._remove_run_dir_if_empty(run_id)

    def generation_path(self, run_id: str, generation: str) -> Path:
        return self.run_dir(run_id) / generation

    def detached_path(self, run_id: str) -> Path:
        """A workspace of one approved call's own (its run is not live here)."""
        return self.root / f"{run_id}-{new_id()}"

    # ------------------------------------------------------------------ under the lock

    def _current(self, run_id: str) -> str | None:
        try:
            name = (self.run_dir(run_id) / _CURRENT).read_text(encoding="utf-8").strip()
        except OSError:
            return None
        # A name this module made, whose directory still exists (a current file left by a
        # crash after its directory was removed names nothing).
        if not (name.startswith("g") and name[1:].isalnum() and len(name) <= 64):
            return None
        return name if (self.run_dir(run_id) / name).is_dir() else None

    def _directory(self, run_id: str) -> Path | None:
        try:
            data: Any = json.loads((self.run_dir(run_id) / _RUN_FILE).read_text("utf-8"))
        except (OSError, ValueError):
            return None
        directory = data.get("directory") if isinstance(data, dict) else None
        return Path(directory) if isinstance(directory, str) and directory else None

    def _remove_unheld(self, run_id: str, generation: str) -> None:
        """Remove a generation no process holds (a held one is its last holder's to remove)."""
        path = self.generation_path(run_id, generation)
        try:
            fd = os.open(path, _O_DIR)
        except OSError:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                return
            raise
        try:
            remove_tree(path)
            with contextlib.suppress(FileNotFoundError):
                path.with_name(f"{generation}.stamps").unlink()
        finally:
            os.close(fd)

    def _remove_run_dir_if_empty(self, run_id: str) -> None:
        run_dir = self.run_dir(run_id)
        with contextlib.suppress(OSError):
            for leftover in run_dir.glob(".*.tmp"):
                leftover.unlink()
            run_dir.rmdir()


class RunWorkspace:
    """One run's workspace as this process uses it: the Workspace port (and the sandbox's),
    on the run's current generation, or on the operator's directory.

    The generation is looked up at the first operation after ``refresh`` (which the pipeline
    calls when a call starts and no other call of the run is executing here), so a call runs
    in one generation from start to end, and a process that finds its run paused and resumed
    elsewhere moves to the new one. ``discard`` is a pause, ``end`` the run's end, and
    ``close`` lets the descriptors go: the generation stays the run's, and a workspace of one
    approved call's own (``RunWorkspaces.for_approval`` of a run not live here) is removed.
    """

    def __init__(self, registry: RunWorkspaces, run_id: str, *,
                 directory: Path | None = None, detached: bool = False) -> None:
        self._registry = registry
        self.run_id = run_id
        self._directory = directory
        self._detached = detached
        self._handle: WorkspaceHandle | None = None
        self._generation: str | None = None
        #: A shared flock on the generation's directory, held while this process has it.
        self._hold: int | None = None
        self._stale = True
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ lifecycle

    def refresh(self) -> None:
        """Look the run's generation up again at the next operation (a call starts)."""
        self._stale = True

    def current(self) -> WorkspaceHandle:
        """The handle of the run's workspace for this call (made on first use)."""
        with self._lock:
            handle = self._handle
            if handle is not None and (not self._stale or self._directory is not None
                                       or self._detached):
                return handle
            if self._directory is not None:
                handle = self._handle = WorkspaceHandle(self._directory)
            elif self._detached:
                handle = self._handle = WorkspaceHandle(
                    self._registry.detached_path(self.run_id), owned=True)
            else:
                generation = self._registry.claim(self.run_id)
                if handle is None or generation != self._generation:
                    self._let_go()
                    handle = self._open_generation(generation)
            self._stale = False
            return handle

    def _open_generation(self, generation: str) -> WorkspaceHandle:
        path = self._registry.generation_path(self.run_id, generation)
        try:
            hold = os.open(path, _O_DIR)
            fcntl.flock(hold, fcntl.LOCK_SH)
        except OSError:
            hold = None  # gone meanwhile: the handle's own open reports it
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
            os.close(hold)
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
                if self._detached:
                    handle.discard()
                else:
                    handle.close()
            self._stale = True

    def discard(self) -> None:
        """The run pauses: its workspace is dropped (an operator's directory is only closed),
        and its next use starts a fresh one."""
        with self._lock:
            generation = self._generation
            self.close()
            if self._directory is None and not self._detached:
                self._registry.drop(self.run_id, generation)

    def end(self) -> None:
        """The run is over: discard, and no longer live on this host."""
        with self._lock:
            self.close()
            if not self._detached:
                self._registry.end(self.run_id)

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
