"""A reference server bench_mcp.py spawns: the MCP Python SDK's own high-level server,
``mcp.server.mcpserver.MCPServer`` (mcp 2.x; the class mcp 1.x called ``FastMCP``, not the
``fastmcp`` package, which bench/fastmcp_calculate.py runs), exposing math.calculate as one
decorated function.

The function body is the same toolhost_math ``calculate`` the plugin runs, so the servers
differ in what wraps the body (the SDK's decorator machinery here, toolhost's pipeline there),
not in the arithmetic. Async, like the plugin's callable: a sync function would pay MCPServer's
worker-thread hop, which toolhost's math tool does not.

Run: python bench/mcpserver_calculate.py   (stdio; the bench starts it)
"""

from __future__ import annotations

from typing import TypedDict

from mcp.server.mcpserver import MCPServer

from toolhost_math.tool import calculate as _calculate

server = MCPServer("mcpserver-calculate")


class Calculated(TypedDict):
    result: str
    result_exact: bool
    expression: str


@server.tool(name="math.calculate")
async def calculate(expression: str) -> Calculated:
    """Evaluate an arithmetic expression in decimal arithmetic, e.g. 17 * 23."""
    return Calculated(result=(c := _calculate(expression)).result, result_exact=c.exact,
                      expression=expression)


if __name__ == "__main__":
    server.run("stdio")
