"""The HTTP clients a plugin gets from ``Services.http(...)``: built by the host, one policy.

Every client ignores the process environment (``trust_env=False``: no ``HTTP(S)_PROXY``, no
``.netrc``, no ``SSL_CERT_FILE``/``SSL_CERT_DIR``), never follows redirects (a 3xx is returned
as is), never retries, and always has an explicit, finite timeout. TLS verification is always on,
against the default trust roots plus the PEM bundle named by ``TOOLHOST_CA_BUNDLE`` in the
settings' environment snapshot. The ``ssl.SSLContext`` is built once per ``HttpClients`` (the
bundle is read then) and shared by every client it makes; it never writes its sessions' secrets
to ``SSLKEYLOGFILE``. ``trust_roots_file`` gives the same roots as one PEM file, for a client
that takes a file instead of a context (the S3 store's boto3).

Tests inject a transport (``httpx.MockTransport``, or one of their own); it is used as is, for
every client, and its lifetime is the injector's.
"""

from __future__ import annotations

import atexit
import hashlib
import math
import os
import re
import shutil
import ssl
import sys
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import httpx

from toolhost._model.errors import UsageError
from toolhost._model.settings import Settings

__all__ = ["CA_BUNDLE_SETTING", "HttpClients", "HttpConfigError", "check_ca_bundle",
           "trust_roots_file"]

CA_BUNDLE_SETTING: Final = "TOOLHOST_CA_BUNDLE"


class HttpConfigError(UsageError, ValueError):
    """The host's HTTP settings are unusable (e.g. TOOLHOST_CA_BUNDLE is not a PEM file)."""


def _default_roots() -> tuple[list[str], str | None]:
    """(cafiles, capath) of the default trust roots, never taken from the environment.

    certifi's bundle when it is importable (httpx depends on it), and OpenSSL's compiled-in
    system locations. ``ssl.create_default_context()`` with no arguments would honour
    SSL_CERT_FILE and SSL_CERT_DIR, which is exactly the inheritance ``trust_env=False`` rules out.
    """
    cafiles: list[str] = []
    try:
        import certifi
    except ImportError:  # pragma: no cover - certifi comes with httpx
        pass
    else:
        cafiles.append(certifi.where())
    paths = ssl.get_default_verify_paths()
    if os.path.isfile(paths.openssl_cafile):
        cafiles.append(paths.openssl_cafile)
    capath = paths.openssl_capath if os.path.isdir(paths.openssl_capath) else None
    return cafiles, capath


def _client_context() -> ssl.SSLContext:
    """What ``ssl.create_default_context()`` makes for a client, less what it takes from the
    environment: it opens the file ``SSLKEYLOGFILE`` names, whoever set it for which program,
    and writes every session's secrets there (a capture of the traffic is then readable)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # CERT_REQUIRED and check_hostname
    if sys.version_info >= (3, 13):  # what create_default_context adds from 3.13
        ctx.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN | ssl.VERIFY_X509_STRICT
    return ctx


def _ssl_context(settings: Settings) -> ssl.SSLContext:
    cafiles, capath = _default_roots()
    ctx = _client_context()
    if not cafiles and capath is None:  # pragma: no cover - no certifi, no OpenSSL roots
        ctx.load_default_certs()
    else:
        ctx.load_verify_locations(cafile=cafiles[0] if cafiles else None, capath=capath)
        for cafile in cafiles[1:]:
            ctx.load_verify_locations(cafile=cafile)
    bundle = (settings.get(CA_BUNDLE_SETTING) or "").strip()
    if bundle:
        _load_bundle(ctx, bundle, settings.named_value(CA_BUNDLE_SETTING, bundle))
    # What PROTOCOL_TLS_CLIENT sets, stated: verification is never off.
    ctx.check_hostname = True
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def check_ca_bundle(settings: Settings) -> None:
    """Refuse a ``TOOLHOST_CA_BUNDLE`` the clients would refuse, named where it was written:
    for a reader that gets only the environment's form (the S3 client's ``trust_roots_file``),
    called before it.

    :raises HttpConfigError: the bundle is not a readable PEM file.
    """
    bundle = (settings.get(CA_BUNDLE_SETTING) or "").strip()
    if bundle:
        _load_bundle(_client_context(), bundle, settings.named_value(CA_BUNDLE_SETTING, bundle))


def _load_bundle(ctx: ssl.SSLContext, bundle: str, named: str) -> None:
    """``TOOLHOST_CA_BUNDLE``'s certificates into ``ctx``; ``named``: how a refusal begins
    (``Settings.named_value``).

    :raises HttpConfigError: the bundle is not a readable PEM file.
    """
    if not os.path.isfile(bundle):
        raise HttpConfigError(
            f"{named} is not a file: point it at a PEM file of extra CA certificates, or "
            "unset it"
        )
    try:
        ctx.load_verify_locations(cafile=bundle)
    except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
        raise HttpConfigError(
            f"{named} could not be loaded as a PEM CA bundle "
            f"({type(exc).__name__}): point it at a file of PEM 'BEGIN CERTIFICATE' blocks, "
            "or unset it"
        ) from exc


def trust_roots_file(env: Mapping[str, str]) -> str:
    """The path of one PEM file holding the trust roots every client here verifies with: the
    certificates of the default roots' files and of ``TOOLHOST_CA_BUNDLE``, the bundle checked
    as the clients' context checks it. (Copied as written: the context's own list,
    ``get_ca_certs``, leaves out a self-signed server certificate that is not a CA, which a
    bundle may name to trust one server.) Written once per process for each content, in a
    directory of this process's own (0700, removed at exit), so no other user can swap it
    between writing and reading.

    :raises HttpConfigError: the bundle is not a readable PEM file.
    """
    cafiles, _ = _default_roots()  # (a capath's hashed directory is no file to copy)
    bundle = (env.get(CA_BUNDLE_SETTING) or "").strip()
    if bundle:  # a bundle the clients would refuse is refused here (on a context of its own)
        _load_bundle(_client_context(), bundle, f"{CA_BUNDLE_SETTING}={bundle!r}")
    blocks: list[bytes] = []
    for name in [*cafiles, *([bundle] if bundle else [])]:
        try:
            blocks += _PEM_CERTIFICATE.findall(Path(name).read_bytes())
        except OSError as exc:
            if name != bundle:
                continue  # a default that went away: the others still hold
            raise HttpConfigError(f"{CA_BUNDLE_SETTING}={bundle!r} could not be read "
                                  f"({type(exc).__name__})") from None
    pem = b"\n".join(blocks) + b"\n"
    with _ROOTS_LOCK:
        global _roots_dir
        if _roots_dir is None:
            _roots_dir = tempfile.mkdtemp(prefix="toolhost-roots-")  # 0700
            atexit.register(shutil.rmtree, _roots_dir, ignore_errors=True)
        roots = Path(_roots_dir, hashlib.sha256(pem).hexdigest()[:32] + ".pem")
        if not roots.exists():
            staged = roots.with_suffix(".tmp")
            staged.write_bytes(pem)
            staged.replace(roots)
    return str(roots)


_PEM_CERTIFICATE: Final = re.compile(
    rb"-----BEGIN CERTIFICATE-----\r?\n.+?\r?\n-----END CERTIFICATE-----", re.DOTALL)
_ROOTS_LOCK = threading.Lock()
_roots_dir: str | None = None


def _checked_timeout(timeout: object) -> httpx.Timeout:
    """An explicit, finite, positive timeout for every phase (connect, read, write, pool)."""
    phases: dict[str, float | None]
    if isinstance(timeout, httpx.Timeout):
        phases = {f"timeout.{name}": value for name, value in timeout.as_dict().items()}
    elif isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
        phases = {"timeout": float(timeout)}
    else:
        raise ValueError(
            "an explicit timeout is required: pass timeout=<seconds> or an httpx.Timeout "
            f"with every phase set, not {timeout!r}"
        )
    for label, seconds in phases.items():
        if seconds is None or not math.isfinite(seconds) or seconds <= 0:
            raise ValueError(
                f"{label}={seconds!r} is refused: every timeout must be a finite number of "
                "seconds greater than 0"
            )
    return timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(phases["timeout"])


class HttpClients:
    """Builds the host's httpx clients from the settings; one SSL context, built here, shared."""

    def __init__(
        self,
        settings: Settings,
        *,
        transport: httpx.BaseTransport | None = None,
        async_transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._transport = transport
        self._async_transport = async_transport
        # Built (and TOOLHOST_CA_BUNDLE read and checked) now, so a bad bundle fails at
        # composition, not on a plugin's first request.
        self._ssl_context = _ssl_context(settings)

    @property
    def ssl_context(self) -> ssl.SSLContext:
        """The TLS context every client here verifies with (the MCP gateway's ``httpx2``
        client uses it too)."""
        return self._ssl_context

    def client(
        self, *, timeout: float | httpx.Timeout, headers: Mapping[str, str] | None = None
    ) -> httpx.Client:
        """A sync client; the caller closes it (``with clients.client(timeout=10) as c: ...``)."""
        checked = _checked_timeout(timeout)
        transport = self._transport
        if transport is None:
            transport = httpx.HTTPTransport(verify=self._ssl_context, trust_env=False, retries=0)
        return httpx.Client(
            transport=transport,
            verify=self._ssl_context,
            timeout=checked,
            headers=dict(headers) if headers is not None else None,
            trust_env=False,
            follow_redirects=False,
        )

    def async_client(
        self, *, timeout: float | httpx.Timeout, headers: Mapping[str, str] | None = None,
        limits: httpx.Limits | None = None,
    ) -> httpx.AsyncClient:
        """An async client; the caller closes it (``async with clients.async_client(...)``).
        ``limits``: its connection pool's (default httpx's: 100 connections)."""
        checked = _checked_timeout(timeout)
        transport = self._async_transport
        if transport is None:
            transport = httpx.AsyncHTTPTransport(
                verify=self._ssl_context, trust_env=False, retries=0,
                limits=limits if limits is not None else httpx.Limits(
                    max_connections=100, max_keepalive_connections=20),
            )
        return httpx.AsyncClient(
            transport=transport,
            verify=self._ssl_context,
            timeout=checked,
            headers=dict(headers) if headers is not None else None,
            trust_env=False,
            follow_redirects=False,
        )
