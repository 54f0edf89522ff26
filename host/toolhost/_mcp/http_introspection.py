"""Opaque access tokens, asked of the issuer: OAuth 2.0 token introspection (RFC 7662).

When: ``toolhost serve --http`` with an issuer (``TOOLHOST_HTTP_ISSUER``) and introspection
credentials (``TOOLHOST_HTTP_INTROSPECTION_CLIENT_ID`` and ``..._CLIENT_SECRET``), for a
token that is not a JWT this server can verify itself. What: the token is POSTed to the
issuer's introspection endpoint (``TOOLHOST_HTTP_INTROSPECTION_URL``, or its RFC 8414
metadata's ``introspection_endpoint``) as ``token=...&token_type_hint=access_token``, this
server authenticating with HTTP Basic (RFC 7662 §2.1 requires the resource server to
authenticate), through the host's HTTP client. The answer is used only when ``active`` is
exactly ``true``, ``aud`` names this server (RFC 8707: a token issued for another resource
is refused, whatever the issuer says of it), ``iss`` (when given) is the issuer, ``exp`` and
``nbf`` (when given) hold on the host's clock, and ``sub`` is a principal. A token found
active is remembered for ``TOOLHOST_HTTP_INTROSPECTION_CACHE_S`` (default 60 s, never past
its ``exp``): a revocation at the issuer takes effect within that. An endpoint that does not
answer, or answers anything but 200 and a JSON object, refuses the token (fail closed).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from urllib.parse import quote_plus

from toolhost._composition import ToolhostError, get_logger
from toolhost._mcp.http_auth import (
    LEEWAY_S,
    Caller,
    RememberedTokens,
    bearer_caller,
    refused,
)

__all__ = ["DEFAULT_CACHE_S", "IntrospectionBusy", "IntrospectionUnavailable", "TokenIntrospector"]


class IntrospectionBusy(ToolhostError):
    """Too many requests already wait for the issuer's answer about their token: this one is
    to retry (503), not refused as if its token were bad (D331)."""


class IntrospectionUnavailable(ToolhostError):
    """The issuer did not answer about a token (an error, a timeout, an answer that is not
    JSON): no caller for a new request (fail closed), but no revocation of a stream either
    (``TokenIntrospector.recheck``, D491)."""


#: How long a token the issuer said is active is used without asking again.
DEFAULT_CACHE_S = 60.0
#: Bound on an introspection answer.
MAX_ANSWER_BYTES = 64 * 1024

#: ``post(url, form, basic_auth, limit)``: the body of a 200 answer to a form POST (the host's
#: HTTP client), at most ``limit`` bytes; raises on any other status, a longer body, any
#: failure.
Post = Callable[[str, dict[str, str], tuple[str, str] | None, int], bytes]


class TokenIntrospector:
    """Asks the issuer whether a token is active, and for whom.

    :param post: the host's form POST (no proxy, no redirect, the operator's trust roots).
    :param now: wall-clock seconds (the host's Clock) for ``exp``, ``nbf`` and the cache.
    """

    def __init__(self, *, issuer: str, audience: str, url: str, client_id: str,
                 client_secret: str, post: Post, now: Callable[[], float],
                 cache_s: float = DEFAULT_CACHE_S) -> None:
        self.issuer = issuer
        self.audience = audience
        self.url = url
        # RFC 6749 §2.3.1: each is form-urlencoded before it goes into the Basic header.
        self._credentials = (quote_plus(client_id), quote_plus(client_secret))
        self._post = post
        self._now = now
        self._cache_s = cache_s
        self._active = RememberedTokens()

    def remembered(self, token: str) -> Caller | None:
        """The caller of a token found active within the cache time: no I/O."""
        return self._active.get(token, self._now())

    def verify(self, token: str) -> Caller | None:
        """The caller an active token names, or None (the reason is logged): an issuer that
        does not answer is no caller (fail closed)."""
        try:
            return self.recheck(token)
        except IntrospectionUnavailable:
            return None

    def recheck(self, token: str) -> Caller | None:
        """``verify``, for a token already accepted (an open stream's): an issuer that does
        not answer says nothing of it.

        :raises IntrospectionUnavailable: the issuer did not answer (logged)."""
        caller = self.remembered(token)
        if caller is None:
            caller = self._introspect(token)
        return caller

    def _introspect(self, token: str) -> Caller | None:
        try:
            answer = self._post(self.url, {"token": token, "token_type_hint": "access_token"},
                                self._credentials, MAX_ANSWER_BYTES)
            claims = json.loads(answer)
            if not isinstance(claims, dict):
                raise ValueError("not a JSON object")
        except Exception as exc:
            get_logger().warning("http.auth.introspection_unavailable", url=self.url,
                                 error=type(exc).__name__)
            raise IntrospectionUnavailable(type(exc).__name__) from None
        try:
            return self._caller(token, claims)
        except Exception as exc:  # an answer of a shape no check foresaw: refused, not a 500
            return _refused("claims", error=type(exc).__name__)

    def _caller(self, token: str, claims: dict[str, Any]) -> Caller | None:
        if claims.get("active") is not True:
            return _refused("inactive")
        issuer = claims.get("iss")
        if issuer is not None and issuer != self.issuer:
            return _refused("issuer")
        audience = claims.get("aud")
        audiences = [audience] if isinstance(audience, str) else audience
        if not isinstance(audiences, list) or self.audience not in audiences:
            return _refused("audience")
        now = self._now()
        caller = bearer_caller(claims, self.issuer, now, exp_required=False)
        if isinstance(caller, str):
            return _refused(caller)
        if self._cache_s > 0:
            until = now + self._cache_s
            expires = claims.get("exp")
            if isinstance(expires, (int, float)):
                until = min(until, float(expires) + LEEWAY_S)
            self._active.put(token, caller, until)
        return caller


def _refused(reason: str, **detail: str) -> Caller | None:
    return refused("introspection", reason, **detail)
