"""gateway_upstream.py's MCP server on Streamable HTTP (over TLS), recording what reaches it.

``python gateway_https_upstream.py NAME PORT_FILE HEADERS_LOG [--tls CERTFILE KEYFILE]
[--redirect-to URL]`` serves the SDK's Streamable HTTP app of ``gateway_upstream.build()`` (its
tools, and its ``GW_LOG`` of calls) with uvicorn on 127.0.0.1, over TLS with ``--tls``. The port
is the server's own choice, written to PORT_FILE once the socket listens, so no test races
another for a free port. Before the app sees a request, one JSON line per HTTP request is
appended to HEADERS_LOG: its method, its path and every ``Authorization`` value it carried. A
TLS handshake the client refuses never becomes a request, so it logs nothing. With
``--redirect-to URL``, ``/moved`` answers ``307 Temporary Redirect`` to URL (an absolute URL, or
a path on this server); the request that got it is logged like any other.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


class Recording:
    """ASGI middleware: log each HTTP request's Authorization values, then answer ``/moved``
    with the redirect, or hand the request to the SDK's app."""

    def __init__(self, app: App, log_path: str, redirect_to: str | None) -> None:
        self.app = app
        self.log_path = log_path
        self.redirect_to = redirect_to

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            authorization = [value.decode("latin-1") for name, value in scope["headers"]
                             if name.lower() == b"authorization"]
            line = json.dumps({"method": scope["method"], "path": scope["path"],
                               "authorization": authorization})
            with open(self.log_path, "a", encoding="utf-8") as f:
                f.write(line + "\n")
            if self.redirect_to is not None and scope["path"] == "/moved":
                await send({"type": "http.response.start", "status": 307,
                            "headers": [(b"location", self.redirect_to.encode()),
                                        (b"content-length", b"0")]})
                await send({"type": "http.response.body", "body": b""})
                return
        await self.app(scope, receive, send)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("name")
    parser.add_argument("port_file")
    parser.add_argument("headers_log")
    parser.add_argument("--tls", nargs=2, metavar=("CERTFILE", "KEYFILE"))
    parser.add_argument("--redirect-to")
    args = parser.parse_args()

    import uvicorn
    from gateway_upstream import build  # its NAME is sys.argv[1], this server's name

    app = Recording(build().streamable_http_app(), args.headers_log, args.redirect_to)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    # Written whole, then renamed into place: a reader never sees half a port number.
    partial = f"{args.port_file}.partial"
    with open(partial, "w", encoding="utf-8") as f:
        f.write(str(sock.getsockname()[1]))
    os.replace(partial, args.port_file)
    certfile, keyfile = args.tls if args.tls else (None, None)
    config = uvicorn.Config(app, log_level="warning", ssl_certfile=certfile, ssl_keyfile=keyfile)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
