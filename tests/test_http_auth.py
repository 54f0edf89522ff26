"""Who calls over HTTP (``toolhost._mcp.http_auth``): the static token file and an OAuth 2.1
issuer's JWTs, each refusal its own case; and the front door's allow-lists. The server end to
end, with the SDK client and raw HTTP, is tests/test_http_serve.py."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")
jwt = pytest.importorskip("jwt", reason="the toolhost-core[oauth] extra (PyJWT) is not installed")

from cryptography.hazmat.primitives import serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec, rsa  # noqa: E402

from toolhost._mcp.http_auth import (  # noqa: E402
    AuthConfigError,
    JwtVerifier,
    TokenFile,
    bearer_token,
)
from toolhost._mcp.http_front import host_allowed, origin_allowed  # noqa: E402

ISSUER = "https://issuer.example"
AUDIENCE = "https://toolhost.example/mcp"
JWKS_URL = "https://issuer.example/jwks.json"
NOW = 1_800_000_000.0


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


# ---------------------------------------------------------------------------- the token file


def write_tokens(path: Path, *entries: tuple[str, str, list[str]]) -> Path:
    path.write_text("".join(
        f'[[token]]\nsha256 = "{digest(t)}"\nprincipal = "{p}"\nscopes = {json.dumps(s)}\n'
        for t, p, s in entries))
    return path


def test_a_token_in_the_file_is_its_principal_with_its_scopes(tmp_path: Path) -> None:
    tokens = TokenFile(write_tokens(tmp_path / "t.toml", ("tok-a", "ada", ["email.read"]),
                                    ("tok-b", "bob", [])))
    caller = tokens.verify("tok-a")
    assert caller is not None
    assert (caller.principal.id, caller.principal.scopes, caller.by) == (
        "ada", frozenset({"email.read"}), "token-file")
    assert tokens.verify("tok-c") is None
    assert tokens.verify(digest("tok-a")) is None  # the digest is not the token


def test_a_token_removed_from_the_file_is_refused_from_the_next_request(tmp_path: Path) -> None:
    path = write_tokens(tmp_path / "t.toml", ("tok-a", "ada", []), ("tok-b", "bob", []))
    tokens = TokenFile(path)
    assert tokens.verify("tok-b") is not None
    write_tokens(path, ("tok-a", "ada", []))
    assert tokens.verify("tok-b") is None
    assert tokens.verify("tok-a") is not None


def test_a_file_that_becomes_unusable_keeps_the_last_good_tokens(tmp_path: Path) -> None:
    path = write_tokens(tmp_path / "t.toml", ("tok-a", "ada", []))
    tokens = TokenFile(path)
    path.write_text("[[token]\nhalf written")
    assert tokens.verify("tok-a") is not None


@pytest.mark.parametrize(("text", "says"), [
    ("[[token]\n", "not TOML"),
    ('[server]\nx = 1\n', "unknown key 'server'"),
    ('[[token]]\nsha256 = "tok-a"\nprincipal = "ada"\n', "never the token itself"),
    ('[[token]]\nsha256 = "' + "0" * 64 + '"\nprincipal = ""\n', "principal must be"),
    ('[[token]]\nsha256 = "' + "0" * 64 + '"\nprincipal = "a"\nscopes = "x"\n',
     "scopes must be a list"),
    ('[[token]]\nsha256 = "' + "0" * 64 + '"\nprincipal = "a"\nrole = "admin"\n',
     "unknown key 'role'"),
])
def test_a_bad_token_file_is_one_line_naming_it(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "t.toml"
    path.write_text(text)
    with pytest.raises(AuthConfigError) as refused:
        TokenFile(path)
    assert says in str(refused.value) and str(path) in str(refused.value)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize(("headers", "token"), [
    ([(b"authorization", b"Bearer abc")], "abc"),
    ([(b"Authorization", b"bearer abc ")], "abc"),
    ([(b"authorization", b"Basic abc")], None),
    ([(b"authorization", b"Bearer")], None),
    ([(b"authorization", b"Bearer a b")], None),
    ([(b"authorization", b"Bearer a"), (b"authorization", b"Bearer b")], None),
    ([], None),
])
def test_the_bearer_token_is_one_header_of_that_scheme(
    headers: list[tuple[bytes, bytes]], token: str | None,
) -> None:
    assert bearer_token(headers) == token


# ---------------------------------------------------------------------------- JWT


class Issuer:
    """A signing key, its JWKS, and a counter of fetches."""

    def __init__(self, key: Any = None, kid: str = "k1", alg: str = "RS256") -> None:
        self.key = key if key is not None else rsa.generate_private_key(
            public_exponent=65537, key_size=2048)
        self.kid, self.alg = kid, alg
        self.fetches = 0
        self.extra_keys: list[dict[str, Any]] = []
        self.names_alg = True

    def jwks(self) -> bytes:
        jwk = json.loads(jwt.algorithms.get_default_algorithms()[self.alg].to_jwk(
            self.key.public_key()))
        jwk.update(kid=self.kid, use="sig", alg=self.alg)
        if not self.names_alg:
            del jwk["alg"]
        return json.dumps({"keys": [jwk, *self.extra_keys]}).encode()

    def fetch(self, url: str) -> bytes:
        assert url == JWKS_URL
        self.fetches += 1
        return self.jwks()

    def token(self, **changes: Any) -> str:
        claims: dict[str, Any] = {"iss": ISSUER, "aud": AUDIENCE, "sub": "ada",
                                  "scope": "email.read people.read", "exp": NOW + 300,
                                  "nbf": NOW - 10, "iat": NOW - 10}
        claims.update(changes)
        claims = {k: v for k, v in claims.items() if v is not None}
        return jwt.encode(claims, self.key, algorithm=self.alg, headers={"kid": self.kid})


def verifier(issuer: Issuer, clock: list[float] | None = None) -> JwtVerifier:
    ticks = clock if clock is not None else [0.0]
    return JwtVerifier(issuer=ISSUER, audience=AUDIENCE, jwks_url=JWKS_URL, fetch=issuer.fetch,
                       now=lambda: NOW, monotonic=lambda: ticks[0])


def test_a_token_the_issuer_signed_for_this_server_is_its_subject() -> None:
    issuer = Issuer()
    caller = verifier(issuer).verify(issuer.token())
    assert caller is not None
    assert (caller.principal.id, caller.principal.scopes, caller.by) == (
        "ada", frozenset({"email.read", "people.read"}), ISSUER)


def test_an_ec_key_verifies_too() -> None:
    issuer = Issuer(ec.generate_private_key(ec.SECP256R1()), alg="ES256")
    assert verifier(issuer).verify(issuer.token()) is not None


def _unsigned(claims: dict[str, Any]) -> str:
    return jwt.encode(claims, None, algorithm="none")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _hs256_with_the_public_key(issuer: Issuer) -> str:
    """Algorithm confusion: an HMAC whose secret is the issuer's public key, which anyone
    can read; a verifier that let the token pick HS256 would check it with that key."""
    pem = issuer.key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    head = _b64(json.dumps({"alg": "HS256", "kid": issuer.kid, "typ": "JWT"}).encode())
    body = _b64(json.dumps({"iss": ISSUER, "aud": AUDIENCE, "sub": "ada",
                            "exp": NOW + 300}).encode())
    signature = hmac.new(pem, f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{_b64(signature)}"


@pytest.mark.parametrize("make", [
    pytest.param(lambda i: "not.a.jwt", id="malformed"),
    pytest.param(lambda i: "a" * 40, id="not a jwt at all"),
    pytest.param(lambda i: _unsigned({"iss": ISSUER, "aud": AUDIENCE, "sub": "ada",
                                       "exp": NOW + 300}), id="alg none"),
    pytest.param(_hs256_with_the_public_key, id="HS256 with the public key as secret"),
    pytest.param(lambda i: Issuer(kid="k1").token(), id="another key's signature"),
    pytest.param(lambda i: i.token(exp=NOW - 31), id="expired"),
    pytest.param(lambda i: i.token(nbf=NOW + 31), id="not yet valid"),
    pytest.param(lambda i: i.token(iss="https://evil.example"), id="wrong issuer"),
    pytest.param(lambda i: i.token(aud="https://other.example/mcp"), id="wrong audience"),
    pytest.param(lambda i: i.token(exp=None), id="no expiry"),
    pytest.param(lambda i: i.token(sub=None), id="no subject"),
    pytest.param(lambda i: i.token(scope=["a", "b"]), id="scope not a string"),
    # Regression: NaN passed the exp check and was remembered for ever (min() with NaN).
    pytest.param(lambda i: i.token(exp=float("nan")), id="exp NaN"),
    pytest.param(lambda i: i.token(exp=True), id="exp a boolean"),
    pytest.param(lambda i: i.token(cnf={"jkt": "abc"}), id="sender-constrained"),
])
def test_every_bad_token_is_refused(make: Callable[[Issuer], str]) -> None:
    issuer = Issuer()
    assert verifier(issuer).verify(make(issuer)) is None


def test_leeway_is_thirty_seconds_either_side() -> None:
    issuer = Issuer()
    check = verifier(issuer)
    assert check.verify(issuer.token(exp=NOW - 29)) is not None
    assert check.verify(issuer.token(nbf=NOW + 29)) is not None


def test_the_jwks_is_fetched_once_and_again_for_a_new_key_at_most_every_30_s() -> None:
    issuer = Issuer()
    clock = [0.0]
    check = verifier(issuer, clock)
    assert check.verify(issuer.token()) is not None
    assert check.verify(issuer.token()) is not None
    assert issuer.fetches == 1
    rotated = Issuer(kid="k2")
    issuer.extra_keys.append(json.loads(rotated.jwks())["keys"][0])
    clock[0] = 10.0
    assert check.verify(rotated.token()) is None  # just fetched: not again yet
    assert issuer.fetches == 1
    clock[0] = 31.0
    assert check.verify(rotated.token()) is not None  # rotated in
    assert issuer.fetches == 2
    clock[0] = 31.0 + 601
    check.verify(issuer.token(sub="someone-new"))  # a token not verified before
    assert issuer.fetches == 3  # stale after ten minutes


def test_a_token_verified_once_is_remembered_only_until_it_expires() -> None:
    issuer = Issuer()
    now = [NOW]
    check = JwtVerifier(issuer=ISSUER, audience=AUDIENCE, jwks_url=JWKS_URL,
                        fetch=issuer.fetch, now=lambda: now[0], monotonic=lambda: 0.0)
    token = issuer.token(exp=NOW + 60)
    assert check.remembered(token) is None
    assert check.verify(token) is not None
    assert check.remembered(token) is not None
    now[0] = NOW + 60 + 31
    assert check.remembered(token) is None
    assert check.verify(token) is None  # expired: refused, not remembered


def test_an_issuer_that_cannot_be_reached_refuses_and_keeps_the_keys_it_had() -> None:
    issuer = Issuer()
    clock = [0.0]
    check = verifier(issuer, clock)
    assert check.verify(issuer.token()) is not None

    def down(url: str) -> bytes:
        raise OSError("unreachable")

    check._fetch = down
    clock[0] = 700.0
    assert check.verify(issuer.token()) is not None  # the last keys stay in force
    assert Issuer(kid="k9").token() and check.verify(Issuer(kid="k9").token()) is None


# ---------------------------------------------------------------------------- allow-lists


@pytest.mark.parametrize(("host", "ok"), [
    ("127.0.0.1:8765", True), ("localhost:1", True), ("[::1]:80", True), ("LOCALHOST:9", True),
    ("127.0.0.2:8765", False), ("attacker.example:8765", False), ("127.0.0.1", True),
    ("127.0.0.1:80x", False), (None, False), ("", False),
])
def test_hosts_match_by_name_and_any_port(host: str | None, ok: bool) -> None:
    assert host_allowed(host, ("127.0.0.1:*", "localhost:*", "[::1]:*")) is ok


def test_an_origin_must_be_listed_but_none_is_no_browser() -> None:
    allowed = ("http://127.0.0.1:*",)
    assert origin_allowed(None, allowed)
    assert origin_allowed("http://127.0.0.1:5173", allowed)
    assert not origin_allowed("http://attacker.example", allowed)
    assert not origin_allowed("null", allowed)


# ---------------------------------------------------------------------------- review fixes


def test_a_token_file_that_is_not_a_regular_file_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "tokens.fifo"
    os.mkfifo(fifo)
    zero = tmp_path / "tokens.link"
    zero.symlink_to("/dev/zero")
    for path in (fifo, zero, tmp_path):
        with pytest.raises(AuthConfigError) as refused:
            TokenFile(path)
        assert "is not a regular file" in str(refused.value)
    good = write_tokens(tmp_path / "t.toml", ("tok-a", "ada", []))
    tokens = TokenFile(good)
    good.unlink()
    os.mkfifo(good)  # swapped for a FIFO while serving: the last good tokens stay
    assert tokens.changed()
    assert tokens.verify("tok-a") is not None


def test_a_jwk_without_alg_verifies_the_algorithm_of_its_type() -> None:
    for alg in ("RS384", "PS256"):
        issuer = Issuer(alg=alg)
        issuer.names_alg = False
        assert verifier(issuer).verify(issuer.token()) is not None, alg


def test_a_key_gone_from_the_jwks_takes_its_remembered_tokens_with_it() -> None:
    issuer = Issuer()
    clock = [0.0]
    check = verifier(issuer, clock)
    old = issuer.token(exp=NOW + 86400)
    assert check.verify(old) is not None
    rotated = Issuer(kid="k2")
    issuer.jwks = rotated.jwks  # type: ignore[method-assign]  # k1 withdrawn, k2 in
    clock[0] = 31.0
    assert check.verify(rotated.token()) is not None  # fetched again: k1 is gone
    assert check.remembered(old) is None
    assert check.verify(old) is None


def test_one_slow_jwks_fetch_holds_up_no_token_whose_key_is_known() -> None:
    issuer = Issuer()
    clock = [0.0]
    release = threading.Event()
    fetches = [0]

    def fetch(url: str) -> bytes:
        fetches[0] += 1
        if fetches[0] > 1:
            release.wait(10)  # the issuer is slow from now on
        return issuer.jwks()

    check = JwtVerifier(issuer=ISSUER, audience=AUDIENCE, jwks_url=JWKS_URL, fetch=fetch,
                        now=lambda: NOW, monotonic=lambda: clock[0])
    assert check.verify(issuer.token()) is not None
    clock[0] = 31.0
    unknown = threading.Thread(target=check.verify, args=(Issuer(kid="k9").token(),))
    unknown.start()  # makes the slow fetch
    while fetches[0] < 2:
        time.sleep(0.01)
    started = time.monotonic()
    assert check.verify(issuer.token(sub="bea")) is not None
    assert time.monotonic() - started < 2  # not behind the fetch
    release.set()
    unknown.join(10)


@pytest.mark.parametrize(("setting", "value"), [
    ("TOOLHOST_HTTP_ISSUER", "http://issuer.example"),
    ("TOOLHOST_HTTP_JWKS_URL", "http://issuer.example/jwks.json"),
])
def test_an_issuers_keys_are_never_fetched_in_the_clear_but_on_loopback(
    setting: str, value: str,
) -> None:
    from toolhost._mcp.config import ConfigError, http_config
    from toolhost._model.settings import Settings

    settings = {"TOOLHOST_HTTP_ISSUER": "https://issuer.example",
                "TOOLHOST_HTTP_AUDIENCE": "https://toolhost.example/mcp",
                "TOOLHOST_HTTP_JWKS_URL": "https://issuer.example/jwks.json", setting: value}
    with pytest.raises(ConfigError) as refused:
        http_config(Settings(settings), "127.0.0.1", 8765, [], fetch=lambda url: b"",
                    now=lambda: NOW, monotonic=lambda: 0.0)
    assert "must be https://" in str(refused.value)
    loopback = {**settings, setting: value.replace("issuer.example", "127.0.0.1:9")}
    assert http_config(Settings(loopback), "127.0.0.1", 8765, [], fetch=lambda url: b"",
                       now=lambda: NOW, monotonic=lambda: 0.0).authenticates


def test_a_host_without_a_port_is_the_listed_default_port() -> None:
    assert host_allowed("mcp.example.org", ("mcp.example.org:443",))
    assert host_allowed("mcp.example.org", ("mcp.example.org:80",))
    assert not host_allowed("mcp.example.org", ("mcp.example.org:8443",))
    assert not host_allowed("127.0.0.1:²", ("127.0.0.1:*",))
    assert not host_allowed("127.0.0.1:000080", ("127.0.0.1:*",))


@pytest.mark.parametrize(("sessions", "per_principal", "expected"), [
    (None, None, 100), ("30", None, 3), ("5", None, 1), ("30", "7", 7)])
def test_a_principals_sessions_are_a_tenth_of_the_hosts_unless_set(
    sessions: str | None, per_principal: str | None, expected: int,
) -> None:
    # The review of D319: a host bound lowered to the per-principal one (or under it) left
    # one person free to take every session again.
    from toolhost._mcp.config import http_config
    from toolhost._model.settings import Settings

    given = {"TOOLHOST_HTTP_MAX_SESSIONS": sessions,
             "TOOLHOST_HTTP_MAX_SESSIONS_PER_PRINCIPAL": per_principal}
    config = http_config(Settings({k: v for k, v in given.items() if v is not None}),
                         "127.0.0.1", 8765, [], fetch=lambda url: b"", now=lambda: NOW,
                         monotonic=lambda: 0.0)
    assert config.policy.max_sessions_per_principal == expected
