"""Journeys: what a person at an MCP client does, end to end, against `toolhost serve`.

Each journey is one test that reads as the person's steps, run twice by the ``transport``
fixture: over stdio (the client spawns the server) and over streamable HTTP (the test starts
``serve --http`` and connects to ``/mcp``), always with the MCP SDK's own ClientSession and
under the default policy. To add one:

    def test_the_person_does_something(tmp_path: Path, transport: Transport) -> None:
        deployment = Deployment(tmp_path, plugins="toolhost-...", SOME_FLAG="1")
        person = Person()                      # answers approval and feedback forms

        async def journey() -> None:
            async with deployment.session(transport, person=person) as client:
                result = ok(await client.call_tool("tool.name", {...}))

        run(journey)
        assert person.approved_tools() == [...]

journey_support.py is the harness (Deployment, Person, result readers), fake_services.py the
loopback HTTPS services tools reach (TensorScale, a one-click receiver), mail_fixtures.py the
owner's mailbox. A missing plugin, tool or capability fails a journey; nothing here skips.

This directory is a package (this file) so that its conftest.py is imported as
``journeys.conftest``: a second top-level ``conftest`` module would replace tests/conftest.py
in ``sys.modules`` and break every host test that does ``from conftest import ...``. Modules
here import each other relatively (``from .journey_support import ...``).
"""
