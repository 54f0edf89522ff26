"""The owner's mail: the operator imports an export; the owner's agent reads the mail, records
the owner's feedback in the owner's own words, lists the newsletters and, with the owner's
approval, unsubscribes from one with exactly one RFC 8058 request.

email.feedback over MCP asks the person: a form with one string field ``text`` whose default
is the model's proposed wording. What the person accepts is what is stored (at USER trust);
a client that cannot be asked gets ``tool.permission_denied.needs_user``.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from .fake_services import Receiver
from .journey_support import Deployment, Person, Transport, meta, ok, run
from .mail_fixtures import LIST_ID, email_settings, import_mail, owner_mailbox

PROPOSAL = "Use a formal tone with the landlord."
#: What the owner types into the form instead of the model's proposal.
TYPED = "Please use a formal tone with my landlord, and sign as Best regards, O."
#: Words of both (the tool's quote argument, for a server that still checks one).
QUOTE = "a formal tone"
ONE_CLICK = b"List-Unsubscribe=One-Click"


def _deployment(tmp_path: Path, receiver: Receiver) -> Deployment:
    deployment = Deployment(tmp_path, plugins="toolhost-email", **email_settings(),
                            **receiver.settings())
    said = import_mail(deployment, owner_mailbox(tmp_path / "owner.mbox", receiver.url()))
    assert "3 added" in said, said
    return deployment


def _stored_feedback(deployment: Deployment) -> list[str]:
    """The feedback every host's mail cache holds (one host's, but for the hosts transport's
    two: the feedback is in the cache of the host the session lives on)."""
    stored = []
    for data_dir in deployment.data_dirs:
        cache = data_dir / "plugins" / "toolhost-email" / "mail.sqlite3"
        with contextlib.closing(sqlite3.connect(cache)) as conn:
            stored += [r[0] for r in conn.execute(
                "SELECT feedback FROM feedback ORDER BY recorded_at")]
    return stored


def test_the_owner_reads_gives_feedback_in_their_own_words_and_unsubscribes(
        tmp_path: Path, transport: Transport, receiver: Receiver) -> None:
    deployment = _deployment(tmp_path, receiver)
    person = Person(types_feedback=TYPED)

    async def journey() -> None:
        async with deployment.session(transport, person=person) as client:
            context = ok(await client.call_tool("email.context", {}))
            assert "Rent" in [m["subject"] for m in context["inbox"]]
            assert context["feedback"] == []

            # The agent proposes wording; the owner corrects it in the form.
            proposed = await client.call_tool(
                "email.feedback", {"feedback": PROPOSAL, "quote": QUOTE})
            assert person.kinds() == ["feedback"], (
                f"the owner was asked {person.asked!r}; the call answered {proposed!r}")
            assert person.asked[0].default == PROPOSAL
            recorded = ok(proposed)
            assert recorded["status"] == "applied"
            shown = ok(await client.call_tool("email.context", {}))["feedback"]
            assert [(f["feedback_id"], f["feedback"]) for f in shown] == [
                (recorded["feedback_id"], TYPED)]

            (subscription,) = ok(await client.call_tool(
                "email.subscriptions", {}))["subscriptions"]
            assert (subscription["list_id"], subscription["one_click"]) == (LIST_ID, True)
            assert receiver.arrivals == []

            # The owner approves the unsubscription in the client.
            done = ok(await client.call_tool("email.unsubscribe", {"requests": [
                {"subscription_id": subscription["subscription_id"],
                 "evidence_digest": subscription["evidence_digest"]}]}))
            assert done["results"] == [{"subscription_id": subscription["subscription_id"],
                                        "outcome": "requested"}]

    run(journey)
    assert person.kinds() == ["feedback", "approval"]
    assert person.approved_tools() == ["email.unsubscribe"]
    assert _stored_feedback(deployment) == [TYPED]  # the owner's words, not the proposal
    (arrival,) = receiver.arrivals
    assert (arrival.method, arrival.path, arrival.body) == (
        "POST", "/unsubscribe/1?list=news", ONE_CLICK)
    assert arrival.header("Content-Type") == ["application/x-www-form-urlencoded"]


def test_feedback_from_a_client_that_cannot_ask_the_owner_is_refused(
        tmp_path: Path, transport: Transport, receiver: Receiver) -> None:
    deployment = _deployment(tmp_path, receiver)

    async def journey() -> None:
        async with deployment.session(transport) as client:  # no elicitation capability
            refused = await client.call_tool(
                "email.feedback", {"feedback": PROPOSAL, "quote": QUOTE})
            assert refused.is_error
            assert meta(refused, "reasonCode") == "tool.permission_denied.needs_user"
            assert ok(await client.call_tool("email.context", {}))["feedback"] == []

    run(journey)
    assert _stored_feedback(deployment) == []


def test_feedback_the_owner_declines_to_give_is_not_recorded(
        tmp_path: Path, transport: Transport, receiver: Receiver) -> None:
    deployment = _deployment(tmp_path, receiver)
    person = Person(types_feedback=None)  # the owner declines the form

    async def journey() -> None:
        async with deployment.session(transport, person=person) as client:
            refused = await client.call_tool(
                "email.feedback", {"feedback": PROPOSAL, "quote": QUOTE})
            assert refused.is_error
            assert meta(refused, "reasonCode") == "tool.permission_denied.user_declined"

    run(journey)
    assert person.kinds() == ["feedback"]
    assert _stored_feedback(deployment) == []
    (row,) = deployment.invocations()
    assert (row["state"], row["reason_code"]) == ("failed", "tool.permission_denied.user_declined")


def test_a_2026_client_gives_feedback_through_input_required(
        tmp_path: Path, transport: Transport, receiver: Receiver) -> None:
    deployment = _deployment(tmp_path, receiver)
    person = Person(types_feedback=TYPED)

    async def journey() -> None:
        async with deployment.modern_client(transport, person) as client:
            recorded = await client.call_tool(
                "email.feedback", {"feedback": PROPOSAL, "quote": QUOTE})
            assert not recorded.is_error, recorded
            shown = await client.call_tool("email.context", {})
            assert [f["feedback"] for f in shown.structured_content["feedback"]] == [TYPED]

    run(journey)
    assert person.kinds() == ["feedback"] and person.asked[0].default == PROPOSAL
    assert _stored_feedback(deployment) == [TYPED]
