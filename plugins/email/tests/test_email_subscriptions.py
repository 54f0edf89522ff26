"""email.subscriptions: the census from List-Id, List-Unsubscribe and List-Unsubscribe-Post;
one-click only with the exact header and a DKIM pass recorded by the configured authserv-id;
never an unsubscribe address in the result."""

from __future__ import annotations

import datetime as _dt
import json
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import pytest

from email_support import AUTHSERV, UNSUBSCRIBE, cache_dir, harness, list_mail, ok
from mail_support import OWNER, mail, write_mbox
from toolhost import Trust
from toolhost.testing import DEFAULT_INSTANT, FixedClock
from toolhost_email.importer import import_path

URL = "https://unsub.lists.example.org/u/SECRET-TOKEN?list=weekly"
HEADER = f"<mailto:leave-SECRET@lists.example.org>, <{URL}>"


def _census(tmp_path: Path, messages: list[Any], settings: dict[str, str] | None = None,
            **kwargs: Any) -> tuple[list[dict[str, Any]], str]:
    root = tmp_path / "data"
    import_path(cache_dir(root), OWNER, write_mbox(tmp_path / "in.mbox", messages))
    env = {**UNSUBSCRIBE, "TOOLHOST_EMAIL_AUTHSERV_ID": AUTHSERV} if settings is None \
        else settings
    with harness(root, env, **kwargs) as h:
        outcome = h.invoke("email.subscriptions")
    assert outcome.output_trust is Trust.EXTERNAL_UNTRUSTED
    return ok(outcome)["subscriptions"], outcome.content


def test_an_eligible_list_and_what_the_entry_says(tmp_path: Path) -> None:
    found, content = _census(tmp_path, [
        list_mail(unsubscribe=HEADER, message_id="<l1@x>", date="Mon, 30 Nov 2026 08:00:00 Z"),
        list_mail(unsubscribe=HEADER, message_id="<l2@x>"),
        mail(message_id="<personal@example.org>"),
    ])
    (entry,) = found
    assert entry["one_click"] is True
    assert (entry["account"], entry["sender"], entry["message_count"], entry["last_seen"]) == (
        OWNER, "news@lists.example.org", 2, "2026-12-01T10:00:00+00:00")
    assert entry["list_id"] == "weekly.lists.example.org"  # RFC 2919: the identifier only
    assert entry["subscription_id"].startswith("s_")
    assert entry["evidence_digest"].startswith("sha256:")
    # Never an unsubscribe address, in any form.
    for text in (content, json.dumps(found)):
        assert "SECRET" not in text and "mailto" not in text and "https" not in text
        assert "unsub.lists.example.org" not in text


@pytest.mark.parametrize(("why", "changes"), [
    ("no List-Unsubscribe-Post", {"post": None}),
    ("not exactly one-click", {"post": "List-Unsubscribe=One-Click; x=1"}),
    ("only a mailto", {"unsubscribe": "<mailto:leave@lists.example.org>"}),
    ("plain http", {"unsubscribe": "<http://unsub.lists.example.org/u/1>"}),
    ("credentials in the URI", {"unsubscribe": "<https://u:p@unsub.lists.example.org/u/1>"}),
    ("DKIM failed at the owner's server", {"auth": (f"{AUTHSERV}; dkim=fail "
                                                    "header.d=lists.example.org",)}),
    ("DKIM passed for another domain", {"auth": (f"{AUTHSERV}; dkim=pass "
                                                 "header.d=other.example",)}),
    ("forged from a foreign authserv-id", {"auth": (
        "mx.attacker.example; dkim=pass header.d=lists.example.org",)}),
    ("a forged pass below the owner's server's own fail", {"auth": (
        f"{AUTHSERV}; dkim=fail header.d=lists.example.org",
        f"{AUTHSERV}; dkim=pass header.d=lists.example.org")}),
    ("no Authentication-Results", {"auth": ()}),
])
def test_one_click_does_not_apply(tmp_path: Path, why: str, changes: dict[str, Any]) -> None:
    arguments: dict[str, Any] = {"unsubscribe": HEADER, **changes}
    (entry,) = _census(tmp_path, [list_mail(**arguments)])[0]
    assert entry["one_click"] is False, why


def test_without_a_configured_authserv_id_one_click_never_applies(tmp_path: Path) -> None:
    (entry,) = _census(tmp_path, [list_mail(unsubscribe=HEADER)], settings=UNSUBSCRIBE)[0]
    assert entry["one_click"] is False


def test_a_comment_and_spacing_in_authentication_results_are_read(tmp_path: Path) -> None:
    auth = (f"{AUTHSERV.upper()} 1; spf=pass smtp.mailfrom=x (sender ok); "
            "dkim = pass (good signature) header.i=@Lists.Example.ORG",)
    (entry,) = _census(tmp_path, [list_mail(unsubscribe=HEADER, auth=auth)])[0]
    assert entry["one_click"] is True


def test_lists_group_by_list_id_else_sender_and_accounts_stay_apart(tmp_path: Path) -> None:
    root = tmp_path / "data"
    src = write_mbox(tmp_path / "in.mbox", [
        list_mail(unsubscribe=HEADER, message_id="<a@x>"),
        list_mail(unsubscribe=HEADER, message_id="<b@x>", list_id="Other <other.example.org>"),
        list_mail(unsubscribe=HEADER, message_id="<c@x>", list_id=None,
                  sender="promo@shop.example"),
    ])
    import_path(cache_dir(root), OWNER, src)
    import_path(cache_dir(root), "second@example.net", src)
    with harness(root, {**UNSUBSCRIBE, "TOOLHOST_EMAIL_AUTHSERV_ID": AUTHSERV}) as h:
        found = ok(h.invoke("email.subscriptions"))
        mine = ok(h.invoke("email.subscriptions", account=OWNER, limit=2))
    assert (found["total"], found["truncated"]) == (6, False)
    assert len({s["subscription_id"] for s in found["subscriptions"]}) == 6
    assert (len(mine["subscriptions"]), mine["total"], mine["truncated"]) == (2, 3, True)
    assert {s["account"] for s in mine["subscriptions"]} == {OWNER}


def test_a_list_with_a_forged_future_date_does_not_head_the_list(tmp_path: Path) -> None:
    # D160's "latest" orders the list as it picks each entry's evidence: one forged Date
    # dated 9999 put its sender first for good.
    def at(hours: float) -> str:  # a Date ``hours`` after the host's clock
        return format_datetime(DEFAULT_INSTANT + _dt.timedelta(hours=hours))

    found, _ = _census(tmp_path, [
        list_mail(unsubscribe=HEADER, sender=f"news@{name}.example", list_id=None,
                  message_id=f"<{name}@x>", date=date)
        for name, date in [("forged", "Fri, 31 Dec 9999 23:59:59 +0000"),
                           ("ahead", at(48)), ("undated", None), ("skew", at(23)),
                           ("real", at(-1))]
    ], clock=FixedClock(DEFAULT_INSTANT))
    assert [s["sender"].split("@")[1] for s in found] == [
        "skew.example", "real.example", "forged.example", "ahead.example", "undated.example"]
    # What each entry says it last saw is still the message's own Date.
    assert found[2]["last_seen"] == "9999-12-31T23:59:59+00:00"
