"""``toolhost serve``: the registry over the Model Context Protocol (the ``toolhost-core[mcp]`` extra).

Importing this package imports the ``mcp`` SDK, so a host without the extra fails here, where
``toolhost serve`` turns the ImportError into one line naming the extra.

- ``annotations``: the one table from classification to MCP tool annotations
- ``definitions``: tool definitions for ``tools/list``, from the registry
- ``calls``: ``tools/call`` through the pipeline, and the approval round trip
- ``approvals``: elicitation and finding a call already decided
- ``results``: Outcome to CallToolResult
- ``sessions``: one run per MCP session
- ``frames``: JSON-RPC errors for frames the transport could not read
- ``config``: TOOLHOST_MCP_* settings
- ``server``: the SDK server and its transports; ``serve``
"""

from toolhost._mcp.server import serve

__all__ = ["serve"]
