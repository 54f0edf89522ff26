"""The owner's correspondents: from the imported mail, the agent finds a person, reads what the
mail says about them, and pages through their history; a chat pinned to people.history 1.0.0
(``toolhost serve --pin people.history=1.0.0``, or TOOLHOST_MCP_PINS) keeps 1.0.0's contract,
an unpinned one gets 1.1.0 and its source reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp import ClientSession

from .journey_support import Deployment, Person, Transport, meta, ok, run
from .mail_fixtures import ALICE, import_mail, owner_mailbox
from .mail_fixtures import RENT_BODY as ALICES_MAIL

PAGE_KEYS = {"person_id", "interactions", "next_cursor"}


def _deployment(tmp_path: Path) -> Deployment:
    deployment = Deployment(tmp_path, plugins="toolhost-email,toolhost-people",
                            AGENT_PEOPLE_ENABLED="1")
    said = import_mail(deployment, owner_mailbox(tmp_path / "owner.mbox",
                                                 "https://unsub.test/unsubscribe/1?list=news"))
    assert "3 added" in said, said
    return deployment


async def _listed_history(client: ClientSession) -> Any:
    listed = {t.name: t for t in (await client.list_tools()).tools}
    assert {"people.search", "people.context", "people.history"} <= set(listed)
    return listed["people.history"]


async def _find_alice(client: ClientSession) -> str:
    found = ok(await client.call_tool("people.search", {"query": "alice"}))
    (alice,) = found["people"]
    assert (alice["name"], alice["addresses"]) == ("Alice", [ALICE])
    assert (alice["sent"], alice["received"]) == (1, 1)
    person_id: str = alice["person_id"]
    return person_id


async def _history_page(client: ClientSession, person_id: str, version: str) -> list[Any]:
    paged = await client.call_tool("people.history", {"person_id": person_id})
    assert meta(paged, "version") == version
    page = ok(paged)
    assert set(page) == PAGE_KEYS  # the page shape 1.0.0 and 1.1.0 share
    assert page["next_cursor"] is None
    assert [(i["subject"], i["direction"]) for i in page["interactions"]] == [
        ("Re: Rent", "sent"), ("Rent", "received")]  # newest first
    interactions: list[Any] = page["interactions"]
    return interactions


def test_the_owner_looks_up_a_correspondent_pinned_and_unpinned(
        tmp_path: Path, transport: Transport) -> None:
    deployment = _deployment(tmp_path)
    person = Person()

    async def journey() -> None:
        # Unpinned: people.history 1.1.0, which can read one interaction's original mail.
        async with deployment.session(transport, person=person) as client:
            history = await _listed_history(client)
            assert (history.meta or {})["toolhost/version"] == "1.1.0"
            assert "interaction_id" in history.input_schema["properties"]

            alice = await _find_alice(client)
            context = ok(await client.call_tool("people.context", {"person_id": alice}))
            assert (context["addresses"], context["sent"], context["received"]) == (
                [ALICE], 1, 1)
            assert [t["interactions"] for t in context["recent_threads"]] == [2]  # one thread

            _, received = await _history_page(client, alice, "1.1.0")
            source_read = await client.call_tool("people.history", {
                "person_id": alice, "interaction_id": received["interaction_id"]})
            assert meta(source_read, "version") == "1.1.0"
            assert meta(source_read, "outputTrust") == "EXTERNAL_UNTRUSTED"
            source = ok(source_read)
            assert set(source) == {"person_id", "source"}
            assert ALICES_MAIL.strip() in source["source"]["text"]

        # Pinned by flag: the same name serves 1.0.0, its schemas and its result shape.
        async with deployment.session(transport, "--pin", "people.history=1.0.0",
                                      person=person) as client:
            history = await _listed_history(client)
            assert (history.meta or {})["toolhost/version"] == "1.0.0"
            assert "interaction_id" not in history.input_schema["properties"]
            assert history.output_schema is not None
            assert set(history.output_schema["required"]) == PAGE_KEYS

            alice = await _find_alice(client)
            _, received = await _history_page(client, alice, "1.0.0")
            refused = await client.call_tool("people.history", {
                "person_id": alice, "interaction_id": received["interaction_id"]})
            assert refused.is_error  # 1.0.0 has no source reads
            assert meta(refused, "reasonCode") == "tool.invalid_arguments.schema"

        # Pinned by the setting a desktop client's config can carry.
        async with deployment.session(transport, person=person,
                                      TOOLHOST_MCP_PINS="people.history=1.0.0") as client:
            history = await _listed_history(client)
            assert (history.meta or {})["toolhost/version"] == "1.0.0"
            await _history_page(client, await _find_alice(client), "1.0.0")

    run(journey)
    assert person.asked == []  # reading people needs nobody's approval
    versions = [r["tool_version"] for r in deployment.invocations()
                if r["tool_name"] == "people.history" and r["state"] == "succeeded"]
    assert versions == ["1.1.0", "1.1.0", "1.0.0", "1.0.0"]
