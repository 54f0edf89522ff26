"""The ground every journey stands on: a client connects, sees the tools, calculates, and
writes and reads a file of its session's workspace."""

from __future__ import annotations

from pathlib import Path

from .journey_support import Deployment, Person, Transport, meta, ok, run, text_of


def test_a_client_connects_lists_calculates_and_keeps_a_file(tmp_path: Path,
                                                            transport: Transport) -> None:
    deployment = Deployment(tmp_path, plugins="toolhost-math,toolhost-workspace")
    person = Person()

    async def journey() -> None:
        async with deployment.session(transport, person=person) as client:
            assert client.initialize_result is not None
            assert client.initialize_result.server_info.name == "toolhost"
            assert client.initialize_result.capabilities.tools is not None
            listed = {t.name: t for t in (await client.list_tools()).tools}
            assert {"math.calculate", "workspace.write_text", "workspace.read_text"} <= set(listed)

            answer = await client.call_tool("math.calculate", {"expression": "17 * 23"})
            assert (text_of(answer), ok(answer)["result"]) == ("391", "391")
            assert meta(answer, "status") == "succeeded"

            wrote = ok(await client.call_tool(
                "workspace.write_text", {"path": "notes/plan.md", "content": "# Plan\n"}))
            read = ok(await client.call_tool("workspace.read_text", {"path": "notes/plan.md"}))
            assert read["content"] == "# Plan\n"
            assert read["checksum"] == wrote["checksum"]

    run(journey)
    assert person.asked == []  # nothing here needs anyone's approval
    rows = deployment.invocations()
    assert [r["state"] for r in rows] == ["succeeded"] * 3
    assert len({r["run_id"] for r in rows}) == 1  # one session, one run
