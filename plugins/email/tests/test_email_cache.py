"""The mail cache: import of mbox and Maildir, decoding, threads, idempotency, malformed
messages, erasure of one source, and the public read API over it."""

from __future__ import annotations

import datetime as _dt
import mailbox
import os
from pathlib import Path

import pytest

import toolhost_email
from mail_support import MALFORMED, OTHER, OWNER, mail, write_maildir, write_mbox
from toolhost_email import MailAddress, importer, open_mail_cache
from toolhost_email.erase import erase
from toolhost_email.importer import ImportFailed, import_path
from toolhost_email.parse import MAX_TEXT_CHARS

RFC2047_FROM = "=?utf-8?q?Zo=C3=AB_M=C3=BCller?= <Zoe.Muller@Example.ORG>"


def _keys(data_dir: Path) -> list[str]:
    with open_mail_cache(data_dir) as cache:
        return [m.message_key for m in cache.messages()]


def test_the_public_names_are_exactly_the_contract() -> None:
    assert sorted(toolhost_email.__all__) == sorted([
        "MAIL_CACHE_DISTRIBUTION", "CacheUnavailable", "CachedMessage", "MailAddress",
        "MailCacheReader", "MessageSource", "open_mail_cache"])
    assert toolhost_email.MAIL_CACHE_DISTRIBUTION == "toolhost-email"


def test_a_cache_that_cannot_be_read_is_cache_unavailable(data_dir: Path) -> None:
    # The one error of the read API, named so a reader (toolhost-people) catches exactly it.
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "mail.sqlite3").write_bytes(b"not a database, not at all" * 100)
    with pytest.raises(toolhost_email.CacheUnavailable, match="cannot be read as a mail cache"):
        open_mail_cache(data_dir)


def test_a_directory_with_no_cache_reads_as_empty(data_dir: Path) -> None:
    with open_mail_cache(data_dir) as cache:
        assert cache.generation() == 0
        assert list(cache.messages()) == []
        assert cache.message("m_x") is None
        assert cache.source("m_x") is None
    assert not data_dir.exists()  # reading creates nothing


def test_rfc2047_headers_and_multipart_alternative_are_decoded(tmp_path: Path,
                                                               data_dir: Path) -> None:
    src = write_mbox(tmp_path / "in.mbox", [mail(
        sender=RFC2047_FROM, subject="=?iso-8859-1?q?Gr=FC=DFe?= aus Bern",
        to=f"=?utf-8?b?w4lsb2RpZQ==?= <{OWNER.upper()}>, bob@Example.org",
        headers={"Cc": "Carol <carol@example.org>", "Reply-To": "list@example.org"},
        body="The plain alternative.\n", html="<p>The <b>HTML</b> alternative</p>")])
    report = import_path(data_dir, OWNER, src)
    assert (report.seen, report.added, report.skipped_total) == (1, 1, 0)
    with open_mail_cache(data_dir) as cache:
        (m,) = cache.messages()
        assert m.subject == "Grüße aus Bern"
        assert m.sender == (MailAddress("Zoë Müller", "zoe.muller@example.org"),)
        assert m.to == (MailAddress("Élodie", OWNER), MailAddress("", "bob@example.org"))
        assert m.cc == (MailAddress("Carol", "carol@example.org"),)
        assert m.reply_to == (MailAddress("", "list@example.org"),)
        assert (m.account, m.message_id, m.direction) == (OWNER, "a1@example.org", "received")
        assert m.date == _dt.datetime(2026, 12, 1, 9, 0, tzinfo=_dt.UTC)
        source = cache.source(m.message_key)
        assert source is not None
        assert source.text == "The plain alternative.\n"
        assert ("Subject", "Grüße aus Bern") in source.headers
        assert ("From", "Zoë Müller <Zoe.Muller@Example.ORG>") in source.headers
        assert (source.account, source.thread_id, source.truncated) == (
            OWNER, m.thread_id, False)


def test_an_html_only_body_is_reduced_to_its_text(tmp_path: Path, data_dir: Path) -> None:
    m = mail()
    m.set_content("<html><style>p {}</style><p>Visible&amp;kept</p><script>x()</script>"
                  "<div>second</div></html>", subtype="html")
    import_path(data_dir, OWNER, write_mbox(tmp_path / "in.mbox", [m]))
    with open_mail_cache(data_dir) as cache:
        (key,) = (c.message_key for c in cache.messages())
        source = cache.source(key)
        assert source is not None and source.text == "Visible&kept\nsecond"


def test_the_body_is_bounded_and_says_so(tmp_path: Path, data_dir: Path) -> None:
    src = write_mbox(tmp_path / "in.mbox", [mail(body="x" * (MAX_TEXT_CHARS + 10) + "\n")])
    import_path(data_dir, OWNER, src)
    with open_mail_cache(data_dir) as cache:
        source = cache.source(_keys(data_dir)[0])
        assert source is not None
        assert len(source.text) == MAX_TEXT_CHARS and source.truncated


def test_import_is_idempotent_and_the_generation_moves_only_on_change(
    tmp_path: Path, data_dir: Path,
) -> None:
    src = write_mbox(tmp_path / "in.mbox", [
        mail(message_id=f"<n{i}@example.org>", subject=f"s{i}") for i in range(5)])
    first = import_path(data_dir, OWNER, src)
    assert (first.added, first.generation) == (5, 1)
    keys = _keys(data_dir)
    again = import_path(data_dir, OWNER, src)
    assert (again.seen, again.added, again.duplicates, again.generation) == (5, 0, 5, 1)
    assert _keys(data_dir) == keys
    # The same mail delivered to a Maildir is the same stored message: same keys, nothing new.
    box = mailbox.mbox(src, create=False)
    maildir = write_maildir(tmp_path / "Maildir", [box.get_bytes(k) for k in box.iterkeys()])
    box.close()
    from_maildir = import_path(data_dir, OWNER.upper(), maildir)
    assert (from_maildir.added, from_maildir.duplicates) == (0, 5)
    with open_mail_cache(data_dir) as cache:
        assert cache.generation() == 1


def test_maildir_import(tmp_path: Path, data_dir: Path) -> None:
    maildir = write_maildir(tmp_path / "Maildir", [
        mail(message_id="<d1@example.org>"), mail(message_id="<d2@example.org>")])
    report = import_path(data_dir, OWNER, maildir)
    assert (report.seen, report.added) == (2, 2)
    with open_mail_cache(data_dir) as cache:
        assert sorted(m.message_id for m in cache.messages()) == [
            "d1@example.org", "d2@example.org"]


def test_a_malformed_message_is_skipped_with_a_count_and_a_reason(
    tmp_path: Path, data_dir: Path,
) -> None:
    src = write_mbox(tmp_path / "in.mbox", [
        mail(message_id="<ok1@example.org>"), MALFORMED, mail(message_id="<ok2@example.org>")])
    report = import_path(data_dir, OWNER, src)
    assert (report.seen, report.added, dict(report.skipped)) == (
        3, 2, {"no_header_section": 1})
    with open_mail_cache(data_dir) as cache:
        assert sorted(m.message_id for m in cache.messages()) == [
            "ok1@example.org", "ok2@example.org"]


def test_a_source_that_cannot_be_read_to_its_end_imports_nothing(
    tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    maildir = write_maildir(tmp_path / "Maildir", [
        mail(message_id=f"<g{i}@example.org>") for i in range(3)])
    # A message file that vanishes under the importer, the last one, after two were read (a
    # dangling link no longer stands for one: a link is skipped unopened, issue #26).
    real = importer._read_entry
    opened: list[str] = []

    def vanishing(folder: int, name: str) -> bytes | None:
        opened.append(name)
        if len(opened) == 3:
            os.unlink(name, dir_fd=folder)
        return real(folder, name)

    monkeypatch.setattr(importer, "_read_entry", vanishing)
    with pytest.raises(ImportFailed, match="nothing of it was imported"):
        import_path(data_dir, OWNER, maildir)
    with open_mail_cache(data_dir) as cache:
        assert (cache.generation(), list(cache.messages())) == (0, [])


@pytest.mark.parametrize("kind", ["missing", "plain directory"])
def test_a_path_that_is_no_mailbox_is_refused(tmp_path: Path, data_dir: Path,
                                              kind: str) -> None:
    path = tmp_path / "nothing"
    if kind == "plain directory":
        path.mkdir()
    with pytest.raises(ImportFailed, match="mbox file or a Maildir"):
        import_path(data_dir, OWNER, path)


@pytest.mark.parametrize("account", ["", "owner", "a@b@c", "<owner@example.com>", "x y@z"])
def test_an_account_that_is_no_address_is_refused(tmp_path: Path, data_dir: Path,
                                                  account: str) -> None:
    src = write_mbox(tmp_path / "in.mbox", [mail()])
    with pytest.raises(ImportFailed, match="--account"):
        import_path(data_dir, account, src)


def test_threads_follow_references_and_in_reply_to(tmp_path: Path, data_dir: Path) -> None:
    src = write_mbox(tmp_path / "in.mbox", [
        mail(message_id="<root@example.org>", subject="root"),
        mail(message_id="<r1@example.org>", subject="by references",
             headers={"References": "<root@example.org>", "In-Reply-To": "<root@example.org>"}),
        mail(message_id="<r2@example.org>", subject="deep",
             headers={"References": "<root@example.org> <r1@example.org>"}),
        mail(message_id="<r3@example.org>", subject="in-reply-to only",
             headers={"In-Reply-To": "<root@example.org>"}),
        mail(message_id="<other@example.org>", subject="unrelated"),
    ])
    import_path(data_dir, OWNER, src)
    import_path(data_dir, OTHER, src)
    with open_mail_cache(data_dir) as cache:
        threads: dict[tuple[str, str], str] = {
            (m.account, m.subject): m.thread_id for m in cache.messages()}
    for account in (OWNER, OTHER):
        root = threads[(account, "root")]
        assert [threads[(account, s)] for s in ("by references", "deep", "in-reply-to only")] \
            == [root] * 3
        assert threads[(account, "unrelated")] != root
    # Per account: one account's thread is not another's.
    assert threads[(OWNER, "root")] != threads[(OTHER, "root")]


def test_direction_dates_and_order(tmp_path: Path, data_dir: Path) -> None:
    src = write_mbox(tmp_path / "in.mbox", [
        mail(message_id="<late@example.org>", date="Wed, 02 Dec 2026 10:00:00 -0500"),
        mail(message_id="<sent@example.org>", sender=f"Me <{OWNER.upper()}>",
             date="Tue, 01 Dec 2026 08:00:00 +0000"),
        mail(message_id="<nodate@example.org>", date=None),
        mail(message_id="<baddate@example.org>", date="not a date"),
    ])
    import_path(data_dir, OWNER, src)
    with open_mail_cache(data_dir) as cache:
        found = list(cache.messages())
    undated = sorted(m.message_key for m in found if m.date is None)
    assert [m.message_key for m in found[:2]] == undated
    assert [m.message_id for m in found[2:]] == ["sent@example.org", "late@example.org"]
    assert found[3].date == _dt.datetime(2026, 12, 2, 15, 0, tzinfo=_dt.UTC)
    assert {m.message_id: m.direction for m in found}["sent@example.org"] == "sent"


def test_erase_removes_exactly_one_source(tmp_path: Path, data_dir: Path) -> None:
    src = write_mbox(tmp_path / "in.mbox", [
        mail(message_id="<t1@example.org>"),
        mail(message_id="<t2@example.org>", headers={"References": "<t1@example.org>"}),
        mail(message_id="<u1@example.org>"),
    ])
    import_path(data_dir, OWNER, src)
    import_path(data_dir, OTHER, src)
    with open_mail_cache(data_dir) as cache:
        mine = {m.message_id: m for m in cache.messages() if m.account == OWNER}
        generation = cache.generation()
    assert erase(data_dir, "message", mine["u1@example.org"].message_key) == 1
    assert erase(data_dir, "thread", mine["t1@example.org"].thread_id) == 2
    with open_mail_cache(data_dir) as cache:
        left = [(m.account, m.message_id) for m in cache.messages()]
        assert cache.generation() == generation + 2
    # The other account's copies of the same mail are all still there.
    assert sorted(left) == [(OTHER, "t1@example.org"), (OTHER, "t2@example.org"),
                            (OTHER, "u1@example.org")]
    assert erase(data_dir, "account", OTHER.upper()) == 3
    assert _keys(data_dir) == []


def test_the_worker_pool_stores_exactly_what_one_process_stores(tmp_path: Path) -> None:
    # Enough for three batches, so the pool (the console script's default) really parses.
    messages: list[object] = [mail(message_id=f"<p{i}@example.org>", subject=f"n{i}",
                                   body=f"body {i}\n") for i in range(1100)]
    messages[700] = MALFORMED
    messages[900] = messages[100]  # the same mail twice, in different batches
    src = write_mbox(tmp_path / "in.mbox", messages)  # type: ignore[arg-type]
    serial = import_path(tmp_path / "one", OWNER, src, workers=1)
    pooled = import_path(tmp_path / "pool", OWNER, src, workers=2)
    assert (pooled.seen, pooled.added, pooled.duplicates, dict(pooled.skipped)) == (
        serial.seen, serial.added, serial.duplicates, dict(serial.skipped)) == (
        1100, 1098, 1, {"no_header_section": 1})
    with open_mail_cache(tmp_path / "one") as a, open_mail_cache(tmp_path / "pool") as b:
        assert list(a.messages()) == list(b.messages())
        keys = [m.message_key for m in a.messages()]
        assert [a.source(k) for k in keys] == [b.source(k) for k in keys]


def test_raw_8bit_headers_charsets_and_encodings_are_decoded_not_fatal(
    tmp_path: Path, data_dir: Path,
) -> None:
    utf8_raw = ("From: Zoë Ünïcode <zoe@example.org>\nTo: owner@example.com\n"
                "Subject: Grüße in raw UTF-8\nMessage-ID: <u8@example.org>\n"
                "Content-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: 8bit\n\n"
                "Hällo\n").encode()
    latin_raw = (b"From: \xff\xfe <odd@example.org>\nMessage-ID: <l1@example.org>\n"
                 b"Content-Type: text/plain; charset=iso-8859-1\n"
                 b"Content-Transfer-Encoding: base64\n\nR3L832U=\n")  # "Grüße" in Latin-1
    unknown_raw = (b"From: a@example.org\nMessage-ID: <x1@example.org>\n"
                   b"Content-Type: text/plain; charset=x-no-such-charset\n\nplain words\n")
    src = write_mbox(tmp_path / "in.mbox", [utf8_raw, latin_raw, unknown_raw])
    report = import_path(data_dir, OWNER, src)
    assert (report.added, report.skipped_total) == (3, 0)
    with open_mail_cache(data_dir) as cache:
        found = {m.message_id: m for m in cache.messages()}
        sources = {k: cache.source(m.message_key) for k, m in found.items()}
    assert found["u8@example.org"].subject == "Grüße in raw UTF-8"
    assert found["u8@example.org"].sender == (MailAddress("Zoë Ünïcode", "zoe@example.org"),)
    assert found["l1@example.org"].sender == (MailAddress("\ufffd\ufffd", "odd@example.org"),)
    texts = {k: s.text for k, s in sources.items() if s is not None}
    assert texts == {"u8@example.org": "Hällo\n", "l1@example.org": "Grüße",
                     "x1@example.org": "plain words\n"}
