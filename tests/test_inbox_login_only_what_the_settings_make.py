"""An inbox login cookie is a login only when this host's settings could have made it: an
issuer's login needs that issuer configured now, a token-file login a token file. Before, any
validly signed cookie's principal and scopes were taken as they were, so on a server with a
token file and no issuer a cookie claiming an "issuer" login of a principal in no token, with
``approvals.admin``, saw and approved everyone's calls (a review signed one with a secret it
had found offline). And each purpose's values are signed with a key derived from the secret,
so a cookie anyone gets (the login form's) is no sample of the key that signs logins; a login
signed the old way (with the secret itself) is no login any more.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from contextlib import closing
from pathlib import Path

import httpx
import pytest

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from journeys.journey_support import run
from test_inbox_http import both_served, inbox_deployment, pend
from test_inbox_login import Clock, _logins

from toolhost import Principal
from toolhost._mcp.http_auth import Caller
from toolhost._mcp.inbox.login import ADMIN_SCOPE, Logins

ISSUER = "https://issuer.example"
SECRET = "a-long-random-inbox-secret-0123456789"
LEAD = Principal("lead", frozenset({ADMIN_SCOPE}))


def _signed_by_an_issuer(secret: bytes, now: float) -> str:
    """A login cookie for ``lead`` (in no token file) as an issuer's login, signed with
    ``secret`` by the inbox's own code (as one who knows the secret would sign it)."""
    value = Logins(secret, None, lambda: now, lambda: "f" * 32).issue(
        Caller(LEAD, ISSUER, now + 3600), "made-up")
    assert value is not None
    return value


def test_an_issuers_login_on_a_server_with_no_issuer_is_no_login(tmp_path: Path) -> None:
    people = inbox_deployment(tmp_path, TOOLHOST_MCP_ELICITATION="off",
                              TOOLHOST_HTTP_UI_SECRET=SECRET)

    async def journey() -> None:
        async with both_served(people) as (base, _, bob):
            bob_id = await pend(bob)
            forged = _signed_by_an_issuer(SECRET.encode(), time.time())
            with closing(httpx.Client(base_url=base, timeout=30,
                                      cookies={"toolhost_inbox": forged})) as browser:
                page = browser.get("/ui/")
                assert (page.status_code, page.headers.get("location")) == (303, "/ui/login")
                approve = browser.post(f"/ui/calls/{bob_id}/approve", data={"csrf": "x"})
                assert approve.status_code == 401

    run(journey)
    row = next(r for r in people.invocations() if r["principal_id"] == "bob")
    assert (row["state"], row["approver"]) == ("awaiting_approval", None)


def test_a_login_is_refused_without_the_setting_that_made_it(tmp_path: Path) -> None:
    clock = Clock()
    secret = b"s" * 32
    by_issuer = _signed_by_an_issuer(secret, clock.now)
    # No issuer configured, or another: none (it stopped being trusted). The same: a login.
    assert Logins(secret, None, clock, lambda: "1" * 32).read(by_issuer) is None
    assert Logins(secret, None, clock, lambda: "1" * 32, issuer=ISSUER).read(by_issuer)
    other = Logins(secret, None, clock, lambda: "1" * 32, issuer="https://other.example")
    assert other.read(by_issuer) is None
    # A token-file login on a host with no token file (an issuer only): none.
    by_file = _logins(tmp_path, clock, secret).issue(
        Caller(Principal("ada", frozenset()), "token-file"), "ada-token")
    assert by_file is not None and _logins(tmp_path, clock, secret).read(by_file) is not None
    assert Logins(secret, None, clock, lambda: "1" * 32, issuer=ISSUER).read(by_file) is None


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def test_the_login_forms_cookie_is_no_sample_of_the_secret(tmp_path: Path) -> None:
    clock = Clock()
    secret = b"s" * 32
    logins = Logins(secret, None, clock, lambda: "0" * 32)
    _, before = logins.before_login()
    body, mac = before.split(".")
    # What anyone gets without a token is not signed with the secret itself...
    assert mac != _b64(hmac.new(secret, b"before\0" + body.encode(), hashlib.sha256).digest())
    # ... and a login signed the old way (with the secret itself) is no login now.
    logins = _logins(tmp_path, clock, secret)
    payload = _b64(json.dumps({"p": "ada", "s": [], "b": "token-file",
                               "d": hashlib.sha256(b"ada-token").hexdigest(),
                               "n": "0" * 32, "e": int(clock.now) + 60},
                              separators=(",", ":")).encode())
    old = _b64(hmac.new(secret, b"login\0" + payload.encode(), hashlib.sha256).digest())
    assert logins.read(f"{payload}.{old}") is None
    assert logins.read(logins.issue(Caller(Principal("ada", frozenset()), "token-file"),
                                    "ada-token")) is not None
