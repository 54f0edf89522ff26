"""The outside world a journey's tools reach, on loopback HTTPS with throwaway trustme CAs:
a fake TensorScale (image.generate, video.generate) and an RFC 8058 one-click receiver
(email.unsubscribe). Each records exactly what arrived. Adapted from plugins/media/tests/
media_support.py and plugins/email/tests/receiver.py (the journeys do not import plugin
tests). A server reaches a fake only through the settings it is given: ``settings()`` of each.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import attrs

from toolhost.testing import loopback_tls_server

__all__ = ["MP4", "PNG", "Arrival", "FakeIssuer", "FakeTensorScale", "Receiver",
           "oauth_issuer", "one_click_receiver", "tensorscale"]

LOOPBACK = "127.0.0.1"
#: The credential a journey configures; it must never reach a client.
TENSORSCALE_KEY = "ts-journey-key-0c7e1a"
#: What the fake provider sends: a PNG signature, then bytes no codec would change.
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + bytes(range(256)) * 4
MP4 = b"\x00\x00\x00\x18ftypisom\x00\x00\x02\x00isomiso2" + bytes(range(256)) * 8

#: What writing to a client that already closed the connection raises.
_CLIENT_GONE = (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError)


@attrs.frozen
class Arrival:
    """One request as it reached a fake: method, path, headers in order, raw body."""

    method: str
    path: str
    headers: tuple[tuple[str, str], ...]
    body: bytes

    def header(self, name: str) -> list[str]:
        return [v for n, v in self.headers if n.lower() == name.lower()]

    def json(self) -> Any:
        return json.loads(self.body)


def _recording_handler(arrivals: list[Arrival], answer: Any) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _record(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            arrivals.append(Arrival(self.command, self.path, tuple(self.headers.items()), body))
            answer(self)

        do_POST = do_GET = _record  # noqa: N815 - http.server's names

        def log_message(self, format: str, *args: object) -> None:
            del format, args

    return Handler


# ---------------------------------------------------------------------------- TensorScale


@attrs.define
class FakeTensorScale:
    """A TensorScale that answers every generation with ``body`` (200, ``content_type``, its
    Content-Length, the signature split across two writes): a body that ends only when the
    connection closes is refused (D405)."""

    base_url: str
    ca_bundle: Path
    arrivals: list[Arrival]
    body: bytes = PNG
    content_type: str = "image/png"

    def settings(self) -> dict[str, str]:
        """What the host needs to use it: the key, the base URL and the extra CA root."""
        return {"TENSORSCALE_API_KEY": TENSORSCALE_KEY, "TENSORSCALE_BASE_URL": self.base_url,
                "TOOLHOST_CA_BUNDLE": str(self.ca_bundle)}

    def generations(self) -> list[Arrival]:
        return [a for a in self.arrivals if a.method == "POST"]


@contextmanager
def tensorscale(tmp_path: Path) -> Iterator[FakeTensorScale]:
    arrivals: list[Arrival] = []
    state: list[FakeTensorScale] = []

    def answer(h: BaseHTTPRequestHandler) -> None:
        fake = state[0]
        if h.command != "POST":
            h.send_response(404)
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        h.send_response(200)
        h.send_header("Content-Type", fake.content_type)
        h.send_header("Content-Length", str(len(fake.body)))
        h.send_header("Connection", "close")
        h.end_headers()
        with suppress(*_CLIENT_GONE):
            for chunk in (fake.body[:5], fake.body[5:]):
                h.wfile.write(chunk)
                h.wfile.flush()
        h.close_connection = True

    handler = _recording_handler(arrivals, answer)
    handler.protocol_version = "HTTP/1.1"
    with loopback_tls_server(handler, tmp_path, names=(LOOPBACK,)) as server:
        fake = FakeTensorScale(server.base_url, server.ca_bundle, arrivals)
        state.append(fake)
        yield fake


# ---------------------------------------------------------------------------- one-click


@attrs.define
class Receiver:
    """An RFC 8058 one-click endpoint: answers 200 to whatever arrives, and records it."""

    port: int
    ca_bundle: Path
    arrivals: list[Arrival]

    def url(self, path: str = "/unsubscribe/1?list=news", host: str = "localhost") -> str:
        return f"https://{host}:{self.port}{path}"

    def settings(self) -> dict[str, str]:
        """Trust its CA, and let one-click requests reach loopback (a test-only setting)."""
        return {"TOOLHOST_CA_BUNDLE": str(self.ca_bundle),
                "TOOLHOST_EMAIL_ALLOW_PRIVATE_DESTINATIONS": "1",
                "TOOLHOST_EMAIL_REQUEST_TIMEOUT_S": "10"}  # room for load


@contextmanager
def one_click_receiver(tmp_path: Path) -> Iterator[Receiver]:
    arrivals: list[Arrival] = []

    def answer(h: BaseHTTPRequestHandler) -> None:
        body = b"unsubscribed"
        h.send_response(200)
        h.send_header("Content-Type", "text/plain")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        with suppress(*_CLIENT_GONE):
            h.wfile.write(body)

    with loopback_tls_server(_recording_handler(arrivals, answer), tmp_path,
                             names=("localhost", LOOPBACK)) as server:
        yield Receiver(server.port, server.ca_bundle, arrivals)


# ---------------------------------------------------------------------------- an OAuth issuer


@attrs.define
class FakeIssuer:
    """An OAuth 2.1 authorization server as a resource server sees it: its RFC 8414 metadata
    and its JWKS (``jwks``, served as it stands), over loopback HTTPS; and tokens it signs."""

    url: str
    ca_bundle: Path
    arrivals: list[Arrival]
    key: Any
    jwks: dict[str, Any] = attrs.field(factory=dict)
    #: RFC 7662: what ``/introspect`` answers for each opaque token (``{"active": false}``
    #: for any other), to a client with INTROSPECTION_CLIENT's credentials (401 otherwise).
    introspected: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    #: The authorization-code flow (RFC 6749 4.1 with RFC 7636's S256): ``/authorize`` logs
    #: in ``person`` at once and sends the browser back with a code; ``/token`` gives that
    #: code's token (``scope``) once, to the client and verifier it was asked with.
    person: str = "ada"
    scope: str = ""
    codes: dict[str, dict[str, str]] = attrs.field(factory=dict)

    def settings(self, audience: str) -> dict[str, str]:
        return {"TOOLHOST_HTTP_ISSUER": self.url, "TOOLHOST_HTTP_AUDIENCE": audience,
                "TOOLHOST_CA_BUNDLE": str(self.ca_bundle)}

    def introspection_settings(self) -> dict[str, str]:
        client_id, secret = INTROSPECTION_CLIENT
        return {"TOOLHOST_HTTP_INTROSPECTION_CLIENT_ID": client_id,
                "TOOLHOST_HTTP_INTROSPECTION_CLIENT_SECRET": secret}

    def token(self, audience: str, subject: str = "ada", scope: str = "",
              key: Any = None, algorithm: str = "RS256", **claims: Any) -> str:
        import time

        import jwt

        now = int(time.time())
        body = {"iss": self.url, "aud": audience, "sub": subject, "scope": scope,
                "exp": now + 600, "nbf": now - 5, **claims}
        return jwt.encode({k: v for k, v in body.items() if v is not None},
                          key if key is not None else self.key, algorithm=algorithm,
                          headers={"kid": "k1"})


#: The credentials the fake issuer's introspection endpoint accepts.
INTROSPECTION_CLIENT = ("toolhost-rs", "introspection-secret-2b7d")


def _introspection(issuer: FakeIssuer, arrival: Arrival) -> dict[str, Any] | None:
    """The endpoint's answer: None (404, as for an unknown client) without the right Basic
    credentials or a form ``token``."""
    import base64
    from urllib.parse import parse_qs

    client_id, secret = INTROSPECTION_CLIENT
    expected = "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()
    form = parse_qs(arrival.body.decode())
    if arrival.header("Authorization") != [expected] or len(form.get("token", [])) != 1:
        return None
    return issuer.introspected.get(form["token"][0], {"active": False})


def _authorize(issuer: FakeIssuer, h: BaseHTTPRequestHandler) -> None:
    """The person is logged in at once: back to the client's redirect_uri with a code."""
    import secrets
    from urllib.parse import parse_qs, urlencode, urlsplit

    asked = {k: v[0] for k, v in parse_qs(urlsplit(h.path).query).items()}
    code = secrets.token_urlsafe(16)
    issuer.codes[code] = asked
    h.send_response(302)
    h.send_header("Location", f"{asked['redirect_uri']}?"
                              f"{urlencode({'code': code, 'state': asked.get('state', '')})}")
    h.send_header("Content-Length", "0")
    h.end_headers()


def _token(issuer: FakeIssuer, arrival: Arrival) -> dict[str, Any]:
    """A code's token, once, to the client, redirect_uri and verifier it was asked with."""
    import base64
    import hashlib
    from urllib.parse import parse_qs

    form = {k: v[0] for k, v in parse_qs(arrival.body.decode()).items()}
    asked = issuer.codes.pop(form.get("code", ""), None)
    verifier = form.get("code_verifier", "")
    challenge = base64.urlsafe_b64encode(
        hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    if (asked is None or form.get("grant_type") != "authorization_code"
            or form.get("client_id") != asked.get("client_id")
            or form.get("redirect_uri") != asked.get("redirect_uri")
            or asked.get("code_challenge_method") != "S256"
            or challenge != asked.get("code_challenge")):
        return {"error": "invalid_grant"}
    return {"access_token": issuer.token(asked["resource"], subject=issuer.person,
                                         scope=issuer.scope),
            "token_type": "Bearer", "expires_in": 600}


@contextmanager
def oauth_issuer(tmp_path: Path) -> Iterator[FakeIssuer]:
    import jwt
    from cryptography.hazmat.primitives.asymmetric import rsa

    arrivals: list[Arrival] = []
    state: list[FakeIssuer] = []
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))

    def answer(h: BaseHTTPRequestHandler) -> None:
        issuer = state[0]
        documents: dict[str, Any] = {
            "/.well-known/oauth-authorization-server": {
                "issuer": issuer.url, "jwks_uri": f"{issuer.url}/jwks.json",
                "introspection_endpoint": f"{issuer.url}/introspect",
                "authorization_endpoint": f"{issuer.url}/authorize",
                "token_endpoint": f"{issuer.url}/token"},
            "/jwks.json": issuer.jwks}
        if h.command == "GET" and h.path.startswith("/authorize?"):
            _authorize(issuer, h)
            return
        if h.command == "POST" and h.path == "/token":
            documents["/token"] = _token(issuer, arrivals[-1])
        if h.command == "POST" and h.path == "/introspect":
            documents["/introspect"] = _introspection(issuer, arrivals[-1])
        document = documents.get(h.path)
        body = json.dumps(document).encode() if document is not None else b""
        refused = isinstance(document, dict) and "error" in document
        h.send_response(400 if refused else 200 if document is not None else 404)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        with suppress(*_CLIENT_GONE):
            h.wfile.write(body)

    with loopback_tls_server(_recording_handler(arrivals, answer), tmp_path,
                             names=(LOOPBACK,)) as server:
        issuer = FakeIssuer(server.base_url, server.ca_bundle, arrivals, key,
                            {"keys": [{**public, "kid": "k1", "use": "sig", "alg": "RS256"}]})
        state.append(issuer)
        yield issuer
