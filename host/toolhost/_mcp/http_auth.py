"""Who calls over HTTP: the bearer token of a request, as a principal and its scopes.

When: every request to ``toolhost serve --http`` but the health routes. What: two ways, one
port (D230), tried in this order:

- **A static token file** (``TOOLHOST_HTTP_TOKENS_FILE``), for a small team without an
  authorization server: TOML ``[[token]]`` tables of ``sha256`` (the hex digest of the token:
  the token itself is never stored), ``principal`` and ``scopes``. The file is read again when
  it changes (a revoked token is refused from the next request); a file that becomes unusable
  keeps the last good one in force and says so in the log. Every entry's digest is compared
  in constant time, all of them, whichever matches.
- **OAuth 2.1 resource server** (``TOOLHOST_HTTP_ISSUER``, ``TOOLHOST_HTTP_AUDIENCE``,
  ``TOOLHOST_HTTP_JWKS_URL``): a JWT signed by a key of the issuer's JWKS (fetched through
  the host's HTTP client, so ``TOOLHOST_CA_BUNDLE`` and the no-proxy, no-redirect rules apply;
  cached, and fetched again for a key id it does not have, at most every 30 s), with an
  asymmetric algorithm only (never ``none``, never an HMAC a public key could be used as the
  secret of), ``iss`` the issuer, ``aud`` holding the audience (RFC 8707: this server),
  ``exp`` and ``nbf`` checked against the host's clock with 30 s of leeway. The principal is
  ``sub``, the scopes ``scope`` (space-separated). The same issuer's opaque tokens are asked
  of its RFC 7662 endpoint when the operator gives this server credentials there
  (``http_introspection``).

Why PyJWT (the ``toolhost-core[oauth]`` extra): maintained by the project that defined the
format's Python use, it refuses to decode without an explicit algorithm list (so ``alg: none``
and algorithm confusion are the caller's choice, and this one never makes them), checks
signatures through ``cryptography`` (constant-time), and parses a JWKS. Everything time-based
is done here against the host's clock instead of PyJWT's reading of the system time.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import os
import threading
import tomllib
from collections.abc import Callable, Container, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeGuard

import attrs

from toolhost import Principal
from toolhost._composition import UnreadableFile, UsageError, get_logger, read_small_file

__all__ = ["AuthConfigError", "Caller", "JwtVerifier", "RememberedTokens", "TokenFile",
           "bearer_caller", "bearer_token", "caller_of", "refused", "time_claims_refusal",
           "token_digest"]

#: Seconds of clock difference a token's ``exp`` and ``nbf`` are allowed.
LEEWAY_S = 30.0
#: Asymmetric algorithms only: a JWKS holds public keys, and an HMAC "verified" with one would
#: take a key anyone can read as its secret.
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512",
              "EdDSA")
#: How long a fetched JWKS is used before it is fetched again, and how soon after a fetch an
#: unknown key id may cause another.
JWKS_TTL_S = 600.0
JWKS_REFETCH_S = 30.0
#: Bound on what a JWKS document may be.
_JWKS_MAX_BYTES = 1024 * 1024
#: Tokens verified and remembered (by digest) until they expire: a client sends the same one
#: with every request, and its signature cannot change.
_VERIFIED_MAX = 4096


class AuthConfigError(UsageError, ValueError):
    """An authentication setting or file the server cannot use; the message is one line."""


@attrs.frozen
class Caller:
    """Who a request acts for: the principal its token names, with the token's scopes."""

    principal: Principal
    #: How the caller authenticated: ``token-file`` or the issuer's URL.
    by: str
    #: When the credential stops being valid (an issuer's ``exp``, wall-clock seconds); None:
    #: not said (a static token lasts until it leaves the file).
    expires: float | None = None

    @property
    def fingerprint(self) -> str:
        """What tells this credential's runs from another's of the same principal: how it
        authenticated and its scopes (a read-only token never shares a full token's run)."""
        text = json.dumps([self.by, sorted(self.principal.scopes)], ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


# ---------------------------------------------------------------------------- the token file


@attrs.frozen
class _Entry:
    digest: str
    principal: str
    scopes: frozenset[str]


def _entries(path: Path, setting: str) -> tuple[_Entry, ...]:
    """The file's tokens. :raises AuthConfigError: one line naming the file and what is wrong
    (``setting``: how its setting is named, when the file itself cannot be read)."""
    text = _read_small_file(path, setting)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise AuthConfigError(f"{path}: not TOML ({exc})") from None
    unknown = sorted(set(data) - {"token"})
    if unknown:
        raise AuthConfigError(f"{path}: unknown key {unknown[0]!r} (only [[token]] tables)")
    tables = data.get("token", [])
    if not isinstance(tables, list):
        raise AuthConfigError(f"{path}: token must be an array of tables ([[token]])")
    entries: list[_Entry] = []
    numbers: dict[str, int] = {}  # each digest's entry number, for a duplicate's refusal
    for number, table in enumerate(tables, start=1):
        where = f"{path}: token {number}"
        if not isinstance(table, dict):
            raise AuthConfigError(f"{where} is not a table")
        extra = sorted(set(table) - {"sha256", "principal", "scopes"})
        if extra:
            raise AuthConfigError(f"{where}: unknown key {extra[0]!r}")
        digest, principal, scopes = table.get("sha256"), table.get("principal"), \
            table.get("scopes", [])
        if not (isinstance(digest, str) and len(digest) == 64
                and all(c in "0123456789abcdef" for c in digest)):
            raise AuthConfigError(f"{where}: sha256 must be the token's hex digest (64 lowercase "
                                  "hex digits), never the token itself")
        if not isinstance(principal, str) or not principal.strip():
            raise AuthConfigError(f"{where}: principal must be a non-empty string")
        if not isinstance(scopes, list) or not all(isinstance(s, str) for s in scopes):
            raise AuthConfigError(f"{where}: scopes must be a list of strings")
        # One token, one holder: a copied entry renamed but left with another's digest would
        # otherwise silently make that person's token someone else's (the first one wins).
        # Named by position and principal, never by digest: no log shows one (a short
        # token could be guessed back from it). "tokens 2 and 3": the log's redaction takes
        # "token 3" for a credential.
        twin = numbers.setdefault(digest, number)
        if twin != number:
            raise AuthConfigError(
                f"{path}: tokens {twin} (principal {entries[twin - 1].principal!r}) and {number} "
                f"(principal {principal!r}) have the same sha256 (each token may be in the "
                "file once)")
        entries.append(_Entry(digest, principal, frozenset(scopes)))
    return tuple(entries)


#: The largest token file read (a few thousand tokens).
_TOKENS_MAX_BYTES = 1024 * 1024


def _read_small_file(path: Path, setting: str) -> str:
    """A regular file's text, at most _TOKENS_MAX_BYTES: never a FIFO (opening one would
    block), a device (``/dev/zero`` is endless) or a directory, whatever a link points at."""
    named = f"{setting} {str(path)!r}"
    try:
        data = read_small_file(path, _TOKENS_MAX_BYTES)
    except UnreadableFile as exc:
        if exc.error is not None:
            raise AuthConfigError(f"{named} cannot be read ({type(exc.error).__name__})"
                                  ) from None
        raise AuthConfigError(f"{named} is over 1 MiB" if exc.too_large
                              else f"{named} is not a regular file") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise AuthConfigError(f"{named} is not UTF-8") from None


class TokenFile:
    """The static tokens of ``TOOLHOST_HTTP_TOKENS_FILE``, read again when the file changes.

    ``named``: how a refusal of the file begins, ``Settings.named`` of its setting (the
    variable, or ``PATH:LINE: [http] tokens_file:`` when toolhost.toml set it).

    :raises AuthConfigError: at construction, for a file that cannot be used.
    """

    def __init__(self, path: Path, named: str = "TOOLHOST_HTTP_TOKENS_FILE") -> None:
        self.path = path
        self._named = named
        self._entries = _entries(path, named)
        self._seen = self._stat()
        self._lock = threading.Lock()

    def _stat(self) -> tuple[int, int, int, int] | None:
        try:
            info = os.stat(self.path)
        except OSError:
            return None
        return (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)

    def changed(self) -> bool:
        """Whether the file changed since it was read (the next ``verify`` reads it: a
        caller on an event loop does that off the loop)."""
        return self._stat() != self._seen

    def _current(self) -> tuple[_Entry, ...]:
        seen = self._stat()
        if seen != self._seen:
            with self._lock:
                if seen != self._seen:
                    self._seen = seen
                    try:
                        self._entries = _entries(self.path, self._named)
                        get_logger().info("http.auth.tokens_reloaded", tokens=len(self._entries))
                    except AuthConfigError as exc:
                        # The last good tokens stay in force: a half-written file must not
                        # open the server, nor lock everyone out.
                        get_logger().warning("http.auth.tokens_unusable", problem=str(exc))
        return self._entries

    def verify(self, token: str) -> Caller | None:
        return self.holder_of(token_digest(token))

    def holder_of(self, digest: str) -> Caller | None:
        """Who the token whose SHA-256 is ``digest`` is now, if the file still holds it: how a
        browser login made with that token is checked at each request (a revoked token ends
        its logins)."""
        found = None
        for entry in self._current():  # every entry compared, in constant time
            if hmac.compare_digest(digest, entry.digest) and found is None:
                found = entry
        if found is None:
            return None
        return Caller(Principal(found.principal, found.scopes), "token-file")


def token_digest(token: str) -> str:
    """The hex SHA-256 of a token: what the token file stores, and a login remembers."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


# ---------------------------------------------------------------------------- remembered


class RememberedTokens:
    """Tokens found valid, by digest, each until a time on the host's clock: a client sends
    the same token with every request, and what it was found to be cannot change until
    then. Bounded (the oldest is forgotten first); each entry has a tag (a JWT's key id) so
    that what a withdrawn key verified can be forgotten with it."""

    def __init__(self, limit: int = _VERIFIED_MAX) -> None:
        self._limit = limit
        self._lock = threading.Lock()
        self._entries: dict[bytes, tuple[Caller, float, str]] = {}

    def get(self, token: str, now: float) -> Caller | None:
        found = self._entries.get(_digest(token))
        if found is None or found[1] <= now:
            return None
        return found[0]

    def put(self, token: str, caller: Caller, until: float, tag: str = "") -> None:
        with self._lock:
            if len(self._entries) >= self._limit:
                self._entries.pop(next(iter(self._entries)))  # the oldest remembered
            self._entries[_digest(token)] = (caller, until, tag)

    def keep_tags(self, tags: Container[str]) -> None:
        """Forget every token remembered under a tag not in ``tags``."""
        with self._lock:
            self._entries = {d: v for d, v in self._entries.items() if v[2] in tags}


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


def time_claims_refusal(claims: Mapping[str, Any], now: float, *,
                        exp_required: bool) -> str | None:
    """Why ``exp`` and ``nbf`` make a token unusable at ``now`` (LEEWAY_S either way), or
    None: ``expired``, ``not_yet_valid``."""
    expires, not_before = claims.get("exp"), claims.get("nbf")
    if (expires is not None or exp_required) and (
            not _number(expires) or expires + LEEWAY_S <= now):
        return "expired"
    if not_before is not None and (not _number(not_before) or not_before - LEEWAY_S > now):
        return "not_yet_valid"
    return None


def _number(value: Any) -> TypeGuard[float]:
    """A finite number of seconds: not a bool, not NaN or infinite (JSON parsers take
    ``NaN``), not an integer too large for a float."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


# ---------------------------------------------------------------------------- JWT


class JwtVerifier:
    """Access tokens an OAuth 2.1 authorization server issued for this server.

    :param fetch: ``fetch(url)`` returns a response body (the host's HTTP client: no proxy,
        no redirect, the operator's trust roots); it raises on any failure.
    :param now: wall-clock seconds (the host's Clock) for ``exp`` and ``nbf``.
    :param monotonic: seconds on a monotonic clock, for the JWKS cache.
    """

    def __init__(self, *, issuer: str, audience: str, jwks_url: str,
                 fetch: Callable[[str], bytes], now: Callable[[], float],
                 monotonic: Callable[[], float]) -> None:
        import jwt  # the oauth extra: only a server with an issuer needs it

        self._jwt = jwt
        self.issuer = issuer
        self.audience = audience
        self.jwks_url = jwks_url
        self._fetch = fetch
        self._now = now
        self._monotonic = monotonic
        #: The issuer's signing keys as fetched (JWK objects), by key id ("" for none).
        self._jwks: dict[str, dict[str, Any]] = {}
        self._fetched_at: float | None = None
        self._fetching = False
        self._lock = threading.Lock()
        #: Tokens verified, each under its key id.
        self._verified = RememberedTokens()

    def remembered(self, token: str) -> Caller | None:
        """The caller of a token this verifier already found valid, while it is: no key,
        no signature, no I/O (what each request of a session costs). A token is remembered
        until its ``exp``, at most JWKS_TTL_S, and never past its key leaving the JWKS."""
        return self._verified.get(token, self._now())

    def verify(self, token: str) -> Caller | None:
        """The caller a valid token names, or None (the reason is logged for the operator)."""
        caller = self.remembered(token)
        if caller is None:
            caller = self._verify(token)
        return caller

    def _verify(self, token: str) -> Caller | None:
        jwt = self._jwt
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            return _refused("malformed")
        algorithm, kid = header.get("alg"), header.get("kid")
        if algorithm not in ALGORITHMS:
            return _refused("algorithm", algorithm=str(algorithm))
        kid = kid if isinstance(kid, str) else None
        key = self._key(kid, algorithm)
        if key is None:
            return _refused("unknown_key")
        try:
            claims = jwt.decode(
                token, key, algorithms=[algorithm], audience=self.audience, issuer=self.issuer,
                options={"require": ["exp", "iss", "aud", "sub"], "verify_exp": False,
                         "verify_nbf": False, "verify_iat": False})
        except jwt.InvalidSignatureError:
            return _refused("signature")
        except jwt.InvalidAudienceError:
            return _refused("audience")
        except jwt.InvalidIssuerError:
            return _refused("issuer")
        except jwt.PyJWTError as exc:
            return _refused("invalid", error=type(exc).__name__)
        if claims.get("iss") != self.issuer:  # compared here too, exactly, whatever PyJWT does
            return _refused("issuer")
        now = self._now()
        caller = bearer_caller(claims, self.issuer, now, exp_required=True)
        if isinstance(caller, str):
            return _refused(caller)
        self._verified.put(token, caller, min(float(claims["exp"]) + LEEWAY_S,
                                              now + JWKS_TTL_S), kid or "")
        return caller

    def _key(self, kid: str | None, algorithm: str) -> Any:
        """The verifying key for ``kid`` (a JWKS of one key may name none) and the token's
        algorithm, fetching the JWKS when it is stale, or when it lacks ``kid`` and was not
        just fetched. One thread fetches; the others go on with the keys there are (a token
        whose key is not among them is refused now, not made to wait)."""
        with self._lock:
            now, fetched = self._monotonic(), self._fetched_at
            stale = fetched is None or now - fetched > JWKS_TTL_S
            missing = (kid not in self._jwks) if kid is not None else len(self._jwks) != 1
            fetch = not self._fetching and (stale or (
                missing and fetched is not None and now - fetched > JWKS_REFETCH_S))
            if fetch:
                self._fetching = True
        if fetch:
            try:
                self._refresh(now)
            finally:
                with self._lock:
                    self._fetching = False
        with self._lock:
            if kid is None:
                jwk = next(iter(self._jwks.values())) if len(self._jwks) == 1 else None
            else:
                jwk = self._jwks.get(kid)
        return None if jwk is None else _key_for(self._jwt, jwk, algorithm)

    def _refresh(self, now: float) -> None:
        """Fetch the JWKS (outside the lock); keep the last keys when it cannot be had."""
        try:
            body = self._fetch(self.jwks_url)
            if len(body) > _JWKS_MAX_BYTES:
                raise ValueError("the JWKS is over 1 MiB")
            document = json.loads(body)
            keys = document.get("keys") if isinstance(document, dict) else None
            if not isinstance(keys, list):
                raise ValueError("not a JWKS")
        except Exception as exc:  # the last keys stay in force; tried again after a while
            get_logger().warning("http.auth.jwks_unavailable", url=self.jwks_url,
                                 error=type(exc).__name__)
            with self._lock:
                self._fetched_at = now
            return
        jwks = {str(k.get("kid") or ""): k for k in keys if _usable(k)}
        with self._lock:
            self._jwks, self._fetched_at = jwks, now
        # A key gone from the JWKS takes the tokens it verified with it.
        self._verified.keep_tags(jwks)


def bearer_caller(claims: Mapping[str, Any], by: str, now: float, *,
                  exp_required: bool) -> Caller | str:
    """The caller claims found valid otherwise name, or why not (a reason for the log): not
    sender-constrained, within ``exp``/``nbf``, with a ``sub``."""
    if "cnf" in claims:
        # Sender-constrained (DPoP, mTLS: RFC 9449, 8705): it needs a proof of possession
        # this server does not check, so it is not taken as a bearer token.
        return "sender_constrained"
    late = time_claims_refusal(claims, now, exp_required=exp_required)
    if late is not None:
        return late
    caller = caller_of(claims, by)
    return "claims" if caller is None else caller


def caller_of(claims: Mapping[str, Any], by: str) -> Caller | None:
    """The caller ``sub`` and ``scope`` (space-separated) name; None when ``sub`` is not a
    non-empty string or ``scope`` is not a string."""
    subject, scope = claims.get("sub"), claims.get("scope", "")
    if not isinstance(subject, str) or not subject or not isinstance(scope, str):
        return None
    expires = claims.get("exp")
    return Caller(Principal(subject, frozenset(scope.split())), by,
                  float(expires) if _number(expires) else None)


def refused(way: str, reason: str, **detail: str) -> Caller | None:
    """No caller: the reason for the operator's log, never for the client."""
    get_logger().info("http.auth.refused", way=way, reason=reason, **detail)
    return None


def _refused(reason: str, **detail: str) -> Caller | None:
    return refused("jwt", reason, **detail)


def _usable(jwk: Any) -> bool:
    """A JWK for signatures (``use`` absent or ``sig``) of an asymmetric type."""
    return (isinstance(jwk, dict) and jwk.get("use", "sig") == "sig"
            and jwk.get("kty") in _KEY_TYPES)


#: Which algorithms each key type verifies (an RSA key never an ES256 token, and so on).
_KEY_TYPES = {"RSA": ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512"),
              "EC": ("ES256", "ES384", "ES512"), "OKP": ("EdDSA",)}


def _key_for(jwt: Any, jwk: dict[str, Any], algorithm: str) -> Any:
    """The key of ``jwk`` for ``algorithm``: None when the JWK names another algorithm or is
    of a type that cannot verify it (a JWK without ``alg`` is built for the token's)."""
    if algorithm not in _KEY_TYPES.get(str(jwk.get("kty")), ()):
        return None
    if "alg" in jwk and jwk["alg"] != algorithm:
        return None
    try:
        return jwt.PyJWK(jwk, algorithm=algorithm)
    except jwt.PyJWTError:
        return None


def bearer_token(headers: Sequence[tuple[bytes, bytes]]) -> str | None:
    """The token of the request's one ``Authorization: Bearer`` header; None for none, for a
    header of another scheme, or for more than one."""
    values = [v for k, v in headers if k.lower() == b"authorization"]
    if len(values) != 1:
        return None
    scheme, _, token = values[0].decode("latin-1").partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or " " in token:
        return None
    return token
