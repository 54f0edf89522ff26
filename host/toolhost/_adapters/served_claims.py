"""Servers' claims on the operator's directory they serve (``TOOLHOST_MCP_WORKSPACE``): a
file in ``workspaces/.served`` naming the directory and the server's pid, held by an exclusive
``flock`` while the server runs.

A claim makes the directory live for D469's nesting check between sessions too, when the
server has no run live: it opens the directory again by name for each session, so a run on
its parent could otherwise swap it for a link. The lock dies with its process, so a claim
nobody holds is a server SIGKILLed: readers ignore it, and the next claim removes it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from pathlib import Path

__all__ = ["SERVED_CLAIMS", "ServedClaim", "served_directories"]

#: Under the workspace registry (``TOOLHOST_DATA_DIR/workspaces``).
SERVED_CLAIMS = ".served"

_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_READ = os.O_RDONLY | os.O_NOFOLLOW | _O_CLOEXEC


class ServedClaim:
    """This server's claim on ``directory``, held until ``close``."""

    def __init__(self, path: Path, fd: int) -> None:
        self._path: Path | None = path
        self._fd = fd

    @classmethod
    def take(cls, place: Path, directory: Path, claim_id: str) -> ServedClaim:
        """Claim ``directory`` in ``place`` (first removing the claims nobody holds).

        :raises OSError: it cannot be taken (no lock to hold, the data directory unwritable).
        """
        temp = place / f".{claim_id}.tmp"
        place.mkdir(mode=0o700, parents=True, exist_ok=True)
        _sweep(place)
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _O_CLOEXEC,
                     0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.write(fd, json.dumps({"directory": os.path.realpath(directory),
                                     "pid": os.getpid()}).encode())
            # Named only once held and written: a reader never finds it unheld or half written.
            path = place / f"{claim_id}.json"
            os.rename(temp, path)
        except OSError:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
        return cls(path, fd)

    def close(self) -> None:
        """Give the claim up (the server stops): the directory is no longer live."""
        path, self._path = self._path, None
        if path is not None:
            with contextlib.suppress(OSError):
                os.unlink(path)  # while still held: never seen unheld
            os.close(self._fd)


def served_directories(place: Path) -> list[tuple[int, Path]]:
    """(pid, directory) of each server that serves an operator's directory now: each claim in
    ``place`` whose lock is held. Read without the registry's lock, as the runs' ``run.json``
    are (a claim is renamed into place already held)."""
    found = []
    for name in _claims(place):
        try:
            fd = os.open(place / name, _O_READ)
        except OSError:
            continue  # released meanwhile
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                claim = _read(fd)  # held: its server is running
                if claim is not None:
                    found.append(claim)
            except OSError:
                pass  # no lock to tell by: no server could have held it either
        finally:
            os.close(fd)  # lets a shared lock taken on a stale claim go too
    return found


def _claims(place: Path) -> list[str]:
    """The claims' names in ``place``, never one being written (``.<id>.tmp``)."""
    try:
        names = sorted(os.listdir(place))
    except OSError:
        return []
    return [name for name in names if not name.startswith(".") and name.endswith(".json")]


def _read(fd: int) -> tuple[int, Path] | None:
    """A claim's (pid, directory); None when it is not one (only an absolute directory)."""
    try:
        data = json.loads(os.read(fd, 65536))  # a few dozen bytes, written before it was named
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    directory, pid = data.get("directory"), data.get("pid")
    if not (isinstance(directory, str) and os.path.isabs(directory) and "\x00" not in directory
            and isinstance(pid, int)):
        return None
    return pid, Path(directory)


def _sweep(place: Path) -> None:
    """Remove each claim nobody holds (its server was killed): it counts for nothing, but
    would pile up."""
    for name in _claims(place):
        try:
            fd = os.open(place / name, _O_READ)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.unlink(place / name)  # never held again: claims' names are never reused
        except OSError:
            pass  # held (a live server's), or just read by a check
        finally:
            os.close(fd)
