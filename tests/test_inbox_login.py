"""The inbox's signed cookies (``_mcp/inbox/login.py``, D314), without a server: what each
kind carries, and that nothing else opens as it."""

from __future__ import annotations

import hashlib
from itertools import count
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from toolhost import Principal
from toolhost._mcp.http_auth import Caller, TokenFile
from toolhost._mcp.inbox.login import FLOW_S, LOGIN_S, Logins, code_challenge


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _logins(tmp_path: Path, clock: Clock, secret: bytes = b"s" * 32) -> Logins:
    tokens = tmp_path / "tokens.toml"
    digest = hashlib.sha256(b"ada-token").hexdigest()
    tokens.write_text(f'[[token]]\nsha256 = "{digest}"\nprincipal = "ada"\n'
                      'scopes = ["approvals.decide"]\n')
    ids = count()
    return Logins(secret, TokenFile(tokens), clock, lambda: f"{next(ids):032x}",
                  issuer="https://issuer.example")


def test_a_login_opens_until_it_expires_and_never_once_altered(tmp_path: Path) -> None:
    clock = Clock()
    logins = _logins(tmp_path, clock)
    cookie = logins.issue(Caller(Principal("ada", frozenset()), "token-file"), "ada-token")
    assert cookie is not None
    login = logins.read(cookie)
    assert login is not None and login.principal.id == "ada"
    assert login.principal.scopes == frozenset({"approvals.decide"})  # the file's, now
    body, mac = cookie.split(".")
    assert logins.read(f"{body}x.{mac}") is None
    assert logins.read(f"{body}.{mac[:-1]}A") is None
    assert logins.read(f"{body}.\u00e9") is None
    assert _logins(tmp_path, clock, b"t" * 32).read(cookie) is None  # another secret
    clock.now += LOGIN_S + 1
    assert logins.read(cookie) is None


def test_an_issuers_login_lasts_what_its_token_does_and_needs_an_expiry(tmp_path: Path) -> None:
    clock = Clock()
    logins = _logins(tmp_path, clock)
    issuer = "https://issuer.example"
    cookie = logins.issue(Caller(Principal("ben", frozenset({"x"})), issuer,
                                 clock.now + 30), "a.jwt.token")
    assert cookie is not None and logins.read(cookie) is not None
    clock.now += 31
    assert logins.read(cookie) is None
    assert logins.issue(Caller(Principal("ben", frozenset()), issuer), "opaque") is None


def test_each_kind_of_cookie_opens_only_as_itself(tmp_path: Path) -> None:
    clock = Clock()
    logins = _logins(tmp_path, clock)
    state, verifier, flow = logins.flow()
    csrf, before = logins.before_login()
    assert logins.read(flow) is None and logins.read(before) is None
    assert logins.read_flow(before, state) is None
    assert not logins.before_login_holds(flow, csrf)
    assert logins.read_flow(flow, state) == verifier
    assert logins.read_flow(flow, state + "x") is None and logins.read_flow(flow, None) is None
    assert len(verifier) == 64 and len(code_challenge(verifier)) == 43
    assert logins.before_login_holds(before, csrf)
    _, other = logins.before_login()
    assert not logins.before_login_holds(other, csrf)  # another form's token
    assert not logins.before_login_holds(before, "\u00e9")
    clock.now += FLOW_S + 1
    assert logins.read_flow(flow, state) is None
    assert not logins.before_login_holds(before, csrf)


def test_a_principal_logs_in_at_most_logins_per_hour_times_in_any_hour(tmp_path: Path) -> None:
    """Each logout keeps a row with the record for the login's eight hours (D324): a token
    logging in and out in a loop wrote 274 rows a second (D332)."""
    from toolhost._mcp.inbox.login import LOGINS_PER_HOUR

    now = [1_000_000.0]
    logins = _logins(tmp_path, lambda: now[0])
    for _ in range(LOGINS_PER_HOUR):
        assert logins.admit("ada")
        now[0] += 1
    assert not logins.admit("ada")
    assert logins.admit("bob")  # each principal its own
    now[0] += 3600 - LOGINS_PER_HOUR  # the first login is an hour old now, the second not
    assert logins.admit("ada")
    assert not logins.admit("ada")
