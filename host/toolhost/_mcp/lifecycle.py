"""One ``initialize`` a session: a second one on a session already initialized is refused.

When: every request, on stdio and on streamable HTTP alike (a server middleware, as
``sessions.SessionEnds`` is). What: an ``initialize`` on a connection whose handshake has
committed (the SDK records the client's params then) is answered ``-32600 Invalid Request``
with a static message, and nothing of the session changes. Why: MCP's lifecycle makes
initialization the first interaction of a session; the SDK (2.3.0) runs a repeated one and
overwrites the session's negotiated protocol version and the client's capabilities (whether it
can be asked to approve a call, for one) under the calls in flight. The TypeScript SDK refuses
it the same way over HTTP ("Server already initialized", -32600). A first ``initialize`` that
failed committed nothing and may be sent again.
"""

from __future__ import annotations

from typing import Any, Final

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_REQUEST

from toolhost._composition import get_logger

__all__ = ["ALREADY_INITIALIZED", "OneInitialize"]

#: What a repeated ``initialize`` is answered (with ``-32600``).
ALREADY_INITIALIZED: Final = ("This session is already initialized: initialize is sent once, "
                              "as a session's first request. To start over, open a new session.")


class OneInitialize:
    """Server middleware: refuses an ``initialize`` once the session's handshake committed."""

    async def __call__(self, ctx: ServerRequestContext[Any, Any],
                       call_next: CallNext) -> HandlerResult:
        if ctx.method == "initialize" and ctx.session.client_params is not None:
            # Info, not warning: any client can send it as often as it likes.
            get_logger().info("mcp.initialize.repeated")
            raise MCPError(code=INVALID_REQUEST, message=ALREADY_INITIALIZED)
        return await call_next(ctx)
