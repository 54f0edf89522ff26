"""Two people's mail on one host (issue #25): the operator imports each person's export with
its owner; over authenticated HTTP each person's agent reads their own mail, their own
correspondents and their own newsletters, and nothing of the other's: another person's
thread is no thread, another person's subscription no subscription, another person's
correspondent nobody. Erasing one owner leaves the other whole.

Over HTTP only: the owner of a call is its token's principal, which stdio does not have."""

from __future__ import annotations

import functools
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession

from .fake_services import Receiver
from .journey_support import Deployment, Person, meta, ok, run, write_tokens
from .mail_fixtures import (
    ALICE,
    CARL,
    COLLEAGUE,
    OWNER,
    colleague_mailbox,
    email_settings,
    import_mail,
    owner_mailbox,
)

pytest.importorskip("jwt", reason="the toolhost-core[oauth] extra (PyJWT) is not installed")

ANA, BEN = "ana-token-5d1a", "ben-token-c07e"
SCOPES = ["email.read", "email.write", "people.read"]


def _deployment(tmp_path: Path, receiver: Receiver) -> Deployment:
    tokens = write_tokens(tmp_path / "tokens.toml", (ANA, "ana", SCOPES), (BEN, "ben", SCOPES))
    deployment = Deployment(tmp_path, plugins="toolhost-email,toolhost-people",
                            AGENT_PEOPLE_ENABLED="1", TOOLHOST_HTTP_TOKENS_FILE=str(tokens),
                            **email_settings(), **receiver.settings())
    anas = import_mail(deployment, owner_mailbox(tmp_path / "ana.mbox", receiver.url()),
                       account=OWNER, owner="ana")
    bens = import_mail(deployment, colleague_mailbox(
        tmp_path / "ben.mbox", receiver.url("/unsubscribe/2?list=news")),
        account=COLLEAGUE, owner="ben")
    assert "(owner ana): 3 read, 3 added" in anas and "(owner ben): 2 read, 2 added" in bens
    return deployment


def test_each_person_reads_only_their_own_mail_and_people(tmp_path: Path,
                                                          receiver: Receiver) -> None:
    deployment = _deployment(tmp_path, receiver)
    ana, ben = Person(), Person()

    async def journey() -> None:
        async with deployment.http_server() as url, \
                deployment.session("http", url=url, token=ANA, person=ana) as anas, \
                deployment.session("http", url=url, token=BEN, person=ben) as bens:
            anas_inbox = ok(await anas.call_tool("email.context", {}))["inbox"]
            bens_inbox = ok(await bens.call_tool("email.context", {}))["inbox"]
            assert sorted(m["subject"] for m in anas_inbox) == ["Rent", "This week"]
            assert sorted(m["subject"] for m in bens_inbox) == ["Keys", "This week"]
            rent = next(m for m in anas_inbox if m["subject"] == "Rent")["source"]

            # Ana's thread is no thread to Ben: the same static refusal as a made-up id.
            theirs = await bens.call_tool("email.context", {"thread_id": rent["thread_id"]})
            made_up = await bens.call_tool("email.context", {"thread_id": "t_" + "0" * 32})
            assert theirs.is_error and made_up.is_error
            assert meta(theirs, "reasonCode") == "tool.not_found.unknown_thread"
            assert theirs.content == made_up.content
            assert ok(await anas.call_tool("email.context", {"thread_id": rent["thread_id"]}))

            # Each person's correspondents are theirs.
            async def found(client: ClientSession, query: str) -> list[str]:
                result = ok(await client.call_tool("people.search",
                                                   {"query": query, "limit": 5}))
                return [a for p in result["people"] for a in p["addresses"]]

            assert await found(anas, "alice") == [ALICE]
            assert await found(bens, "alice") == []
            assert await found(bens, "carl") == [CARL]
            assert await found(anas, "carl") == []

            # The same newsletter is two subscriptions; Ben's approved call with Ana's pair
            # is unknown_subscription, and no request leaves the host.
            (anas_list,) = ok(await anas.call_tool("email.subscriptions", {}))["subscriptions"]
            (bens_list,) = ok(await bens.call_tool("email.subscriptions", {}))["subscriptions"]
            assert anas_list["subscription_id"] != bens_list["subscription_id"]
            pair = {k: anas_list[k] for k in ("subscription_id", "evidence_digest")}
            tried = ok(await bens.call_tool("email.unsubscribe", {"requests": [pair]}))
            assert tried["results"] == [{"subscription_id": pair["subscription_id"],
                                         "outcome": "unknown_subscription"}]
            assert receiver.arrivals == []
            done = ok(await anas.call_tool("email.unsubscribe", {"requests": [pair]}))
            assert done["results"][0]["outcome"] == "requested"

            # The operator erases Ben's mail; Ana's stays whole.
            erased = await anyio.to_thread.run_sync(functools.partial(
                deployment.python, "-m", "toolhost_email.cli", "erase", "--owner", "ben"))
            assert erased.stdout == "erased owner ben: 2 messages removed\n", erased.stderr
            assert ok(await bens.call_tool("email.context", {}))["inbox"] == []
            assert await found(bens, "carl") == []
            assert len(ok(await anas.call_tool("email.context", {}))["inbox"]) == 2

    run(journey)
    assert ana.approved_tools() == ["email.unsubscribe"]
    assert ben.approved_tools() == ["email.unsubscribe"]
    assert [a.path for a in receiver.arrivals] == ["/unsubscribe/1?list=news"]
    by_tool: dict[str, set[str]] = {}
    for row in deployment.invocations():
        by_tool.setdefault(row["tool_name"], set()).add(row["principal_id"])
    assert by_tool["email.unsubscribe"] == {"ana", "ben"}
