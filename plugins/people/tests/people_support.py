"""Helpers the people tests share: a fixture mailbox written with the stdlib ``mailbox``
module, imported into a data directory through toolhost-email's own import path (its
importer, what ``toolhost-email import`` runs), and a host over this plugin on that data
directory.
"""

from __future__ import annotations

import datetime as _dt
import mailbox
import os
import subprocess
import sys
from collections.abc import Sequence
from email.message import EmailMessage
from email.utils import format_datetime
from pathlib import Path
from typing import Any, Literal, NamedTuple

from toolhost_email import MAIL_CACHE_DISTRIBUTION

from toolhost import Outcome, Settings
from toolhost.testing import Harness
from toolhost_people import plugin

#: The plugin alone, as an object (not the installed set), with its flag on.
PLUGINS: dict[str, object] = {"toolhost-people": plugin}
ENABLED = {"AGENT_PEOPLE_ENABLED": "1"}
OWNER = "owner@example.com"
OTHER_ACCOUNT = "second@example.com"


class Mail(NamedTuple):
    sender: str
    to: str
    subject: str
    day: int | None  # November 2026; None: no Date header
    message_id: str
    cc: str = ""
    reply_to: str = ""
    in_reply_to: str = ""
    body: str = "Hello.\n"
    date: str = ""  # a Date header as written, in place of ``day``'s


def _date(day: int, minute: int = 0) -> _dt.datetime:
    return _dt.datetime(2026, 11, day, 9, minute, tzinfo=_dt.UTC)


def write_mbox(path: Path, mails: Sequence[Mail]) -> Path:
    box = mailbox.mbox(path, create=True)
    try:
        for mail in mails:
            message = EmailMessage()
            message["From"] = mail.sender
            message["To"] = mail.to
            if mail.cc:
                message["Cc"] = mail.cc
            if mail.reply_to:
                message["Reply-To"] = mail.reply_to
            message["Subject"] = mail.subject
            if mail.date:
                message["Date"] = mail.date
            elif mail.day is not None:
                message["Date"] = format_datetime(_date(mail.day))
            message["Message-ID"] = f"<{mail.message_id}>"
            if mail.in_reply_to:
                message["In-Reply-To"] = f"<{mail.in_reply_to}>"
                message["References"] = f"<{mail.in_reply_to}>"
            message.set_content(mail.body)
            box.add(message)
        box.flush()
    finally:
        box.close()
    return path


def email_dir(data_dir: Path) -> Path:
    """toolhost-email's own data directory under ``data_dir``, where its cache lives."""
    return Settings(env={"TOOLHOST_DATA_DIR": str(data_dir)}).plugin_data_dir(
        MAIL_CACHE_DISTRIBUTION)


def erase_mail(data_dir: Path, kind: Literal["account", "thread", "message"],
               value: str) -> None:
    """toolhost-email's erase (``toolhost-email erase --account|--thread|--message``)."""
    from toolhost_email.erase import erase

    assert erase(email_dir(data_dir), kind, value) > 0


def people_command(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``toolhost-people ARGS`` with TOOLHOST_DATA_DIR=data_dir; any exit status."""
    script = Path(sys.executable).with_name("toolhost-people")
    env = {**os.environ, "TOOLHOST_DATA_DIR": str(data_dir)}
    return subprocess.run([str(script), *args], env=env, capture_output=True, text=True,
                          check=False)


def import_mail(data_dir: Path, account: str, mails: Sequence[Mail], name: str) -> None:
    """Write ``mails`` as an mbox and import it with toolhost-email's importer (what its
    ``toolhost-email import --account ACCOUNT PATH`` runs)."""
    from toolhost_email.importer import import_path

    path = write_mbox(data_dir.parent / f"{name}.mbox", mails)
    import_path(email_dir(data_dir), account, path)


def harness(data_dir: Path, settings: dict[str, str] | None = None) -> Harness:
    # A call without a run of its own runs for the operator, who holds every scope the tools
    # need: people.read, and email.read, which history 1.1.0 declares as a checked scope.
    return Harness.over(PLUGINS, settings=ENABLED if settings is None else settings,
                        data_dir=data_dir)


ANNA = "Anna Smith <Anna.Smith@Example.org>"
BOB = "Bob Jones <bob@example.net>"
ZOE = "Zoë Ångström <zoe@example.com>"
CAROL = "Carol Diaz <carol@example.org>"

#: The owner's mailbox. Anna writes most (nine messages, two of them on the same day, one
#: undated), the owner replies to her with Bob in Cc, and Bob and Zoë write once each.
OWNER_MAIL = [
    Mail(ANNA, OWNER, "Lunch", 1, "m1@example.org"),
    Mail(OWNER, "Anna <anna.smith@example.org>", "Re: Lunch", 2, "m2@example.com", cc=BOB,
         in_reply_to="m1@example.org"),
    Mail(BOB, OWNER, "Report", 3, "m3@example.net"),
    Mail(ZOE, OWNER, "Hej", 4, "m4@example.com"),
    *(Mail(ANNA, OWNER, f"Note {n}", 5 + n, f"n{n}@example.org") for n in range(5)),
    Mail(ANNA, OWNER, "Same day A", 12, "s1@example.org"),
    Mail(ANNA, OWNER, "Same day B", 12, "s2@example.org"),
    Mail(ANNA, OWNER, "Undated", None, "u1@example.org"),
]
#: A second account's mailbox: Carol writes once.
OTHER_MAIL = [Mail(CAROL, OTHER_ACCOUNT, "Hello there", 20, "c1@example.org")]


def ok(outcome: Outcome) -> dict[str, Any]:
    assert outcome.ok, outcome.failure
    assert outcome.structured is not None
    return dict(outcome.structured)


def failed(outcome: Outcome) -> str:
    assert not outcome.ok and outcome.failure is not None, outcome
    return outcome.failure.reason_code


def only_person(host: Harness, query: str) -> str:
    people = ok(host.invoke("people.search", query=query))["people"]
    assert len(people) == 1, people
    return str(people[0]["person_id"])
