"""The InvocationStore port. Any backend passes ``toolhost.testing.InvocationStoreContract``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from toolhost._model.invocations import InvocationRecord, InvocationState

__all__ = [
    "InvocationStore",
]


class InvocationStore(Protocol):
    """The port. Any backend passes ``toolhost.testing.InvocationStoreContract``."""

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

    def list(
        self,
        *,
        state: InvocationState | None = None,
        run_id: str | None = None,
        tool_name: str | None = None,
        tool_version: str | None = None,
        argument_digest: str | None = None,
    ) -> list[InvocationRecord]:
        """Rows, oldest first (created_at, then id), filtered by every criterion given."""

    def count(self) -> int:
        """How many rows there are."""

