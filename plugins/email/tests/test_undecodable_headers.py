"""One header or part in a charset whose text no string can hold costs that field's characters,
not the message (D153: read with replacement). An encoded word that UTF-7 decodes to a lone
surrogate, or a codec that refuses to decode with replacement (idna, undefined) in a body or
an RFC 2231 parameter, made the whole message ``undecodable``: its sender, recipients, date and
text were dropped. Through the real import of an mbox, with LF and with CRLF line ends (the
second is read by the standard parser rather than ``split``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mail_support import OWNER
from toolhost_email import open_mail_cache
from toolhost_email.cache_model import CachedMessage, MailAddress, MessageSource
from toolhost_email.importer import import_path

#: UTF-7 for a lone high surrogate: Python's codec decodes it, and no UTF-8 string holds it.
LONE = "=?utf-7?q?+2D8-?="
BODY = "Invoice 7 attached, please pay by Friday.\n"
ALICE = MailAddress(name="Alice", address="alice@example.org")


def _message(headers: str = "Subject: hello\n", *, sender: str = "Alice <alice@example.org>",
             content_type: str = "text/plain; charset=utf-8", body: str = BODY) -> str:
    return (f"From a@example.org Tue Dec  1 10:00:00 2026\nFrom: {sender}\nTo: {OWNER}\n"
            f"Message-ID: <m@example.org>\nDate: Tue, 01 Dec 2026 10:00:00 +0000\n{headers}"
            f"MIME-Version: 1.0\nContent-Type: {content_type}\n\n{body}\n")


def _import_one(tmp_path: Path, data_dir: Path, text: str,
                line_end: str) -> tuple[CachedMessage, MessageSource]:
    box = tmp_path / "in.mbox"
    box.write_bytes(text.replace("\n", line_end).encode())
    report = import_path(data_dir, OWNER, box)
    assert (report.added, dict(report.skipped)) == (1, {})
    with open_mail_cache(data_dir) as cache:
        (message,) = cache.messages()
        source = cache.source(message.message_key)
    assert source is not None
    assert message.sender and message.date is not None
    assert [a.address for a in message.to] == [OWNER]
    return message, source


def _text(source: MessageSource) -> str:
    """The stored text, line ends as LF (an mbox written with CRLF ends in an empty line)."""
    return source.text.replace("\r\n", "\n").rstrip("\n") + "\n"


LINE_ENDS = pytest.mark.parametrize("line_end", ["\n", "\r\n"], ids=["lf", "crlf"])


@LINE_ENDS
def test_a_subject_with_a_lone_surrogate_is_stored_with_a_replacement_character(
    tmp_path: Path, data_dir: Path, line_end: str,
) -> None:
    message, source = _import_one(tmp_path, data_dir, _message(f"Subject: {LONE} hi\n"),
                                  line_end)
    assert (message.subject, message.sender) == ("\ufffd hi", (ALICE,))
    assert _text(source) == BODY


@LINE_ENDS
def test_a_display_name_with_a_lone_surrogate_keeps_its_address(
    tmp_path: Path, data_dir: Path, line_end: str,
) -> None:
    message, _ = _import_one(tmp_path, data_dir, _message(
        f"Subject: hi\nCc: {LONE} Bob <bob@example.org>\n",
        sender=f'"{LONE}" <alice@example.org>'), line_end)
    assert message.sender == (MailAddress(name="\ufffd", address="alice@example.org"),)
    assert message.cc == (MailAddress(name="\ufffd Bob", address="bob@example.org"),)


@LINE_ENDS
def test_a_good_encoded_word_beside_a_bad_one_keeps_its_text(
    tmp_path: Path, data_dir: Path, line_end: str,
) -> None:
    message, _ = _import_one(tmp_path, data_dir, _message(
        f"Subject: =?iso-8859-1?q?Caf=E9?= {LONE} =?utf-8?q?na=C3=AFve?= menu\n"), line_end)
    assert message.subject == "Caf\u00e9\ufffdna\u00efve menu"


@LINE_ENDS
@pytest.mark.parametrize("charset", ["idna", "undefined"])
def test_a_body_in_a_codec_that_refuses_replacement_is_read_as_utf8(
    tmp_path: Path, data_dir: Path, line_end: str, charset: str,
) -> None:
    _, source = _import_one(tmp_path, data_dir, _message(
        content_type=f"text/plain; charset={charset}"), line_end)
    assert _text(source) == BODY


@LINE_ENDS
@pytest.mark.parametrize("parameter", [f'name="{LONE}"', "name*=utf-7''%2B2D8-",
                                       "name*=idna''report"])
def test_a_content_type_parameter_in_such_a_charset_keeps_the_body(
    tmp_path: Path, data_dir: Path, line_end: str, parameter: str,
) -> None:
    _, source = _import_one(tmp_path, data_dir, _message(
        content_type=f"text/plain; charset=utf-8; {parameter}"), line_end)
    assert _text(source) == BODY


def test_the_headers_of_record_keep_the_replacement_too(tmp_path: Path, data_dir: Path) -> None:
    _, source = _import_one(tmp_path, data_dir, _message(f"Subject: hi\nX-Note: {LONE} ok\n"),
                            "\n")
    assert ("X-Note", "\ufffd ok") in source.headers


#: RFC 2231 parameters folded where folding white space may stand (after ``*=``, before a
#: quoted value, in a continuation): the raw value keeps its line break, which the charset's
#: rewrite did not allow for, so the message was still skipped as ``undecodable``.
FOLDED_PARAMETERS = {
    "disposition": "Content-Disposition: inline; filename*=\n\tutf-7''%2B2D8-",
    "quoted": "Content-Disposition: inline; filename*=\n \"utf-7''%2B2D8-\"",
    "continuation": "Content-Disposition: inline; filename*0*=\n utf-7''%2B2D8-; filename*1=x",
    "idna": "Content-Disposition: inline; filename*=\n idna''report",
}


@LINE_ENDS
@pytest.mark.parametrize("field", list(FOLDED_PARAMETERS.values()),
                         ids=list(FOLDED_PARAMETERS))
def test_a_parameter_folded_after_its_equals_sign_keeps_the_message(
    tmp_path: Path, data_dir: Path, line_end: str, field: str,
) -> None:
    message, source = _import_one(tmp_path, data_dir, _message(f"Subject: hi\n{field}\n"),
                                  line_end)
    assert (message.subject, message.sender) == ("hi", (ALICE,))
    assert _text(source) == BODY


@LINE_ENDS
def test_a_content_type_parameter_folded_after_its_equals_sign_keeps_the_body(
    tmp_path: Path, data_dir: Path, line_end: str,
) -> None:
    _, source = _import_one(tmp_path, data_dir, _message(
        content_type="text/plain; charset=utf-8; name*=\n utf-7''%2B2D8-"), line_end)
    assert _text(source) == BODY


#: Display names ending in a dot right before ``<``: Python before 3.13 raises reading them
#: from its parsed header, and the whole message was skipped as ``undecodable``.
DOTTED = {
    "lone dot": (".<alice@example.org>", MailAddress(name=".", address="alice@example.org")),
    "initial": ("Alice B.<alice@example.org>",
                MailAddress(name="Alice B.", address="alice@example.org")),
    "encoded word": ("=?utf-8?q?Jos=C3=A9?= B.<alice@example.org>",
                     MailAddress(name="José B.", address="alice@example.org")),
    # formataddr, the first fallback, refused a non-ASCII address beside it (RFC 6532).
    "beside an internationalized address": ("Jösé <jose@exämple.org>, J.<alice@example.org>",
                                            MailAddress(name="J.", address="alice@example.org")),
    "second of two": ('"Bob" <bob@example.org>, J.<alice@example.org>',
                      MailAddress(name="J.", address="alice@example.org")),
}


@LINE_ENDS
@pytest.mark.parametrize("case", sorted(DOTTED))
def test_a_display_name_ending_in_a_dot_keeps_the_message_and_its_address(
    tmp_path: Path, data_dir: Path, line_end: str, case: str,
) -> None:
    sender, kept = DOTTED[case]
    message, _ = _import_one(tmp_path, data_dir, _message(sender=sender), line_end)
    assert message.sender[-1] == kept


#: An encoded display name that decodes to a line break: every Python's address header raises
#: ValueError ("address parts cannot contain CR or LF"), and the message was skipped as
#: ``undecodable``. The break is kept as a space, so it starts no header of its own.
BROKEN_NAME = {"lf": "=?utf-8?q?Team=0Alead?=", "crlf": "=?utf-8?q?Team=0D=0Alead?="}
LEAD = MailAddress(name="Team lead", address="lead@example.org")


@LINE_ENDS
@pytest.mark.parametrize("name", sorted(BROKEN_NAME))
def test_an_encoded_display_name_with_a_line_break_keeps_the_message(
    tmp_path: Path, data_dir: Path, line_end: str, name: str,
) -> None:
    lead = f"{BROKEN_NAME[name]} <lead@example.org>"
    message, source = _import_one(
        tmp_path, data_dir,
        _message(f"Cc: {OWNER}, {lead}\nReply-To: {lead}\n", sender=lead), line_end)
    assert message.sender == message.reply_to == (LEAD,)
    assert message.cc[-1] == LEAD
    assert _text(source) == BODY
