"""A call paused in a session served with `TOOLHOST_MCP_WORKSPACE` is told the operator's
directory is kept and the approved call runs on its files (D458); that holds when the operator
approves after the session has ended too. Real `toolhost serve` on stdio, the SDK's client
(no elicitation: the call is left waiting), approved at the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from test_mcp_server import Served, meta, run, session


def test_a_call_approved_after_its_session_ended_runs_in_the_served_directory(
    tmp_path: Path,
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "marker.txt").write_text("the operator's\n")
    served = Served(tmp_path, plugins="toolhost-workspace,toolhost-sandbox",
                    TOOLHOST_MCP_WORKSPACE=str(project))
    ids: list[str] = []
    try:
        async def main() -> None:
            async with session(served) as s:
                paused = await s.call_tool("sandbox.run_command",
                                           {"command": "cat marker.txt > out.txt"})
                assert meta(paused, "status") == "awaiting_approval"
                ids.append(meta(paused, "invocationId"))

        run(main)
        # The session, and its run, have ended: the approval still runs in the directory.
        approved = served.toolhost("approve", ids[0])
        assert approved.returncode == 0, approved.stderr
        assert (project / "out.txt").read_text() == "the operator's\n"
    finally:
        served.stop_leftovers()
