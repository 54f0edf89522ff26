"""A reference server bench_mcp.py spawns: the ``fastmcp`` package (``fastmcp.FastMCP``, a
framework of its own over the MCP SDK; a bench-only dependency, never toolhost's) exposing
math.calculate as one decorated function.

The body is the same toolhost_math ``calculate`` the plugin runs, and async, as in
bench/mcpserver_calculate.py, so the servers differ only in what wraps the body.

Run: python bench/fastmcp_calculate.py   (stdio; the bench starts it; needs ``fastmcp``)
"""

from __future__ import annotations

from fastmcp import FastMCP
from typing_extensions import TypedDict  # pydantic needs it for a TypedDict before 3.12

from toolhost_math.tool import calculate as _calculate

server = FastMCP("fastmcp-calculate")


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
    server.run("stdio", show_banner=False)
