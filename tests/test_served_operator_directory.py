"""A server's operator directory (TOOLHOST_MCP_WORKSPACE) is pinned and claimed for as long as
the server runs, not only checked when it starts (D411, D469).

Each MCP session's run opens the directory again by name. Between two sessions, with no run of
the server live, a run on its parent could have its approved sandboxed command replace it with
a link to the data directory's parent; the next session then read and wrote
``data/cache/validators.json`` (code every start runs, D256) with no approval. Now a session
whose run would start anywhere else than the directory the server started with is refused
(the server and its other sessions go on, the operator is told once), and no run may start on
a directory holding the served one, or inside it, while the server runs, even when it has no
session; a SIGKILLed server's claim blocks nothing.

Real `toolhost serve --http` processes on 127.0.0.1, the official MCP SDK's streamable HTTP
client, real `toolhost call` commands, one data directory per test."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from journeys.journey_support import Deployment, assert_no_traceback, ok, run
from loopback_ports import free_port
from mcp.shared.exceptions import MCPError

PLUGINS = "toolhost-workspace"
#: What the client reads: static (the operator's log says what changed).
REFUSED = ("The directory this server serves as the workspace is no longer the one it was "
           "started with, or can no longer be used safely, so no run starts in this session. "
           "Ask the server's operator: its log says what changed.")
_NESTED = ("live on this host, where either run's tools could replace the inner directory, or "
           "one on its way, with a link to any directory on the host: name a directory that "
           "neither holds it nor is inside it, or stop that server")


def _project(tmp_path: Path) -> tuple[Deployment, Path, Path]:
    """A deployment serving ``P/proj`` (data directory ``tmp_path/data``): it, P, proj."""
    proj = tmp_path / "P" / "proj"
    proj.mkdir(parents=True)
    (proj / "notes.txt").write_text("project notes\n")
    return Deployment(tmp_path, PLUGINS, TOOLHOST_MCP_WORKSPACE=str(proj)), proj.parent, proj


def _refused(result: subprocess.CompletedProcess[str]) -> str:
    assert (result.returncode, result.stdout) == (2, ""), (result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def _list_files(deployment: Deployment, workspace: Path, run_id: str,
                ) -> subprocess.CompletedProcess[str]:
    return deployment.toolhost("call", "workspace.list_files", "--args", '{"path": ""}',
                               "--workspace", str(workspace), "--run", run_id)


def _serving(deployment: Deployment) -> subprocess.Popen[bytes]:
    """A `toolhost serve --http` of the deployment, once it says it serves (stopped by the
    test, however it chooses)."""
    log = deployment.tmp_path / f"serve-{time.monotonic_ns()}.stderr.log"
    with log.open("w") as errlog:
        process = subprocess.Popen(
            [sys.executable, "-m", "toolhost._cli", "serve", "--http",
             f"127.0.0.1:{free_port()}"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=errlog, env=deployment.env())
    deadline = time.monotonic() + 60
    while "toolhost: serving " not in log.read_text(errors="replace"):
        assert process.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.05)
    return process


def test_a_session_after_the_served_directory_was_swapped_for_a_link_is_refused(
        tmp_path: Path) -> None:
    deployment, parent, proj = _project(tmp_path)
    cache = deployment.data_dir / "cache"

    async def journey() -> None:
        async with deployment.http_server() as url:
            async with deployment.session("http", url=url) as first:
                assert ok(await first.call_tool("workspace.read_text", {"path": "notes.txt"}))
                # The review's approved command, made here directly (a run on P can no longer
                # start while the server runs): proj is now a link to the data directory's
                # parent. The original is kept aside, as the open session's directory.
                proj.rename(parent / "proj.orig")
                proj.symlink_to(tmp_path)
                async with deployment.session("http", url=url) as second:
                    for name, arguments in (
                            ("workspace.read_text", {"path": "data/cache/validators.json"}),
                            ("workspace.write_text", {"path": "data/cache/planted.txt",
                                                      "content": "by the model"})):
                        with pytest.raises(MCPError) as refused:
                            await second.call_tool(name, arguments)
                        assert refused.value.error.message == REFUSED
                # The open session goes on in the directory it started in.
                assert ok(await first.call_tool("workspace.write_text", {
                    "path": "still.txt", "content": "the session's own"}))
            # The directory put back: the next session starts there again.
            proj.unlink()
            (parent / "proj.orig").rename(proj)
            async with deployment.session("http", url=url) as third:
                assert ok(await third.call_tool("workspace.read_text", {"path": "still.txt"}))

    run(journey)
    assert not (cache / "planted.txt").exists()
    assert [i["tool_name"] for i in deployment.invocations()] == [
        "workspace.read_text", "workspace.write_text", "workspace.read_text"]
    said = [line for line in deployment.stderr().splitlines() if "workspace_refused" in line]
    assert len(said) == 1, said  # once, for both refused calls
    assert (f"TOOLHOST_MCP_WORKSPACE={str(proj)!r} no longer leads to the directory this "
            f"server started with: it leads to {str(tmp_path)!r} now") in said[0]
    assert_no_traceback(deployment.stderr())


def test_no_run_starts_on_the_served_directorys_parent_while_the_server_runs(
        tmp_path: Path) -> None:
    deployment, parent, proj = _project(tmp_path)
    (proj / "sub").mkdir()
    server = _serving(deployment)
    try:
        # No session has started: the server has no live run, and its directory is live.
        served = f"the directory a toolhost serve (pid {server.pid}) serves ({str(proj)!r})"
        assert _refused(_list_files(deployment, parent, "OUTER")) == (
            f"toolhost: --workspace {str(parent)!r} holds {served}, {_NESTED}")
        assert _refused(_list_files(deployment, proj / "sub", "INNER")) == (
            f"toolhost: --workspace {str(proj / 'sub')!r} is inside {served}, {_NESTED}")
        # Nor does a second server on the parent (D469 left two idle servers both passing).
        second = subprocess.run([sys.executable, "-m", "toolhost._cli", "serve"],
                                env=deployment.env(TOOLHOST_MCP_WORKSPACE=str(parent)),
                                stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                timeout=120, check=False)
        assert _refused(second) == (
            f"toolhost: TOOLHOST_MCP_WORKSPACE {str(parent)!r} holds {served}, {_NESTED}")
        # The same directory is shared, as the server's own sessions share it.
        assert _list_files(deployment, proj, "SAME").returncode == 0
        assert deployment.toolhost("runs", "end", "SAME").returncode == 0
    finally:
        server.send_signal(signal.SIGTERM)
        assert server.wait(30) == 0
    # Stopped: the directory is the operator's own again.
    assert _list_files(deployment, parent, "OUTER").returncode == 0
    assert deployment.toolhost("runs", "end", "OUTER").returncode == 0


def test_a_sigkilled_servers_claim_blocks_nothing(tmp_path: Path) -> None:
    deployment, parent, _ = _project(tmp_path)
    server = _serving(deployment)
    server.send_signal(signal.SIGKILL)
    assert server.wait(30) == -signal.SIGKILL
    claims = deployment.data_dir / "workspaces" / ".served"
    assert len(os.listdir(claims)) == 1  # left behind, held by nobody
    assert _list_files(deployment, parent, "OUTER").returncode == 0
    assert deployment.toolhost("runs", "end", "OUTER").returncode == 0
    # The next server removes it, and claims its own.
    server = _serving(deployment)
    try:
        assert [json.loads((claims / n).read_text())["pid"] for n in os.listdir(claims)] == [
            server.pid]
    finally:
        server.send_signal(signal.SIGTERM)
        assert server.wait(30) == 0
    assert os.listdir(claims) == []


@pytest.mark.parametrize("existing", [False, True], ids=["new run", "existing run"])
def test_a_claim_taken_between_a_calls_check_and_its_run_refuses_the_call(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        existing: bool) -> None:
    # A server claims P/proj just after `call --workspace P` checked and found nothing: the
    # call registers its run, checks again, and sees the claim (each side registers, then
    # checks). Before, the run went on live on P beside the server's directory.
    import toolhost._composition as composition
    from toolhost._cli.main import main

    deployment, parent, proj = _project(tmp_path)
    for name, value in deployment.settings.items():
        monkeypatch.setenv(name, value)
    real = composition.workspace_refusal
    releases: list[Any] = []

    def checked_then_claimed(*args: Any, **kwargs: Any) -> str | None:
        answer = real(*args, **kwargs)
        if not releases:  # the server starts here, between the check and the run
            releases.append(composition.claim_served(args[2], proj, "claim-1"))
        return answer

    if existing:  # the operator's run, live on P before: refused, never ended here
        assert _list_files(deployment, parent, "OUTER").returncode == 0
    monkeypatch.setattr(composition, "workspace_refusal", checked_then_claimed)
    try:
        code = main(["call", "workspace.list_files", "--args", '{"path": ""}',
                     "--workspace", str(parent), "--run", "OUTER"])
        served = (f"the directory a toolhost serve (pid {os.getpid()}) serves "
                  f"({os.path.realpath(proj)!r})")
        assert (code, capsys.readouterr()) == (2, (
            "", f"toolhost: --workspace {str(parent)!r} holds {served}, {_NESTED}\n"))
    finally:
        releases[0]()
    listed = deployment.toolhost("runs", "list", "--json")
    assert (listed.returncode, json.loads(listed.stdout)) == (0, [
        {"run_id": "OUTER", "directory": str(parent), "workspace": True}] if existing else [])
