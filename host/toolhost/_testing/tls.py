"""An HTTPS server on loopback for tests of what a tool or the host sends over the network.

``LoopbackTLSServer`` is a ``ThreadingHTTPServer`` on 127.0.0.1 at a free port with a
certificate from a throwaway ``trustme`` CA; the CA's certificate is written to a PEM file,
what ``TOOLHOST_CA_BUNDLE`` names, so the host trusts it exactly as an operator's extra root.
``loopback_tls_server`` runs one in a thread and shuts it down after. trustme is a test
dependency: it is imported only here, when a server is made.
"""

from __future__ import annotations

import os
import ssl
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import pytest

if TYPE_CHECKING:
    import trustme

__all__ = ["LOOPBACK", "LoopbackTLSServer", "StartTLSServer", "loopback_tls_server",
           "toolhost_tls_server"]

LOOPBACK = "127.0.0.1"


class LoopbackTLSServer(ThreadingHTTPServer):
    """An HTTPS server on ``LOOPBACK`` whose ``handler`` answers each request in a thread of
    its own. A subclass adds what its handler records; ``handler`` reaches it as
    ``self.server``.

    ``base_url``: ``https://127.0.0.1:PORT``; ``port``; ``ca_bundle``: the CA's PEM file;
    ``release``: set when the server shuts down, so a handler that stalls on it ends.
    """

    daemon_threads = True

    def __init__(self, handler: type[BaseHTTPRequestHandler], context: ssl.SSLContext,
                 ca_bundle: Path) -> None:
        super().__init__((LOOPBACK, 0), handler)
        self.context = context
        self.ca_bundle = ca_bundle
        self.release = threading.Event()
        self.port: int = self.server_address[1]
        self.base_url = f"https://{LOOPBACK}:{self.port}"

    def get_request(self) -> tuple[Any, Any]:
        # The handshake happens in the handler's thread, so a client that refuses the
        # certificate never stalls the accept loop.
        sock, address = super().get_request()
        return self.context.wrap_socket(sock, server_side=True,
                                        do_handshake_on_connect=False), address

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Handshakes a verifying client aborts, and clients that hang up mid-reply, are what
        # these tests provoke: nothing to print.
        pass


S = TypeVar("S", bound=LoopbackTLSServer)


@contextmanager
def loopback_tls_server(
    handler: type[BaseHTTPRequestHandler],
    directory: Path,
    *,
    names: Sequence[str] = (LOOPBACK, "localhost"),
    ca: trustme.CA | None = None,
    server_class: type[S] = LoopbackTLSServer,  # type: ignore[assignment]
) -> Iterator[S]:
    """A running ``server_class`` answering with ``handler``, its certificate for ``names``
    issued by ``ca`` (a fresh CA when omitted), whose PEM is written to a new file in
    ``directory`` (``server.ca_bundle``); shut down, its socket closed and its thread joined
    on exit."""
    import trustme

    ca = ca if ca is not None else trustme.CA()
    # A name of its own: several servers of one test share its directory.
    fd, name = tempfile.mkstemp(prefix="tls-ca-", suffix=".pem", dir=directory)
    os.close(fd)
    bundle = Path(name)
    ca.cert_pem.write_to_path(str(bundle))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(*names).configure_cert(context)
    server = server_class(handler, context, bundle)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()
        thread.join(10)


class StartTLSServer(Protocol):
    """The ``toolhost_tls_server`` fixture's type: ``loopback_tls_server``'s arguments less
    the directory (the test's own)."""

    def __call__(self, handler: type[BaseHTTPRequestHandler], *,
                 names: Sequence[str] = ..., ca: trustme.CA | None = ...,
                 server_class: type[S] = ...) -> S: ...


@pytest.fixture
def toolhost_tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartTLSServer]:
    """``toolhost_tls_server(handler, ...)`` starts a ``loopback_tls_server`` that is shut
    down when the test ends (see ``loopback_tls_server`` for the arguments)."""
    with ExitStack() as stack:
        def start(handler: type[BaseHTTPRequestHandler], **options: Any) -> Any:
            directory = tmp_path_factory.mktemp("tls")
            return stack.enter_context(loopback_tls_server(handler, directory, **options))

        yield start
