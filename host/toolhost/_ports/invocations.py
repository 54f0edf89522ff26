"""The InvocationStore port. Any backend passes ``toolhost.testing.InvocationStoreContract``."""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from toolhost._model.invocations import (
    InvocationRecord,
    InvocationRecordDamaged,
    InvocationState,
    OwnerState,
)

__all__ = [
    "GroupCommitStore",
    "InvocationStore",
    "PendingCall",
    "RowListingStore",
]


class PendingCall(Protocol):
    """One invocation awaiting approval, as ``toolhost pending`` lists it: the columns the
    listing prints, in the text they are stored as, so a page is read without building whole
    records (26 columns, four of them JSON). A backend returns whatever object has these
    read-only attributes (a named tuple of its row, say)."""

    @property
    def id(self) -> str: ...

    @property
    def run_id(self) -> str: ...

    @property
    def tool_name(self) -> str: ...

    @property
    def tool_version(self) -> str | None: ...

    @property
    def argument_digest(self) -> str | None: ...

    @property
    def created(self) -> str:
        """``created_at`` as ISO 8601 text with six fractional digits and its offset
        (``2026-07-25T13:03:11.000000+00:00``)."""

    @property
    def arguments_json(self) -> str:
        """The arguments as canonical JSON text (``toolhost._model.digest.canonical_text``)."""

    @property
    def policy_json(self) -> str | None:
        """The policy decision as canonical JSON text, or None when none was recorded."""


class InvocationStore(Protocol):
    """The port. Any backend passes ``toolhost.testing.InvocationStoreContract``.

    Besides the rows, a backend says who owns a ``running`` row: ``owner`` is this process as
    the backend identifies it (recorded on the row as it goes ``running``), and
    ``owner_state`` tells a live owner from a gone one, as the backend is shared: the SQLite
    file by processes of one machine, a server database by its sessions.

    ``result_structured`` and ``result_content`` are one output: ``transition`` and
    ``settle`` set both or neither (ValueError otherwise), so a backend may store the
    structured result's copy of the content once, and a large output by reference.
    """

    def insert(self, record: InvocationRecord) -> None:
        """Store a new row. A second insert of the same id raises ValueError."""

    def get(self, invocation_id: str) -> InvocationRecord:
        """The row, or InvocationNotFound."""

    def transition(
        self,
        invocation_id: str,
        *,
        expected: Iterable[InvocationState],
        to: InvocationState,
        **fields: Any,
    ) -> bool:
        """Move the row to ``to`` and set ``fields`` only if its state is one of ``expected``.

        :return: True when this call made the change, False when the row was in another state.
        """

    def settle(
        self,
        invocation_id: str,
        *,
        from_owner: Mapping[str, Any] | None,
        to: InvocationState,
        **fields: Any,
    ) -> bool:
        """Move a ``running`` row whose owner is exactly ``from_owner`` (None: no owner was
        recorded) to ``to``, setting ``fields``: recovery's compare-and-set, so two processes
        settling the same row cannot both win, nor settle a row another has taken over.

        :return: True when this call made the change.
        """

    def list(
        self,
        *,
        state: InvocationState | None = None,
        run_id: str | None = None,
        tool_name: str | None = None,
        tool_version: str | None = None,
        argument_digest: str | None = None,
        limit: int | None = None,
        after: str | None = None,
    ) -> list[InvocationRecord]:
        """Rows, oldest first (created_at, then id), filtered by every criterion given; at
        most ``limit`` of them when given; with ``after`` (an id), only the rows that come
        after that row in this order (keyset paging: the next page starts after the last id
        of this one). InvocationNotFound when no row has the id ``after``."""

    def pending(self, *, limit: int, after: str | None = None,
                principal_id: str | None = None) -> Sequence[PendingCall]:
        """The rows awaiting approval as ``list(state=AWAITING_APPROVAL, limit=limit,
        after=after)`` returns them (same rows, same order, same paging and the same
        InvocationNotFound), each as a ``PendingCall``: what ``toolhost pending`` prints.
        With ``principal_id``, only that principal's calls."""

    def history(self, *, limit: int, before: str | None = None,
                principal_id: str | None = None, tool_name: str | None = None,
                state: InvocationState | None = None, reason_code: str | None = None,
                since: datetime.datetime | None = None) -> Sequence[InvocationRecord]:
        """Rows newest first (created_at, then id, both descending), filtered by every
        criterion given (``since``: created at or after it), at most ``limit``; with
        ``before`` (an id), only the rows that come after that row in this order (the next
        page of the approvals inbox's history). InvocationNotFound when no row has the id
        ``before``."""

    def count(self) -> int:
        """How many rows there are."""

    def owner(self) -> Mapping[str, Any]:
        """This process, as a row's ``owner`` records it: JSON-ready, the same mapping for
        every call in one process."""

    def owner_state(self, owner: Mapping[str, Any] | None) -> OwnerState:
        """Whether the process ``owner`` names is alive. A live process is never reported
        GONE (a reused pid included); one that cannot be checked is UNKNOWN; None (a row from
        before owners were recorded) is GONE."""


class GroupCommitStore(InvocationStore, Protocol):
    """A store that can commit several calls' writes together (the pipeline's group commit).

    Optional: the pipeline groups writes only when its store has ``transaction``, and a store
    without it commits each write alone, as before (``getattr``, so a backend written against
    the port before this existed keeps working unchanged).
    """

    def transaction(self) -> AbstractContextManager[None]:
        """One transaction for the writes (``insert``, ``transition``, ``settle``) this thread
        makes on the store inside the ``with``: each runs as it would alone and returns its
        own result, seeing the ones before it, and all are committed together when the block
        ends. An exception inside (a write's included) rolls every one of them back, and
        propagates; so does a COMMIT that fails. A COMMIT whose reply is lost (the
        connection dropped) propagates only if the transaction did not commit, or the
        backend cannot tell: one that committed ends the block as a COMMIT that answered,
        since the caller makes every write again alone after an exception. A failed
        ROLLBACK never leaves the store inside the transaction. Not nested; other threads'
        calls wait or use other connections, never join it."""


class RowListingStore(InvocationStore, Protocol):
    """A store that lists a damaged row as what is damaged in it (both first-party adapters).

    Optional, as ``GroupCommitStore`` is: a method added to ``InvocationStore`` itself would
    leave a backend written against the port before it (a structural one: nothing subclasses
    the port) failing its type check and, once called, raising AttributeError; so a caller
    asks whether the store has ``list_rows`` and otherwise reads ``list``, whose records are
    all such a backend can give (its damaged rows are its own to report)."""

    def list_rows(
        self,
        *,
        state: InvocationState | None = None,
        run_id: str | None = None,
        tool_name: str | None = None,
        tool_version: str | None = None,
        argument_digest: str | None = None,
        limit: int | None = None,
        after: str | None = None,
    ) -> Sequence[InvocationRecord | InvocationRecordDamaged]:
        """``list``'s page with an ``InvocationRecordDamaged`` in each damaged row's place
        (made, not raised; ``list`` is this page without them, and ``limit`` counts rows
        either way): what recovery and the operator's listings read, so one row changed
        behind the store's back is reported, never fatal, and strands no other."""

