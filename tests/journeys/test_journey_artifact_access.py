"""A file handed to one client is that client's principal's, and only while it lives: a session
of another principal on the same host cannot read it, and once it has expired its own session
cannot either. Both refusals are the same static MCP error, naming nothing."""

from __future__ import annotations

from pathlib import Path

from .journey_support import (
    Deployment,
    Person,
    Transport,
    artifact_uri,
    ok,
    one_link,
    read_resource_bytes,
    refusal,
    run,
)

NOTE = "Meeting moved to Thursday 10:00.\n"
OWNER = "desk-of-ana"
STRANGER = "desk-of-bo"


def test_a_file_is_its_principals_and_only_while_it_lives(tmp_path: Path,
                                                          transport: Transport) -> None:
    deployment = Deployment(tmp_path, plugins="toolhost-artifact")

    async def journey() -> None:
        async with deployment.session(transport, person=Person(),
                                      TOOLHOST_MCP_PRINCIPAL=OWNER) as mine:
            exported = await mine.call_tool("artifact.export",
                                            {"content": NOTE, "name": "note.md"})
            artifact = ok(exported)
            link = one_link(exported)
            assert link.uri == artifact_uri(artifact["id"])
            content, _ = await read_resource_bytes(mine, link.uri)
            assert content == NOTE.encode()

            # Another principal's session on the same host and data directory.
            async with deployment.session(transport, person=Person(),
                                          TOOLHOST_MCP_PRINCIPAL=STRANGER) as theirs:
                not_theirs = await refusal(theirs, link.uri)

            # Past its expiry, not even its own session reads it.
            deployment.expire_artifact(artifact["id"])
            expired = await refusal(mine, link.uri)

        for error in (not_theirs, expired):
            message = error.error.message
            assert artifact["id"] not in message and OWNER not in message
            assert STRANGER not in message and NOTE.strip() not in message
        assert expired.error.message == not_theirs.error.message  # refused the same way
        assert expired.error.code == not_theirs.error.code

    run(journey)
