"""The InvocationStore port. Any backend passes ``toolhost.testing.InvocationStoreContract``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from toolhost._model.invocations import InvocationRecord, InvocationState, OwnerState

__all__ = [
    "InvocationStore",
]


class InvocationStore(Protocol):
    """The port. Any backend passes ``toolhost.testing.InvocationStoreContract``.

    Besides the rows, a backend says who owns a ``running`` row: ``owner`` is this process as
    the backend identifies it (recorded on the row as it goes ``running``), and
    ``owner_state`` tells a live owner from a gone one, as the backend is shared: the SQLite
    file by processes of one machine, a server database by its sessions.
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
    ) -> list[InvocationRecord]:
        """Rows, oldest first (created_at, then id), filtered by every criterion given; at
        most ``limit`` of them when given."""

    def count(self) -> int:
        """How many rows there are."""

    def owner(self) -> Mapping[str, Any]:
        """This process, as a row's ``owner`` records it: JSON-ready, the same mapping for
        every call in one process."""

    def owner_state(self, owner: Mapping[str, Any] | None) -> OwnerState:
        """Whether the process ``owner`` names is alive. A live process is never reported
        GONE (a reused pid included); one that cannot be checked is UNKNOWN; None (a row from
        before owners were recorded) is GONE."""
