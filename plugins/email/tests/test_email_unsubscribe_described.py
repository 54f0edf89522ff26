"""email.unsubscribe's approval says what each opaque pair stands for: per request, the list,
its sender, the account it came to and the host the one-click POST would reach (never the
path, which may carry the owner's token), from the census the call reads, over a real mbox
imported into the cache."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from email_support import AUTHSERV, UNSUBSCRIBE, cache_dir, harness, list_mail, ok
from mail_support import OWNER, write_mbox
from toolhost_email.importer import import_path

SETTINGS = {**UNSUBSCRIBE, "TOOLHOST_EMAIL_AUTHSERV_ID": AUTHSERV}
UNKNOWN = "s_" + "0" * 24


def _import(tmp_path: Path, *messages: Any, owner: str | None = None) -> Path:
    root = tmp_path / "data"
    import_path(cache_dir(root), OWNER, write_mbox(tmp_path / "in.mbox", list(messages)),
                owner=owner)
    return root


def _paused(h: Any) -> tuple[dict[str, Any], Any]:
    """The one subscription listed, and the row of its unsubscribe, waiting for approval."""
    (listed,) = ok(h.invoke("email.subscriptions"))["subscriptions"]
    paused = h.invoke("email.unsubscribe", requests=[
        {"subscription_id": listed["subscription_id"],
         "evidence_digest": listed["evidence_digest"]}])
    assert paused.invocation_id is not None
    return listed, h.host.row(paused.invocation_id)


def test_each_request_is_described_by_its_list_sender_account_and_destination_host(
        tmp_path: Path) -> None:
    root = _import(
        tmp_path,
        list_mail(unsubscribe="<https://unsub.lists.example.org:8443/u/owner-token-123>",
                  message_id="<e1@x>"),
        list_mail(sender="Shop <deals@shop.example.net>", list_id=None, post=None,
                  unsubscribe="<mailto:leave@shop.example.net>", message_id="<e2@x>"))
    with harness(root, SETTINGS) as h:
        listed = {s["sender"]: s for s in ok(h.invoke("email.subscriptions"))["subscriptions"]}
        weekly, shop = listed["news@lists.example.org"], listed["deals@shop.example.net"]
        requests = [
            {"subscription_id": weekly["subscription_id"],
             "evidence_digest": weekly["evidence_digest"]},
            {"subscription_id": shop["subscription_id"],
             "evidence_digest": shop["evidence_digest"]},
            {"subscription_id": weekly["subscription_id"],
             "evidence_digest": "sha256:" + "0" * 64},
            {"subscription_id": UNKNOWN, "evidence_digest": "sha256:" + "1" * 64},
        ]
        paused = h.invoke("email.unsubscribe", requests=requests)
        assert paused.paused and paused.invocation_id is not None
        described = h.host.describe_call(h.host.row(paused.invocation_id))
    assert described == ("toolhost-email", [
        f"{weekly['subscription_id']}: one-click POST to https://unsub.lists.example.org:8443/…; "
        f"list weekly.lists.example.org, from news@lists.example.org, received on {OWNER}",
        f"{shop['subscription_id']}: it offers no one-click unsubscribe, so the call sends "
        f"nothing for it; no List-Id, from deals@shop.example.net, received on {OWNER}",
        f"{weekly['subscription_id']}: it changed since it was listed, so the call sends "
        "nothing for it (list the subscriptions again); list weekly.lists.example.org, from "
        f"news@lists.example.org, received on {OWNER}",
        f"{UNKNOWN}: not in the mail cache (the call will refuse it)",
    ])
    assert "owner-token-123" not in repr(described)


def test_a_subscription_of_another_owners_account_is_not_in_this_callers_cache(
        tmp_path: Path) -> None:
    # The call reads its principal's accounts only; so does what the approver reads.
    root = _import(tmp_path, list_mail(
        unsubscribe="<https://lists.example.org/u/1>", message_id="<e1@x>"), owner="operator")
    with harness(root, SETTINGS) as h:
        listed, row = _paused(h)
        owners = h.host.describe_call(row)
        assert owners is not None and "one-click POST to https://lists.example.org/…; " in \
            owners[1][0]
        described = h.host.describe_call(attrs.evolve(row, principal_id="someone-else"))
    assert described == ("toolhost-email", [
        f"{listed['subscription_id']}: not in the mail cache (the call will refuse it)"])


def test_a_long_list_name_cannot_push_the_destination_out_of_the_line(tmp_path: Path) -> None:
    # A list's own words come last and short: a 250-character List-Id once filled the host's
    # 300-character cut before the line said where the request would go.
    long_id = "newsletter.yourbank.example." + "a" * 200 + ".example.org"
    root = _import(tmp_path, list_mail(list_id=f"Bank <{long_id}>", message_id="<e9@x>",
                                       unsubscribe="<https://evil.example/u/1>"))
    with harness(root, SETTINGS) as h:
        listed, row = _paused(h)
        described = h.host.describe_call(row)
    assert described is not None
    (line,) = described[1]
    assert line.startswith(f"{listed['subscription_id']}: one-click POST to https://evil.example/…;")
    assert line.endswith(f"received on {OWNER}") and len(line) < 300
