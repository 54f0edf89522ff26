"""Mail fixtures written with the standard library (``email``, ``mailbox``), the way a mail
provider's export or a local delivery agent writes them."""

from __future__ import annotations

import mailbox
from collections.abc import Iterable, Mapping
from email.message import EmailMessage
from pathlib import Path

OWNER = "owner@example.com"
OTHER = "second@example.net"


def mail(
    *,
    sender: str = "Alice <alice@example.org>",
    to: str = f"Owner <{OWNER}>",
    subject: str = "hello",
    message_id: str | None = "<a1@example.org>",
    date: str | None = "Tue, 01 Dec 2026 10:00:00 +0100",
    body: str = "Hello there.\n",
    html: str | None = None,
    headers: Mapping[str, str] | Iterable[tuple[str, str]] = (),
) -> EmailMessage:
    """One message; ``html`` adds a text/html alternative (multipart/alternative)."""
    m = EmailMessage()
    m["From"] = sender
    m["To"] = to
    m["Subject"] = subject
    if message_id is not None:
        m["Message-ID"] = message_id
    if date is not None:
        m["Date"] = date
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    for name, value in pairs:
        m[name] = value
    m.set_content(body)
    if html is not None:
        m.add_alternative(html, subtype="html")
    return m


def write_mbox(path: Path, messages: Iterable[EmailMessage | bytes]) -> Path:
    box = mailbox.mbox(path)
    box.lock()
    for m in messages:
        box.add(m)
    box.flush()
    box.unlock()
    box.close()
    return path


def write_maildir(path: Path, messages: Iterable[EmailMessage | bytes]) -> Path:
    box = mailbox.Maildir(path, create=True)
    for m in messages:
        box.add(m)
    box.close()
    return path


#: Not a mail: no header section at all (the first line has no colon).
MALFORMED = b"this line is no header and there is nothing else\n\nat all\n"
