"""The workspace quota: how much the command may leave in the workspace, checked from the host
while it runs.

RLIMIT_FSIZE bounds each file, not their number, so without this one call could fill the
host's disk (the data directory's: its SQLite stores and artifacts too). The runner measures
the workspace every ``INTERVAL_S`` (longer for a big tree: ``PAUSE_PER_ENTRY_S``) and kills
the sandbox once it holds more than the byte quota of disk blocks, ``QUOTA_ENTRIES`` entries
or ``QUOTA_DEPTH`` levels. The byte quota is the host's (``TOOLHOST_WORKSPACE_QUOTA_BYTES``,
``Settings.workspace_quota_bytes``; ``QUOTA_BYTES`` when unset): where the host can mount,
the workspace is a filesystem of that size and a write past it fails with ENOSPC, whoever
makes it; this poll is what bounds it elsewhere, and a parallel writer can pass it there
before the next measurement (D265). Counted: disk blocks, not sizes (a sparse file costs what it
stores), each inode once (hard links), everything the workspace holds (files written before
the call too).

The walk itself is the host's (``SandboxWorkspace.usage``: containment and the bounded,
fd-relative walk live there), stopping as soon as one of these quotas is passed; this module
keeps the quotas and the decision. A directory moved while the walk stands in it hides
nothing else: the walk comes down again from the root and goes on. Such a move, or a
directory swapped between its listing and the walk's way into it, makes the measurement
incomplete: one is not over the quota (the next looks again), but ``INCOMPLETE_IN_A_ROW`` in
a row are a workspace that cannot be measured, so a command that keeps moving directories
under the walk cannot keep the quota from being measured. Nor can a directory the host may
not list or search (on a host that is not root the command runs as the host's uid and can
``chmod 300`` one, then write under it): the host's walk raises. Either way the runner kills
the sandbox (``runner.UNMEASURABLE``, fail closed, D135). An entry moved between two
directories just as each is listed would be in neither listing, unseen by the walk; the
command has no clock for it: the seccomp filter refuses inotify, fanotify and dnotify, and the
walk leaves the directories' access times alone (D414). Polling a directory's own listing is
left, and cannot tell the host's walk from any other reader.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # annotations only: the spec's description imports the quotas at load
    from toolhost import WorkspaceUsage

__all__ = ["INCOMPLETE_IN_A_ROW", "INTERVAL_S", "PAUSE_PER_ENTRY_S", "QUOTA_BYTES",
           "QUOTA_DEPTH", "QUOTA_ENTRIES", "Measurable", "measure", "over_quota"]

#: Disk the workspace may use when the host's setting is unset: 1 GiB.
QUOTA_BYTES = 1024 * 1024 * 1024
#: Entries (files, directories, anything) in the workspace.
QUOTA_ENTRIES = 200_000
#: Directory levels: 2048 is what the workspace tools' 4096-byte paths can reach.
QUOTA_DEPTH = 2048
#: Seconds between two measurements, at least.
INTERVAL_S = 0.2
#: And per entry the last one counted: a walk costs a few microseconds an entry, so this keeps
#: the host's time spent measuring under about a third of the call's (no clock is read).
PAUSE_PER_ENTRY_S = 0.00002
#: Incomplete measurements in a row that make the workspace one that cannot be measured. A
#: directory moved under the walk, or swapped before it got there, costs one measurement: an
#: honest command's rename now and then never makes three in a row; a command that makes
#: every walk meet one is killed after these (about 0.6 s and their walks' time, longer for a
#: big tree).
INCOMPLETE_IN_A_ROW = 3


class Measurable(Protocol):
    """The host's workspace as far as the quota needs it (``SandboxWorkspace.usage``)."""

    def usage(self, *, max_bytes: int, max_entries: int, max_depth: int) -> WorkspaceUsage: ...


def measure(workspace: Measurable, quota_bytes: int | None = None) -> WorkspaceUsage:
    """The workspace's usage now, the host's walk stopping at the first quota passed
    (``quota_bytes``: the host's byte quota; None, ``QUOTA_BYTES``). Reads the quotas at each
    call (a test may lower one)."""
    return workspace.usage(max_bytes=QUOTA_BYTES if quota_bytes is None else quota_bytes,
                           max_entries=QUOTA_ENTRIES, max_depth=QUOTA_DEPTH)


def over_quota(usage: WorkspaceUsage, quota_bytes: int | None = None) -> str | None:
    """The quota ``usage`` passed (``bytes``, ``entries``, ``depth``), or None. An incomplete
    measurement that passed none is not over: the next one looks again (the runner counts
    them: ``INCOMPLETE_IN_A_ROW``; a walk that met a directory it may not list did not return
    one: it raised)."""
    if usage.disk_bytes > (QUOTA_BYTES if quota_bytes is None else quota_bytes):
        return "bytes"
    if usage.entries > QUOTA_ENTRIES:
        return "entries"
    if usage.depth > QUOTA_DEPTH:
        return "depth"
    return None
