"""What the tool tests share: the flags, a harness over this plugin with its data directory
known, and list mail with the headers the census reads."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from mail_support import OWNER, mail
from toolhost import Outcome
from toolhost.testing import Harness
from toolhost_email import plugin

PLUGINS: Mapping[str, object] = {"toolhost-email": plugin}
MODE = {"AGENT_EMAIL_MODE_ENABLED": "1"}
UNSUBSCRIBE = {"AGENT_EMAIL_UNSUBSCRIBE_ENABLED": "1"}
AUTHSERV = "mx.owner.example"
ONE_CLICK = "List-Unsubscribe=One-Click"


def cache_dir(data_root: Path) -> Path:
    """toolhost-email's data directory inside a host whose data directory is ``data_root``."""
    return data_root / "plugins" / "toolhost-email"


@contextmanager
def harness(data_root: Path, settings: Mapping[str, str], **kwargs: Any) -> Iterator[Harness]:
    with Harness.over(PLUGINS, settings=dict(settings), data_dir=data_root, **kwargs) as h:
        yield h


def ok(outcome: Outcome) -> dict[str, Any]:
    assert outcome.failure is None, outcome.failure
    assert outcome.structured is not None
    return dict(outcome.structured)


def list_mail(
    *,
    sender: str = "News <news@lists.example.org>",
    list_id: str | None = "Weekly news <weekly.lists.example.org>",
    unsubscribe: str | None = None,
    post: str | None = ONE_CLICK,
    auth: tuple[str, ...] = (f"{AUTHSERV}; dkim=pass header.d=lists.example.org "
                             "header.s=s1; spf=pass",),
    message_id: str = "<l1@lists.example.org>",
    date: str | None = "Tue, 01 Dec 2026 10:00:00 +0000",
) -> EmailMessage:
    headers: list[tuple[str, str]] = [("Authentication-Results", a) for a in auth]
    if list_id is not None:
        headers.append(("List-Id", list_id))
    if unsubscribe is not None:
        headers.append(("List-Unsubscribe", unsubscribe))
    if post is not None:
        headers.append(("List-Unsubscribe-Post", post))
    return mail(sender=sender, to=OWNER, message_id=message_id, date=date, headers=headers,
                subject="This week", body="News.\n")
