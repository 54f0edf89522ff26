"""What an import keeps of a message's content: a Date out of the calendar's range is no
date, not a lost message; an mbox writer's ">From " quoting is undone, so the same mail from
an mbox and from a Maildir is one message; the marks a mail client keeps in an mbox's header
fields (read, replied, flagged) do not make another message."""

from __future__ import annotations

from pathlib import Path

import pytest

from email_support import cache_dir
from toolhost_email import importer, open_mail_cache
from toolhost_email.importer import import_path
from toolhost_email.mbox import messages
from toolhost_email.parse import _digest, message_key_for

OWNER = "owner@example.com"


def _stored(data_dir: Path) -> list[tuple[str, str, object, str]]:
    with open_mail_cache(data_dir) as cache:
        return [(m.message_key, m.subject, m.date, source.text) for m in cache.messages()
                if (source := cache.source(m.message_key)) is not None]


def test_a_date_past_the_end_of_the_calendar_in_utc_is_kept_as_no_date(tmp_path: Path) -> None:
    src = tmp_path / "dates.mbox"
    src.write_bytes(
        b"From z@example.org Mon Jan  1 00:00:00 2024\nFrom: z@example.org\n"
        b"Subject: year 9999\nDate: Fri, 31 Dec 9999 23:00:00 -0500\n\nimportant body\n\n"
        b"From z@example.org Mon Jan  1 00:00:00 2024\nFrom: z@example.org\n"
        b"Subject: nonsense\nDate: Thu, 99 Foo 20x4\n\nother body\n")
    report = import_path(cache_dir(tmp_path), OWNER, src)
    assert (report.added, report.skipped) == (2, {})
    assert sorted((subject, date, text) for _, subject, date, text in
                  _stored(cache_dir(tmp_path))) == [
        ("nonsense", None, "other body\n"), ("year 9999", None, "important body\n")]


_BODY = (b"From: a@example.org\nSubject: quoting\nMessage-ID: <rd1@example.org>\n\n"
         b"see below\nFrom here on it is quoted\n>From a quote, quoted once\nnot >From this\n")
#: _BODY as an mboxrd writer stores it: each "From " and ">From " line gains one ">".
_MBOX = (b"From a@example.org Mon Jan  1 00:00:00 2024\n" + _BODY
         .replace(b"\n>From", b"\n>>From").replace(b"\nFrom here", b"\n>From here") + b"\n")


def _maildir(path: Path, raw: bytes) -> Path:
    for sub in ("cur", "new", "tmp"):
        (path / sub).mkdir(parents=True)
    (path / "cur" / "1:2,S").write_bytes(raw)
    return path


def test_mbox_quoting_is_undone_so_a_maildir_copy_adds_nothing(tmp_path: Path) -> None:
    data_dir = cache_dir(tmp_path)
    src = tmp_path / "rd.mbox"
    src.write_bytes(_MBOX)
    first = import_path(data_dir, OWNER, src)
    maildir = import_path(data_dir, OWNER, _maildir(tmp_path / "md", _BODY))
    assert (first.added, maildir.added, maildir.duplicates) == (1, 0, 1)
    [(key, _, _, text)] = _stored(data_dir)
    assert key == message_key_for(OWNER, _BODY)
    assert text == ("see below\nFrom here on it is quoted\n>From a quote, quoted once\n"
                    "not >From this\n")


def test_mail_stored_quoted_by_an_earlier_import_is_not_added_again(tmp_path: Path) -> None:
    data_dir = cache_dir(tmp_path)
    src = tmp_path / "rd.mbox"
    src.write_bytes(_MBOX)
    # What an import before unquoting stored: the message as the mbox holds it.
    with src.open("rb") as file:
        [quoted] = list(messages(file, 1 << 20))
    import_path(data_dir, OWNER, _maildir(tmp_path / "md", quoted))
    again = import_path(data_dir, OWNER, src)
    assert (again.added, again.duplicates) == (0, 1)
    assert len(_stored(data_dir)) == 1


#: One message as a mail client leaves it in an mbox: read once (mutt's Status, Thunderbird's
#: X-Mozilla-Status, folded X-Keywords), and then again, replied to and flagged.
_MARKED = (b"From a@example.org Mon Jan  1 00:00:00 2024\n"
           b"From: a@example.org\nStatus: O\nSubject: marks\nX-Mozilla-Status: 0000\n"
           b"X-Keywords: \n\tnone\nMessage-ID: <marks@example.org>\n\n"
           b"Status: this line is the body's, not a mark\n")
_MARKED_AGAIN = _MARKED.replace(b"Status: O\n", b"Status: RO\nX-Status: AF\n").replace(
    b"X-Mozilla-Status: 0000", b"X-Mozilla-Status: 0003").replace(
    b"X-Keywords: \n\tnone", b"X-Keywords: $Flagged\n\t$Replied")


def test_a_mail_clients_marks_in_an_mbox_do_not_make_another_message(tmp_path: Path) -> None:
    data_dir = cache_dir(tmp_path)
    src = tmp_path / "marked.mbox"
    src.write_bytes(_MARKED)
    first = import_path(data_dir, OWNER, src)
    src.write_bytes(_MARKED_AGAIN)
    again = import_path(data_dir, OWNER, src)
    assert (first.added, again.added, again.duplicates) == (1, 0, 1)
    # The body is the message's own: a "Status:" line there still counts.
    src.write_bytes(_MARKED_AGAIN.replace(b"body's, not", b"body's, still not"))
    assert import_path(data_dir, OWNER, src).added == 1
    assert len(_stored(data_dir)) == 2


def test_mail_stored_with_its_marks_by_an_earlier_import_is_not_added_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data_dir = cache_dir(tmp_path)
    src = tmp_path / "marked.mbox"
    src.write_bytes(_MARKED)
    # What an import before the marks were left out stored: the key of every byte.
    monkeypatch.setattr(importer, "message_keys", lambda account, raw: (
        "m_" + _digest(account, raw.replace(b"\r\n", b"\n").rstrip(b"\n")), ()))
    import_path(data_dir, OWNER, src)
    monkeypatch.undo()
    again = import_path(data_dir, OWNER, src)
    assert (again.added, again.duplicates) == (0, 1)
    assert len(_stored(data_dir)) == 1


def test_the_marks_are_left_out_by_whole_lines_only() -> None:
    """Lines ended by CR alone end no field: two different such messages that both start with
    a Status field stay two (a review's pair collided); Evolution's field is a mark too."""
    assert message_key_for(OWNER, b"Status: RO\rSubject: invoice\r\rPay 100 EUR") != (
        message_key_for(OWNER, b"Status: O\rSubject: hello\r\rLunch?"))
    assert message_key_for(OWNER, b"Subject: a\nX-Evolution: 00000001-0010\n\nbody") == (
        message_key_for(OWNER, b"Subject: a\nX-Evolution: 00000000-0000\n\nbody"))
