"""The operator's directory a server serves (TOOLHOST_MCP_WORKSPACE): pinned and claimed for
as long as the server runs.

Why: the directory is checked once, when the server starts (D411: none of the host's places;
D469: no nesting with a live run's), but each session's run opens it again by name. Between
two sessions, with no run of the server live, an approved sandboxed command of a run on its
parent could replace it with a link (to the data directory's parent, say, whose validators'
cache every start runs: D256), and the next session would read and write there with no
approval. So:

- pinned: the directory's identity (device and inode, its links followed) is recorded when
  the server starts. A session's run starts only while the name still leads to that directory
  and it still passes the start's check (the host's places, live runs and servers); else that
  session is refused, the server goes on, and the operator is told once what changed.
- claimed: a file in ``workspaces/.served`` holding the directory, with an exclusive ``flock``
  held on it until the server stops, makes the directory live for D469's check
  (``workspace_refusal`` reads it): no run starts on a directory holding it or inside it, even
  between sessions. The lock dies with the process, so a SIGKILLed server's claim blocks
  nothing (readers ignore it, and the next server removes it).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path

from toolhost._composition import Host, claim_served, get_logger, workspace_refusal
from toolhost._mcp.config import ConfigError

__all__ = ["ServedDirectory"]

SETTING = "TOOLHOST_MCP_WORKSPACE"


class ServedDirectory:
    """``given`` (TOOLHOST_MCP_WORKSPACE as written), claimed and pinned now.

    :raises ConfigError: it no longer is an existing directory, or no longer passes the start's
        check now that it is claimed (a run on its parent started while the server started).
    """

    def __init__(self, host: Host, given: Path) -> None:
        self._settings = host.settings
        self._declared = host.declared_settings
        self.given = given
        self._claim = _claimed(host, given)
        try:
            # Pinned once claimed: from now on no run may start where it could swap it.
            self._identity = _identity(given)
            problem = self.refusal()
        except OSError:
            problem = (f"{self._settings.named_value(SETTING, str(given))} is not an existing "
                       "directory")
        if problem is not None:
            self.close()
            raise ConfigError(problem)

    def refusal(self) -> str | None:
        """Why no session's run may start in the directory now: one line naming the setting
        where it was written and what changed; None when one may."""
        try:
            now = _identity(self.given)
        except OSError as exc:
            change = f"names no directory now ({errno.errorcode.get(exc.errno or 0, exc)})"
        else:
            if now == self._identity:
                return workspace_refusal(self._settings.named(SETTING), str(self.given),
                                         self._settings, self._declared)
            change = f"leads to {os.path.realpath(self.given)!r} now"
        shown = self._settings.named_value(SETTING, str(self.given))
        return (f"{shown} no longer leads to the directory this server started with: it "
                f"{change}, so no session's run starts there (restart the server to serve "
                "where it leads now, once checked)")

    def close(self) -> None:
        """Give the claim up (the server stops): the directory is no longer live."""
        release, self._claim = self._claim, None
        if release is not None:
            release()


def _identity(directory: Path) -> tuple[int, int]:
    """The directory ``directory`` leads to now, links followed.

    :raises OSError: it leads to nothing, or to no directory (ENOTDIR)."""
    found = os.stat(directory)
    if not stat.S_ISDIR(found.st_mode):
        raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))
    return found.st_dev, found.st_ino


def _claimed(host: Host, directory: Path) -> Callable[[], None] | None:
    """This server's claim on ``directory`` (its release); None where it cannot be taken (no lock to hold,
    the data directory unwritable): the pin still guards each session, and the operator is
    told."""
    try:
        return claim_served(host.settings, directory, host.new_id())
    except OSError as exc:
        get_logger().warning("mcp.serve.workspace_not_claimed", path=str(directory),
                             error=errno.errorcode.get(exc.errno or 0, str(exc.errno)))
        return None
