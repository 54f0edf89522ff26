"""The ``tool_invocations`` row as a value: its states, its record, and its owner.

A row that goes ``running`` records its *owner*: the process executing it, as the store
identifies processes (``InvocationStore.owner``). A process killed mid-call leaves the row
``running`` with an owner that is gone; ``Pipeline.recover`` settles such rows, and leaves a
row whose owner is alive, or cannot be checked from here, alone (``OwnerState``).
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Mapping
from typing import Any

import attrs

from toolhost._model.errors import ToolhostError
from toolhost._model.printable import escaped

__all__ = [
    "InvocationNotFound",
    "InvocationRecord",
    "InvocationRecordDamaged",
    "InvocationState",
    "OwnerState",
    "valid_operator_directory",
]


class InvocationState(enum.Enum):
    AWAITING_APPROVAL = "awaiting_approval"
    APPROVED = "approved"
    DENIED = "denied"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"

    @property
    def final(self) -> bool:
        return self in _FINAL


_FINAL = frozenset({InvocationState.DENIED, InvocationState.SUCCEEDED, InvocationState.FAILED})


class OwnerState(enum.Enum):
    """What can be told about the process that owns a ``running`` row."""

    #: It is still running: the row is its to finish.
    ALIVE = "alive"
    #: It has exited (or the machine restarted since): nobody will finish the row.
    GONE = "gone"
    #: It cannot be checked from this process (another pid namespace; on PostgreSQL, within the
    #: grace after a server restart): left alone.
    UNKNOWN = "unknown"


class InvocationNotFound(ToolhostError, LookupError):
    """No invocation has this id."""


class InvocationRecordDamaged(ToolhostError):
    """A row changed behind the store's back so that it holds no ``InvocationRecord`` (a state
    no toolhost writes, arguments that are not JSON, a time that is not one): what a store's
    ``get`` raises for its id, and what its ``list_rows`` lists in the row's place (made, not
    raised, there), so one such row neither stops a listing nor a recovery.

    ``field`` is the first attribute, in the record's order, whose stored value alone the
    record refuses (``"record"`` when none alone is). ``tool_name`` and ``tool_version`` are
    the row's as stored when they are text, for a report that names the call.
    """

    def __init__(self, invocation_id: str, field: str, tool_name: str | None = None,
                 tool_version: str | None = None) -> None:
        # One line whatever the row holds: the id may be anything a hand edit wrote.
        super().__init__(f"invocation {escaped(invocation_id)} is damaged ({field}): its row "
                         "was changed outside toolhost; restore it from a backup")
        self.id = invocation_id
        self.field = field
        self.tool_name = tool_name
        self.tool_version = tool_version


@attrs.frozen(kw_only=True)
class InvocationRecord:
    """One ``tool_invocations`` row. Timestamps are aware UTC datetimes from the Clock."""

    id: str
    run_id: str
    principal_id: str
    scopes: tuple[str, ...]
    conversation_id: str | None = None
    tool_name: str
    tool_version: str | None
    arguments: Any
    argument_digest: str | None
    state: InvocationState
    policy: Mapping[str, str] | None = None
    approver: str | None = None
    denial_reason: str | None = None
    result_structured: Mapping[str, Any] | None = None
    result_content: str | None = None
    output_trust: str | None = None
    failure_kind: str | None = None
    reason_code: str | None = None
    retryable: bool | None = None
    failure_detail: Mapping[str, Any] | None = None
    artifact_refs: tuple[Mapping[str, Any], ...] = ()
    created_at: dt.datetime
    started_at: dt.datetime | None = None
    finished_at: dt.datetime | None = None
    decided_at: dt.datetime | None = None
    #: The process that took the row to ``running`` (``InvocationStore.owner``), kept after
    #: it finishes; None for a row that never ran (or ran before owners were recorded).
    owner: Mapping[str, Any] | None = None
    #: The run's deadline (``Run.deadline_at``): an approval after it does not run the call.
    run_deadline: dt.datetime | None = None
    #: The files this call exported or generated (their ``ArtifactRef`` JSON), attached to the
    #: run's reply; an answer replayed from the row carries them again.
    attachments: tuple[Mapping[str, Any], ...] = ()
    #: The user's own words a call of a ``UserWords`` tool ran (or will run, once approved)
    #: with: the one input at USER trust, kept so an approval elsewhere runs with it too.
    user_turn: str | None = None
    #: The operator's directory the call's run had when the call paused (``--workspace DIR``,
    #: ``TOOLHOST_MCP_WORKSPACE``): ``{"host": hostname, "path": absolute resolved path,
    #: "device": st_dev, "inode": st_ino, "boot": boot id}`` (the last three when they could
    #: be read; ``valid_operator_directory``). An approval on that host after the run ended
    #: runs the call there, once the directory is still that one and passes an operator's
    #: workspace's checks again; None for every other row.
    operator_directory: Mapping[str, Any] | None = None


#: ``operator_directory``'s optional members and the type each holds.
_DIRECTORY_IDENTITY = {"device": int, "inode": int, "boot": str}


def valid_operator_directory(value: Any) -> Mapping[str, Any]:
    """``value`` when it is what a store writes for ``InvocationRecord.operator_directory``: an
    object with ``host`` (text) and ``path`` (absolute text, no NUL), and ``device``/``inode``
    (integers) and ``boot`` (text) where given. Anything else names no directory an approval
    could run the call in, so the row is damaged, not a row without a directory (D415).

    :raises TypeError: it is not.
    """
    if type(value) is not dict:
        raise TypeError("not a JSON object")
    host, path = value.get("host"), value.get("path")
    if type(host) is not str or type(path) is not str:
        raise TypeError("host and path are not text")
    if not path.startswith("/") or "\0" in path:
        raise TypeError("path is not absolute")
    for name, kind in _DIRECTORY_IDENTITY.items():
        if name in value and type(value[name]) is not kind:
            raise TypeError(f"{name} is not {kind.__name__}")
    return value

