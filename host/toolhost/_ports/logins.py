"""The EndedLogins port: the approvals inbox's logins ended before they expire.

A login cookie is signed and stateless (D314), so a person's logout cleared it from their
browser only: a copy (a shared machine, a proxy's log) stayed good until it expired. The
record's store keeps the logins ended early, so every host sharing the record refuses them
(D324). Optional: a store without it leaves logins stateless, as before (``getattr``).
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["EndedLogins"]


class EndedLogins(Protocol):
    def end_login(self, nonce: str, expires: float, now: float) -> None:
        """The login whose nonce is ``nonce`` is over. It is kept until ``expires`` (its
        cookie's expiry, seconds since the epoch: after it the cookie is refused anyway);
        those that expired before ``now`` are forgotten."""

    def login_ended(self, nonce: str) -> bool:
        """Whether the login whose nonce is ``nonce`` was ended."""
