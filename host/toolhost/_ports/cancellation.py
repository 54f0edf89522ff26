"""The Cancellation port: a call's cancellation as its body sees it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

__all__ = [
    "Cancellation",
]

if TYPE_CHECKING:

    pass

class Cancellation(Protocol):
    """This call's cancellation: set when the call's deadline passes and when its run is
    cancelled. A sync body polls ``cancelled`` or blocks in ``wait``; a body that started a
    process group kills it when this is set."""

    @property
    def cancelled(self) -> bool:
        """Whether the call has been cancelled."""
        ...

    def wait(self, timeout: float | None = None) -> bool:
        """Block until cancelled or ``timeout`` seconds pass; True if cancelled."""
        ...

    def add_callback(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Run ``callback`` (from any thread) on cancellation, at once if already cancelled;
        returns a function that removes it."""
        ...

