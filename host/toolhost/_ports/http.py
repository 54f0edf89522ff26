"""The HTTP clients port: what ``Services.http`` asks the host's client factory for."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

__all__ = [
    "HttpClients",
]

if TYPE_CHECKING:
    import httpx


class HttpClients(Protocol):
    """Builds httpx clients with the host's one policy (``toolhost._adapters.http``)."""

    def client(self, *, timeout: float, headers: Mapping[str, str] | None = None) -> httpx.Client:
        ...

    def async_client(
        self, *, timeout: float, headers: Mapping[str, str] | None = None
    ) -> httpx.AsyncClient:
        ...

