"""A browser's login to the inbox: a signed cookie, checked again at every request (D314).

A person logs in with a token of theirs (a static token, or one of the issuer's; to decide,
one with ``approvals.decide``, which the token their MCP client holds never has); the cookie
then carries who they are, how they authenticated, until when, and a
random nonce, signed with HMAC-SHA256 under the host's inbox secret. Nothing is stored for a
login, so a login made on one host of a record is good on every host that shares the secret
(``TOOLHOST_HTTP_UI_SECRET``); a logout is stored, with the record, so the logged-out cookie
(and any copy of it) is refused by every host of the record (D324). A token-file login is
looked up in the file again at each request (by the token's SHA-256, which the cookie holds
and the file stores): a token revoked or given other scopes ends or changes its logins at
once. An issuer's login lasts at most as long as its token did. A cookie is only ever a login
this host's settings could have made: a token-file one needs the token file, an issuer's the
same issuer configured now.

The CSRF token of a login is an HMAC of its nonce: a page that can read it is one the host
served to that login, and it changes with every login. Each kind of value is signed with a key
of its own, derived from the secret (``HMAC(secret, purpose)``).
"""

from __future__ import annotations

import base64
import binascii
import collections
import hashlib
import hmac
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import attrs

from toolhost import Principal
from toolhost._mcp.http_auth import Caller, TokenFile, token_digest

if TYPE_CHECKING:
    from toolhost._composition import EndedLogins

__all__ = ["ADMIN_SCOPE", "DECIDE_SCOPE", "FLOW_S", "LOGIN_S", "Login", "Logins",
           "code_challenge"]

#: How long a browser login lasts.
LOGIN_S: Final = 8 * 3600
#: Logins one principal may make on this host in any hour (D332): each logout keeps a row with
#: the record until the login would have expired, so logins are what bounds those rows.
LOGINS_PER_HOUR: Final = 30
#: How far apart the clocks of a record's hosts may be for a logout to hold on each of them
#: until the login expires on its own (D324).
CLOCK_SKEW_S: Final = 3600
#: How long a login through the issuer may take, from the inbox to the issuer and back.
FLOW_S: Final = 600
#: The scope that shows and decides every principal's waiting calls, not only one's own.
ADMIN_SCOPE: Final = "approvals.admin"
#: The scope that decides one's own calls in the inbox. Never give it to a token an MCP
#: client holds: the client could then approve its own calls (what TOOLHOST_MCP_ELICITATION
#: =off exists to prevent); a person logs in to the inbox with a token of their own for it.
DECIDE_SCOPE: Final = "approvals.decide"
_TOKEN_FILE: Final = "token-file"
#: What each key derived from the secret signs: the login cookie, its forms' CSRF tokens, the
#: issuer flow's cookie, and the login form's cookie and CSRF token.
_PURPOSES: Final = (b"login", b"csrf", b"flow", b"before", b"login-csrf")


@attrs.frozen
class Login:
    """Who a request of the inbox acts for, and how (a cookie, or a bearer token)."""

    principal: Principal
    #: The login's nonce (a cookie's); None for a request that sent a bearer token, which
    #: needs no CSRF token: a browser never sends one on its own.
    nonce: str | None = None
    #: When the cookie expires (seconds since the epoch); None for a bearer token.
    expires: float | None = None

    @property
    def admin(self) -> bool:
        return ADMIN_SCOPE in self.principal.scopes

    @property
    def whose(self) -> str | None:
        """Whose calls this login reads: its principal's, or everyone's (None) for an admin."""
        return None if self.admin else self.principal.id

    def may_see(self, principal_id: str) -> bool:
        """Whether this login may see a call of ``principal_id``."""
        return self.admin or principal_id == self.principal.id

    def may_decide(self, principal_id: str) -> bool:
        """Whether this login may approve or deny a call of ``principal_id``: a browser's
        login (never a bearer header: that is how an agent's client would ask) with
        ``approvals.decide`` for one's own calls, or ``approvals.admin`` for anyone's."""
        if self.nonce is None or not self.may_see(principal_id):
            return False
        return self.admin or DECIDE_SCOPE in self.principal.scopes


class Logins:
    """Issues and reads login cookies."""

    def __init__(self, secret: bytes, tokens: TokenFile | None,
                 now: Callable[[], float], new_nonce: Callable[[], str],
                 ended: EndedLogins | None = None, *, issuer: str | None = None) -> None:
        # One key per purpose: the cookies anyone gets (the login form's, a flow's) are then
        # no sample of the key that signs logins.
        self._keys = {purpose: hmac.new(secret, b"toolhost inbox " + purpose,
                                        hashlib.sha256).digest() for purpose in _PURPOSES}
        self._tokens = tokens
        #: The issuer configured (``Caller.by`` of its logins); None: none is.
        self._issuer = issuer
        self._now = now
        #: The logins logged out of, kept with the record (D324); None: logging out clears
        #: the browser's cookie only.
        self._ended = ended
        #: Random ids come from the composition root (the system clock adapter), the one
        #: place that reads ambient state.
        self._new_nonce = new_nonce
        #: Each principal's logins of the last hour here, oldest first.
        self._recent: dict[str, collections.deque[float]] = {}

    def admit(self, principal_id: str) -> bool:
        """Whether ``principal_id`` may log in now (at most LOGINS_PER_HOUR in any hour on
        this host); counted when it may."""
        now = self._now()
        recent = self._recent.setdefault(principal_id, collections.deque())
        while recent and recent[0] <= now - 3600:
            recent.popleft()
        if len(recent) >= LOGINS_PER_HOUR:
            return False
        recent.append(now)
        return True

    def issue(self, caller: Caller, token: str) -> str | None:
        """The cookie's value for a login with ``token``, which verified as ``caller``; None
        for an issuer's token that does not say when it expires (a login cannot outlast what
        it cannot see)."""
        expires = self._now() + LOGIN_S
        if caller.by != _TOKEN_FILE:
            if caller.expires is None:
                return None
            expires = min(expires, caller.expires)
        return self._sealed(b"login", expires, {
            "p": caller.principal.id, "s": sorted(caller.principal.scopes), "b": caller.by,
            # A token-file login keeps the token's digest (what the file stores), never it.
            "d": token_digest(token) if caller.by == _TOKEN_FILE else None,
            "n": self._new_nonce()})

    def read(self, value: str | None) -> Login | None:
        """The login a cookie's value carries, if its signature holds, it has not expired and
        it is one these settings could make: a token-file login whose token is still in the
        file, or a login through the issuer configured now."""
        payload = self._opened(b"login", value)
        if payload is None:
            return None
        try:
            principal, scopes = str(payload["p"]), frozenset(map(str, payload["s"]))
            nonce, digest, by = str(payload["n"]), payload["d"], payload["b"]
        except (KeyError, TypeError):  # not what issue wrote
            return None
        # Checked before the record is asked: a login of no configured issuer (one removed or
        # changed since) or of no token file is none, whatever its signature says.
        if by == _TOKEN_FILE:
            held = (self._tokens.holder_of(str(digest))
                    if self._tokens is not None and digest is not None else None)
            if held is None or held.principal.id != principal:
                return None
            principal_now = held.principal
        elif self._issuer is not None and by == self._issuer and digest is None:
            principal_now = Principal(principal, scopes)
        else:
            return None
        if self._was_ended(nonce):
            return None  # logged out of: a copy of the cookie is no login either
        return Login(principal_now, nonce, float(payload["e"]))

    def end(self, login: Login) -> None:
        """Log ``login`` out: its cookie, wherever it is copied, is refused from now on, on
        every host of the record (where the record keeps ended logins)."""
        if self._ended is not None and login.nonce is not None and login.expires is not None:
            # Forgotten an hour after its expiry, not at it: a host whose clock runs behind
            # this one's still takes the cookie until its own clock says it expired.
            self._ended.end_login(login.nonce, login.expires, self._now() - CLOCK_SKEW_S)

    def current(self, login: Login) -> bool:
        """Whether ``login`` was not logged out of since it was read (asked again before a
        decision, whose form may have taken its sender's time to arrive)."""
        return login.nonce is None or not self._was_ended(login.nonce)

    def _was_ended(self, nonce: str) -> bool:
        """Whether the record says the login ``nonce`` was logged out of (never, without
        ended logins kept)."""
        return self._ended is not None and self._ended.login_ended(nonce)

    def flow(self) -> tuple[str, str, str]:
        """A new login through the issuer: its ``state``, its PKCE ``code_verifier`` (64 hex
        digits, within RFC 7636's 43 to 128 unreserved characters) and the cookie that keeps
        both on the browser until the issuer sends it back (FLOW_S)."""
        state, verifier = self._new_nonce(), self._new_nonce() + self._new_nonce()
        cookie = self._sealed(b"flow", self._now() + FLOW_S, {"s": state, "v": verifier})
        return state, verifier, cookie

    def read_flow(self, value: str | None, state: str | None) -> str | None:
        """The code verifier of the flow whose cookie is ``value``, if it is signed, current
        and ``state`` is the one it began with (what the issuer sent back); else None."""
        payload = self._opened(b"flow", value)
        began, verifier = (payload.get("s"), payload.get("v")) if payload else (None, None)
        if not (state and isinstance(began, str) and isinstance(verifier, str)
                and _same(state, began)):
            return None
        return verifier

    def before_login(self) -> tuple[str, str]:
        """The login form's CSRF token, and the cookie that must come back with it (a login
        is a state change too: another site must not log a browser in as someone else)."""
        cookie = self._sealed(b"before", self._now() + FLOW_S, {"n": self._new_nonce()})
        return self._mac(b"login-csrf", cookie), cookie

    def before_login_holds(self, cookie: str | None, presented: str | None) -> bool:
        """Whether a login form's CSRF token is the one its cookie was issued with, in time."""
        return (self._opened(b"before", cookie) is not None and presented is not None
                and cookie is not None and _same(presented, self._mac(b"login-csrf", cookie)))

    def _sealed(self, purpose: bytes, expires: float, payload: dict[str, Any]) -> str:
        """``payload`` and its expiry, signed for one ``purpose`` (a cookie's value)."""
        body = _b64(json.dumps({**payload, "e": int(expires)}, separators=(",", ":")).encode())
        return f"{body}.{self._mac(purpose, body)}"

    def _opened(self, purpose: bytes, value: str | None) -> dict[str, Any] | None:
        """What ``_sealed`` signed for ``purpose``, if the signature holds and it has not
        expired; None for anything else."""
        if not value or value.count(".") != 1:
            return None
        body, mac = value.split(".")
        if not _same(mac, self._mac(purpose, body)):
            return None
        try:
            payload = json.loads(_unb64(body))
        except (ValueError, binascii.Error):
            return None
        if not isinstance(payload, dict):
            return None
        expires = payload.get("e")
        if not isinstance(expires, int) or expires <= self._now():
            return None
        return dict(payload)

    def csrf(self, login: Login) -> str:
        """The CSRF token every state-changing form of ``login`` carries."""
        return self._mac(b"csrf", login.nonce or "")

    def csrf_holds(self, login: Login, presented: str | None) -> bool:
        if login.nonce is None:
            return True  # a bearer token: not a browser's ambient credential
        return presented is not None and _same(presented, self.csrf(login))

    def _mac(self, purpose: bytes, text: str) -> str:
        return _b64(hmac.new(self._keys[purpose], text.encode(), hashlib.sha256).digest())


def _same(presented: str, expected: str) -> bool:
    """Constant-time equality of a string from outside with ours, whatever it holds
    (``hmac.compare_digest`` refuses a ``str`` that is not ASCII with a TypeError)."""
    return hmac.compare_digest(presented.encode("utf-8", "surrogatepass"),
                               expected.encode("utf-8", "surrogatepass"))


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def code_challenge(verifier: str) -> str:
    """RFC 7636's S256 challenge of a code verifier."""
    return _b64(hashlib.sha256(verifier.encode("ascii")).digest())
