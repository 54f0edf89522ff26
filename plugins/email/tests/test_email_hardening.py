"""The fixes for the review's "found but not written" items (issue #15): header values cut
before the stdlib parses them, the parsed-header cache holding short values only, every
one-click call answering within its timeout, an mbox message never read whole past the size
bound; and the bounds the fixes for the written items rest on."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from email.policy import EmailPolicy
from pathlib import Path
from typing import Any, BinaryIO

import pytest

from email_support import AUTHSERV, MODE, cache_dir, harness, list_mail, ok
from mail_support import OWNER, mail, write_mbox
from toolhost_email import mbox, open_mail_cache, parse
from toolhost_email.authres import dkim_pass_for, spoofed_from
from toolhost_email.census import census, list_identifier
from toolhost_email.config import MAX_REQUEST_S
from toolhost_email.context_tool import SPEC as CONTEXT_SPEC
from toolhost_email.feedback_tool import quoted_in
from toolhost_email.importer import import_path
from toolhost_email.unsubscribe_tool import CONCURRENCY, MAX_REQUESTS, ROUNDS
from toolhost_email.unsubscribe_tool import SPEC as UNSUBSCRIBE_SPEC


def test_a_header_value_is_cut_to_its_bound_before_the_parser_sees_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[int] = []
    real = EmailPolicy.header_fetch_parse

    def spy(self: EmailPolicy, name: str, value: str) -> Any:
        seen.append(len(value))
        return real(self, name, value)

    monkeypatch.setattr(EmailPolicy, "header_fetch_parse", spy)
    # Written as raw lines: the email package takes seconds to fold these values for us.
    subject = "\n ".join(["=?utf-8?q?caf=C3=A9?= =?utf-8?q?caf=C3=A9?="] * 2_500)
    raw = (f"From: {'a.' * 20_000} <x@example.org>\nTo: {OWNER}\nSubject: {subject}\n"
           "Message-ID: <long@x>\nContent-Type: text/plain\n\nbody\n").encode()
    parsed = parse.parse_message(OWNER, raw)
    assert isinstance(parsed, parse.ParsedMessage)
    assert max(seen) <= parse.MAX_RAW_HEADER_CHARS < 40_000
    assert len(parsed.subject) <= parse.MAX_SUBJECT_CHARS


def test_the_parsed_header_cache_keeps_only_short_values() -> None:
    parse._PARSED.clear()
    long = "=?utf-8?q?" + "x" * 400 + "?="
    raw = mail(subject=long, message_id="<c@x>").as_bytes()
    parse.parse_message(OWNER, raw)
    cached = {value for _, value in parse._PARSED}
    assert any(v.startswith("text/plain") for v in cached)  # the repeating MIME header
    assert all(len(v) <= parse._PARSED_VALUE_MAX for v in cached)
    assert long not in cached


def test_every_round_of_one_click_requests_ends_before_the_calls_timeout() -> None:
    # Each pair has one overall deadline (resolution and every address tried share it), so a
    # full call of 25 pairs in rounds of CONCURRENCY answers before the host's deadline.
    assert ROUNDS == -(-MAX_REQUESTS // CONCURRENCY)
    assert UNSUBSCRIBE_SPEC.timeout_s > ROUNDS * MAX_REQUEST_S


def test_an_mbox_message_over_the_size_bound_is_never_read_whole(
    tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    limits: list[int] = []
    real = mbox.messages

    def bounded(file: BinaryIO, limit: int) -> Iterator[bytes]:
        limits.append(limit)
        return real(file, limit)

    monkeypatch.setattr(mbox, "messages", bounded)
    monkeypatch.setattr(parse, "MAX_MESSAGE_BYTES", 4096)
    monkeypatch.setattr("toolhost_email.importer.MAX_MESSAGE_BYTES", 4096)
    report = import_path(data_dir, OWNER, write_mbox(tmp_path / "in.mbox", [
        mail(message_id="<small@x>"), mail(message_id="<big@x>", body="x" * 20_000)]))
    assert (report.added, dict(report.skipped)) == (1, {"too_large": 1})
    assert limits == [4097]  # each message read no further (mbox.messages' own test)


def test_stored_names_and_address_lists_are_bounded(tmp_path: Path, data_dir: Path) -> None:
    many = ", ".join(f"r{i}@e.org" for i in range(300))
    named = ", ".join(f"{'N' * 500} <n{i}@example.org>" for i in range(5))
    import_path(data_dir, OWNER, write_mbox(tmp_path / "in.mbox", [
        mail(to=many, sender=named, message_id="<many@x>")]))
    with open_mail_cache(data_dir) as cache:
        (m,) = cache.messages()
    assert len(m.to) == parse.MAX_ADDRESSES
    assert len(m.sender) == 5
    assert all(len(a.name) == parse.MAX_NAME_CHARS for a in m.sender)


def test_email_context_stays_within_its_bound_for_a_thread_of_hostile_mail(
    tmp_path: Path,
) -> None:
    # Every field within the cache's bounds, and still too much together: 30 thread messages
    # and 30 inbox rows of two-byte names, subjects and quoted text.
    name = "\u00e9" * 120
    many = ", ".join(f"{name} <r{i}@example.org>" for i in range(12))
    # Folded once by the stdlib generator (slow for such headers), then varied by id and date.
    template = mail(message_id="<t00@x>", to=many, sender=many, subject="\u00e9" * 400,
                    body="\u00e9\"" * 1500, headers=[("References", "<root@x>")],
                    date="Tue, 01 Dec 2026 10:00:00 +0000").as_bytes()
    thread = [template.replace(b"<t00@x>", f"<t{i:02d}@x>".encode())
              .replace(b"10:00:00", f"10:{i:02d}:00".encode()) for i in range(30)]
    root = tmp_path / "data"
    import_path(cache_dir(root), OWNER, write_mbox(tmp_path / "in.mbox", thread))
    with harness(root, MODE) as h:
        inbox = ok(h.invoke("email.context", inbox_limit=50))
        thread_id = inbox["inbox"][0]["source"]["thread_id"]
        outcome = h.invoke("email.context", thread_id=thread_id, inbox_limit=50)
    assert outcome.failure is None and not outcome.truncated
    structured = ok(outcome)
    size = len(json.dumps(structured, ensure_ascii=False, sort_keys=True).encode())
    assert size <= CONTEXT_SPEC.maximum_output_bytes
    # The asked-for thread keeps its newest messages; rows were left out to fit, not cut.
    kept = structured["thread"]
    assert kept and len(kept) + len(structured["inbox"]) < 60
    assert kept[-1]["source"]["message_key"] == inbox["inbox"][0]["source"]["message_key"]
    for item in kept:
        assert item["subject"] == "\u00e9" * 300
        assert len(item["to"]) == len(item["from"]) == 10
        assert all(len(a["name"]) == 100 for a in item["to"])


@pytest.mark.parametrize(("header", "passes"), [
    (f"{AUTHSERV}; dkim=pass (good (nested) sig) header.d=lists.example.org", True),
    (f"{AUTHSERV} 1; dkim/1=pass header.i=@lists.example.org", True),
    (f'{AUTHSERV}; dkim=fail reason="dkim=pass header.d=lists.example.org"', False),
    (f"{AUTHSERV}; dkim=fail (dkim=pass header.d=lists.example.org)", False),
    (f"{AUTHSERV}; spf=pass smtp.mailfrom=lists.example.org header.d=lists.example.org", False),
    ("other.example; dkim=pass header.d=lists.example.org", False),
])
def test_only_the_dkim_methods_own_properties_count(header: str, passes: bool) -> None:
    assert dkim_pass_for([header], AUTHSERV, "lists.example.org") is passes


def test_a_forwarded_own_mail_with_a_dkim_pass_is_not_spoofed() -> None:
    forwarded = (f"{AUTHSERV}; dkim=pass header.d=example.com; spf=softfail "
                 "smtp.mailfrom=relay.example; dmarc=pass header.from=example.com")
    assert spoofed_from([forwarded], AUTHSERV, "example.com") is False
    assert spoofed_from([f"{AUTHSERV}; spf=fail smtp.mailfrom=x.example"], AUTHSERV,
                        "example.com") is True
    assert spoofed_from([f"{AUTHSERV}; dmarc=fail"], None, "example.com") is False


@pytest.mark.parametrize(("value", "identifier"), [
    ("Weekly <Weekly.Lists.Example.org>", "weekly.lists.example.org"),
    ("weekly.lists.example.org", "weekly.lists.example.org"),
    ("Leave at https://x.example/u <>", None),
    ("no identifier here", None),
])
def test_the_list_identifier_is_the_bracketed_part(value: str, identifier: str | None) -> None:
    assert list_identifier(value) == identifier


def test_a_future_date_does_not_keep_a_message_the_evidence(tmp_path: Path) -> None:
    # Both authenticated for the list's domain: the forged 2099 date counts as older than any
    # plausible one, so the mail that is really the latest decides the destination.
    early = list_mail(unsubscribe="<https://old.lists.example.org/u>", message_id="<f1@x>",
                      date="Tue, 01 Jan 2099 10:00:00 +0000")
    late = list_mail(unsubscribe="<https://new.lists.example.org/u>", message_id="<f2@x>",
                     date="Wed, 02 Dec 2026 10:00:00 +0000")
    root = tmp_path / "data"
    import_path(cache_dir(root), OWNER, write_mbox(tmp_path / "in.mbox", [early, late]))
    now = dt.datetime(2026, 12, 3, tzinfo=dt.UTC)
    with open_mail_cache(cache_dir(root)) as cache:
        (found,) = census(cache, AUTHSERV, now=now)
    assert found.destination == "https://new.lists.example.org/u"
    assert found.last_seen == dt.datetime(2026, 12, 2, 10, tzinfo=dt.UTC)


@pytest.mark.parametrize(("quote", "accepted"), [
    ("please be more formal", True),
    ("be more", True),
    ("formal", False),             # one word
    ("lease be", False),           # starts inside a word
    ("be more formal and sign with 'Best", True),
])
def test_a_quote_is_whole_words_of_the_turn(quote: str, accepted: bool) -> None:
    turn = "For my landlord, please be more formal and sign with 'Best regards, O.'"
    assert quoted_in(quote, turn) is accepted


@pytest.mark.parametrize(("quote", "accepted"), [
    ("\u8bf7\u66f4\u6b63\u5f0f\u4e00\u4e9b", True),  # six characters of the turn
    ("\u6b63\u5f0f", False),                          # two characters: too little to say
])
def test_a_quote_in_a_script_without_spaces_needs_enough_characters(
    quote: str, accepted: bool,
) -> None:
    turn = "\u7ed9\u623f\u4e1c\u7684\u90ae\u4ef6\u8bf7\u66f4\u6b63\u5f0f\u4e00\u4e9b\u3002"
    assert quoted_in(quote, turn) is accepted
