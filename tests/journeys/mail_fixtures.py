"""The owner's mail for the email and people journeys, written with the standard library as a
provider's export writes it, and imported the way the operator imports it
(``toolhost-email import --account OWNER PATH``). Adapted from plugins/email/tests/
mail_support.py and email_support.py.

The mailbox: Alice writes to the owner about the rent, the owner answers her, and a weekly
newsletter arrives whose List-Unsubscribe is a one-click (RFC 8058) https URI, with a DKIM pass
for its From domain recorded by the owner's own receiving server (AUTHSERV).
"""

from __future__ import annotations

import mailbox
from collections.abc import Iterable
from email.message import EmailMessage
from pathlib import Path

from .journey_support import Deployment

__all__ = [
    "ALICE",
    "AUTHSERV",
    "CARL",
    "COLLEAGUE",
    "LIST_ID",
    "OWNER",
    "colleague_mailbox",
    "email_settings",
    "import_mail",
    "owner_mailbox",
]

OWNER = "owner@example.com"
ALICE = "alice@example.org"
#: A colleague of the owner's on the same host, and who writes to the colleague.
COLLEAGUE = "colleague@example.com"
CARL = "carl@example.org"
#: The authserv-id of the owner's receiving server: only its Authentication-Results count.
AUTHSERV = "mx.owner.example"
LIST_ID = "weekly.lists.example.org"
ONE_CLICK = "List-Unsubscribe=One-Click"
RENT_BODY = "Hello, the rent goes up by 20 euros from January. Is that all right?\n"
REPLY_BODY = "Dear Alice, thank you for letting me know. That is fine.\n"


def _mail(*, sender: str, to: str, subject: str, message_id: str, date: str, body: str,
          headers: Iterable[tuple[str, str]] = ()) -> EmailMessage:
    m = EmailMessage()
    m["From"] = sender
    m["To"] = to
    m["Subject"] = subject
    m["Message-ID"] = message_id
    m["Date"] = date
    for name, value in headers:
        m[name] = value
    m.set_content(body)
    return m


def colleague_mailbox(path: Path, unsubscribe_url: str) -> Path:
    """A colleague's mbox export: Carl writes about the office keys, and the same weekly
    newsletter arrives (its own one-click URI)."""
    return _write(path, [
        _mail(sender=f"Carl <{CARL}>", to=f"Colleague <{COLLEAGUE}>", subject="Keys",
              message_id="<keys-1@example.org>", date="Tue, 01 Dec 2026 09:00:00 +0100",
              body="The office keys are at the front desk.\n"),
        _newsletter(COLLEAGUE, unsubscribe_url),
    ])


def _newsletter(to: str, unsubscribe_url: str) -> EmailMessage:
    return _mail(sender="News <news@lists.example.org>", to=to, subject="This week",
                 message_id="<l1@lists.example.org>", date="Wed, 02 Dec 2026 08:00:00 +0000",
                 body="News.\n", headers=[
                     ("Authentication-Results",
                      f"{AUTHSERV}; dkim=pass header.d=lists.example.org header.s=s1; spf=pass"),
                     ("List-Id", f"Weekly news <{LIST_ID}>"),
                     ("List-Unsubscribe", f"<{unsubscribe_url}>"),
                     ("List-Unsubscribe-Post", ONE_CLICK),
                 ])


def owner_mailbox(path: Path, unsubscribe_url: str) -> Path:
    """An mbox export of the owner's mail (three messages), written to ``path``."""
    messages = [
        _mail(sender=f"Alice <{ALICE}>", to=f"Owner <{OWNER}>", subject="Rent",
              message_id="<rent-1@example.org>", date="Tue, 01 Dec 2026 10:00:00 +0100",
              body=RENT_BODY),
        _mail(sender=f"Owner <{OWNER}>", to=f"Alice <{ALICE}>", subject="Re: Rent",
              message_id="<rent-2@example.com>", date="Tue, 01 Dec 2026 12:00:00 +0100",
              body=REPLY_BODY, headers=[("In-Reply-To", "<rent-1@example.org>"),
                                        ("References", "<rent-1@example.org>")]),
        _newsletter(OWNER, unsubscribe_url),
    ]
    return _write(path, messages)


def _write(path: Path, messages: Iterable[EmailMessage]) -> Path:
    box = mailbox.mbox(path)
    box.lock()
    try:
        for m in messages:
            box.add(m)
        box.flush()
    finally:
        box.unlock()
        box.close()
    return path


def import_mail(deployment: Deployment, mbox: Path, account: str = OWNER,
                owner: str | None = None) -> str:
    """``toolhost-email import --account ACCOUNT [--owner OWNER] MBOX`` into the deployment's
    data directory (each host's, on the hosts transport); its one line of output.

    On the hosts transport the mail is the journey's person's (``--owner``), and the other
    person's own mail is imported beside it: what either reads of the other's shows in the
    journey's exact counts."""
    other = deployment.other_person
    if owner is None and other is not None:
        owner = deployment.principal
        _import(deployment, colleague_mailbox(
            mbox.with_name(f"{other}.mbox"), "https://unsub.test/unsubscribe/2?list=news"),
            COLLEAGUE, other)
    return _import(deployment, mbox, account, owner)


def _import(deployment: Deployment, mbox: Path, account: str, owner: str | None) -> str:
    owned = () if owner is None else ("--owner", owner)
    said = []
    for data_dir in deployment.data_dirs:  # the mail cache is each host's own file
        done = deployment.python("-m", "toolhost_email.cli", "import", "--account", account,
                                 *owned, str(mbox), TOOLHOST_DATA_DIR=str(data_dir))
        assert done.returncode == 0, done.stderr
        said.append(done.stdout)
    return said[0]


def email_settings() -> dict[str, str]:
    """The four email tools registered, one-click judged by the owner's own server."""
    return {"AGENT_EMAIL_MODE_ENABLED": "1", "AGENT_EMAIL_UNSUBSCRIBE_ENABLED": "1",
            "TOOLHOST_EMAIL_AUTHSERV_ID": AUTHSERV}
