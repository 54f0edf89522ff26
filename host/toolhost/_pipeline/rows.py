"""The rows of the record in one state, a damaged row among them as what is damaged in it
(D415): what recovery and ``toolhost pending`` read, from a store with or without the port's
optional ``list_rows``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeGuard

if TYPE_CHECKING:
    from toolhost._model.invocations import (
        InvocationRecord,
        InvocationRecordDamaged,
        InvocationState,
    )
    from toolhost._ports.invocations import InvocationStore, RowListingStore

__all__ = ["lists_rows", "rows_in"]


def lists_rows(store: InvocationStore) -> TypeGuard[RowListingStore]:
    """Whether ``store`` lists damaged rows (``RowListingStore.list_rows``, optional on the
    port). Asked of the attribute, never ``isinstance``: from Python 3.12 a runtime Protocol
    check skips ``__getattr__``, so a store behind a delegating wrapper would read as one
    without it, and its damaged rows would go unreported."""
    return callable(getattr(store, "list_rows", None))


def rows_in(store: InvocationStore,
            state: InvocationState) -> Sequence[InvocationRecord | InvocationRecordDamaged]:
    """The rows in ``state``, oldest first, a damaged one as what is damaged in it (recovery,
    ``pending``): the store's ``list_rows``, else its ``list``, whose records are all a
    backend written against the port before ``list_rows`` can give."""
    if lists_rows(store):
        return store.list_rows(state=state)
    return store.list(state=state)
