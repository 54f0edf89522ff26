"""What a paused call tells the model about the run's files: a run's own workspace is discarded
at the pause (D87), an operator's directory (``TOOLHOST_MCP_WORKSPACE``) is kept and the
approved call runs in it (D219). Real `toolhost serve` on stdio, the SDK's client, the fixture
plugin's gated fxw.external_write, approved at the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
from installed import install_fake_plugin

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from test_mcp_server import (
    FIXTURE_SOURCE,
    Served,
    meta,
    run,
    session,
    text_of,
)

from toolhost._model import host_reasons

DISCARDED = ("Meanwhile this run's workspace is discarded: the files made before this pause "
             "are gone, the approved call starts without them, and on this host the calls "
             "after it see what it wrote.")
KEPT = ("Meanwhile this run's workspace, a directory of the operator's, is kept as it is: the "
        "approved call runs on the files it holds then, and on this host the calls after it "
        "see what it wrote.")


def served_with(tmp_path: Path, **settings: str) -> Served:
    site = tmp_path / "site"
    install_fake_plugin(site, "fake-mcp", "fake_mcp", FIXTURE_SOURCE.read_text())
    return Served(tmp_path, plugins="fake-mcp,toolhost-workspace", site=site,
                  FXW_LOG=str(tmp_path / "fxw.log"), **settings)


@pytest.mark.parametrize("operators", [True, False], ids=["operators-directory", "runs-own"])
def test_a_paused_call_says_what_becomes_of_the_runs_files(tmp_path: Path,
                                                           operators: bool) -> None:
    project = tmp_path / "project"
    project.mkdir()
    served = served_with(tmp_path, **({"TOOLHOST_MCP_WORKSPACE": str(project)}
                                      if operators else {}))
    try:
        async def main() -> None:
            async with session(served) as s:
                wrote = await s.call_tool("workspace.write_text",
                                          {"path": "notes.md", "content": "kept?"})
                assert not wrote.is_error, text_of(wrote)
                paused = await s.call_tool("fxw.external_write", {"destination": "a"})
                assert meta(paused, "status") == "awaiting_approval"
                text = text_of(paused)
                invocation_id = meta(paused, "invocationId")
                assert text == (
                    f"{host_reasons.AWAITING_APPROVAL_TEXT} Invocation {invocation_id}: an "
                    f"operator approves it with `toolhost approve {invocation_id}`; then call "
                    "this tool again with the same arguments to get its result. "
                    + (KEPT if operators else DISCARDED))
                assert str(project) not in text  # the model is never told the path
                assert served.toolhost("approve", invocation_id).returncode == 0
                # What the text said: the file written before the pause is still there for an
                # operator's directory, gone for the run's own workspace.
                read = await s.call_tool("workspace.read_text", {"path": "notes.md"})
                assert read.is_error is not operators, text_of(read)

        run(main)
    finally:
        served.stop_leftovers()
    assert (project / "notes.md").exists() is operators
