"""A batch of an import weighs what its rows can hold, not only its messages' bytes (D390).

A row can be many times its message: each header is stored as JSON in the headers of record,
and an Authentication-Results a second time on its own. 96 Authentication-Results of 3,990
control characters (six characters of JSON each, ``\\u0001``) made a row of 4.8 million
characters from 388 KiB, and 200 such messages peaked at 1.7 GiB and left an 877 MB cache;
quotes (``\\"``, two each) make a row four times its message. Measured with ``tracemalloc``
on real mbox files, through the real import; the headers of record as the reader returns them,
the Authentication-Results as ``authres`` reads them from the cache.
"""

from __future__ import annotations

import json
import random
import re
import sqlite3
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from mail_support import OWNER
from toolhost_email import open_mail_cache
from toolhost_email.authres import MAX_STORED_CHARS, dkim_pass_for, spoofed_from
from toolhost_email.importer import ImportReport, import_path
from toolhost_email.parse import MAX_TEXT_CHARS
from toolhost_email.rows import parse_batch, row_bound
from toolhost_email.store import CACHE_FILE

MiB = 1 << 20
AUTHSERV = "mx.example.org"
QUOTE = '"'


def _hostile(i: int, filler: str) -> bytes:
    """About 388 KiB: 96 Authentication-Results of 3,990 ``filler`` characters each (under
    the 4,000 they are stored cut to, so each is stored whole, twice)."""
    fields = [f"From: s@example.org\nTo: {OWNER}\nSubject: m{i}\nMessage-ID: <h{i}@example.org>"]
    fields += [f"Authentication-Results: {AUTHSERV}; x{j}={i}{filler * 3990}"
               for j in range(96)]
    return ("\n".join(fields) + "\n\nbody\n").encode()


def _mbox(path: Path, messages: Iterator[bytes]) -> Path:
    with path.open("wb") as f:
        for raw in messages:
            f.write(b"From s@example.org Tue Dec  1 10:00:00 2026\n" + raw + b"\n")
    return path


@pytest.fixture
def hostile_mbox(tmp_path: Path) -> Iterator[Path]:
    """80 messages whose rows are four times their bytes (quotes), 31 MiB: one batch by the
    bytes alone, so its rows were held at once (120 million characters)."""
    path = _mbox(tmp_path / "in.mbox", (_hostile(i, QUOTE) for i in range(80)))
    yield path
    path.unlink()


def _peak(data_dir: Path, source: Path, workers: int) -> tuple[ImportReport, int]:
    """The import's report, and the most memory this process held at once (bytes traced)."""
    tracemalloc.start()
    try:
        report = import_path(data_dir, OWNER, source, workers=workers)
        return report, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_batch_ends_by_the_rows_its_messages_can_make(
    hostile_mbox: Path, data_dir: Path,
) -> None:
    report, peak = _peak(data_dir, hostile_mbox, workers=1)
    assert (report.seen, report.added, dict(report.skipped)) == (80, 80, {})
    assert peak < 64 * MiB


def test_a_batch_handed_to_the_pool_weighs_the_rows_it_comes_back_as(
    hostile_mbox: Path, data_dir: Path,
) -> None:
    # The pool's rows are unpickled here: two batches of 31 MiB of these weighed 62 MiB, under
    # the bound, and came back as 250 million characters.
    twice = _mbox(hostile_mbox.with_suffix(".twice"), (_hostile(i, QUOTE) for i in range(160)))
    try:
        report, peak = _peak(data_dir, twice, workers=2)
    finally:
        twice.unlink()
    assert (report.seen, report.added, dict(report.skipped)) == (160, 160, {})
    assert peak < 96 * MiB


def _row_lengths(data_dir: Path) -> tuple[int, int]:
    with sqlite3.connect(data_dir / CACHE_FILE) as db:
        return db.execute("SELECT max(length(headers)), max(length(auth_results)) "
                          "FROM messages").fetchone()


def test_control_characters_are_not_stored_as_six_characters_each(
    tmp_path: Path, data_dir: Path,
) -> None:
    raw = _hostile(0, "\x01")
    import_path(data_dir, OWNER, _mbox(tmp_path / "in.mbox", iter([raw])))
    # 12 times its bytes before (JSON's \u0001, in both columns).
    headers, auth_results = _row_lengths(data_dir)
    assert headers + auth_results < 1.5 * len(raw)


def test_the_headers_of_record_drop_what_a_shown_header_drops(
    tmp_path: Path, data_dir: Path,
) -> None:
    raw = (f"From: s@example.org\nTo: {OWNER}\nMessage-ID: <c@example.org>\n"
           "X-Note: a\x01b\x1fc\td\x7fe\n\nbody\n").encode()
    import_path(data_dir, OWNER, _mbox(tmp_path / "in.mbox", iter([raw])))
    with open_mail_cache(data_dir) as cache:
        (message,) = cache.messages()
        source = cache.source(message.message_key)
    assert source is not None
    # C0 controls but tab and line breaks, as toolhost-people's ``shown`` drops them.
    assert ("X-Note", "abc\td\x7fe") in source.headers


#: Authentication-Results values and what the owner's server said in each: a control that is
#: white space to the tokenizer still separates two words, another still joins them.
RESULTS = [
    (f"{AUTHSERV}; dkim=pass\x1fheader.d=example.org", True),
    (f"{AUTHSERV}; dkim=pass\x0bheader.d=example.org", True),
    (f"{AUTHSERV}; dkim=\x01pass header.d=example.org", False),
    (f"{AUTHSERV}; dkim=pass header.d=example.org\x01", False),
    (f"{AUTHSERV}\x01; dkim=pass header.d=example.org", False),
]


@pytest.mark.parametrize(("value", "passed"), RESULTS)
def test_authentication_results_with_controls_read_as_before(
    tmp_path: Path, data_dir: Path, value: str, passed: bool,
) -> None:
    raw = (f"From: s@example.org\nTo: {OWNER}\nMessage-ID: <a@example.org>\n"
           f"Authentication-Results: {value}\n\nbody\n").encode()
    import_path(data_dir, OWNER, _mbox(tmp_path / "in.mbox", iter([raw])))
    with sqlite3.connect(data_dir / CACHE_FILE) as db:
        (stored,) = json.loads(db.execute("SELECT auth_results FROM messages").fetchone()[0])
    assert re.search("[\x00-\x1f]", stored) is None
    assert len(stored) == len(value)  # one character for each: a cut one still reads as cut
    assert dkim_pass_for([stored], AUTHSERV, "example.org") is passed
    assert dkim_pass_for([value], AUTHSERV, "example.org") is passed


def test_a_cut_authentication_results_of_controls_still_reads_as_cut(
    tmp_path: Path, data_dir: Path,
) -> None:
    value = f"{AUTHSERV}; dkim=pass header.d=example.org; x=" + "\x01" * MAX_STORED_CHARS
    raw = (f"From: s@example.org\nTo: {OWNER}\nMessage-ID: <a@example.org>\n"
           f"Authentication-Results: {value}\n\nbody\n").encode()
    import_path(data_dir, OWNER, _mbox(tmp_path / "in.mbox", iter([raw])))
    with sqlite3.connect(data_dir / CACHE_FILE) as db:
        stored = json.loads(db.execute("SELECT auth_results FROM messages").fetchone()[0])
    assert len(stored[0]) == MAX_STORED_CHARS
    assert not dkim_pass_for(stored, AUTHSERV, "example.org")
    assert spoofed_from(stored, AUTHSERV, "example.org")


#: Header sections whose rows are the most characters per byte found: quoted and escaped
#: address lists written again with quotes and as JSON pairs, values stored twice, controls.
SHAPES = {
    "quoted authentication results": "".join(
        f"Authentication-Results: {AUTHSERV}; {QUOTE * 3990}\n" for _ in range(20)),
    "control authentication results": "".join(
        f"Authentication-Results: {AUTHSERV}; {chr(1) * 3990}\n" for _ in range(20)),
    "quoted subject and list fields": "".join(
        f"{name}: {QUOTE * 7990}\n" for name in ("Subject", "List-Id", "List-Unsubscribe",
                                                "List-Unsubscribe-Post")),
    "escaped addresses": "To: " + "\\\\," * 100 + "\n",
    "escaped addresses in each list": "".join(
        f"{name}: " + "\\," * 100 + "\n" for name in ("From", "To", "Cc", "Reply-To")),
    "one-letter addresses": "Cc: " + "a," * 100 + "\n",
    "quoted names": "From: " + '"\\"" <a>,' * 100 + "\n",
    "names with specials": "Reply-To: " + "a.b<a>," * 100 + "\n",
    "control names": "To: " + '"\x01"<a>,' * 100 + "\n",
    "empty fields": "".join(f'"{i}:\n' for i in range(300)),
    "a date written out": "Date: 1 Jan 2000 00:00 +0000 \u00e9\n",
    "encoded quotes": "Subject: " + "=?utf-8?q?=22=22=22?= " * 300 + "\n",
}


def _row_chars(raw: bytes) -> int:
    """The characters of the row of ``raw``; none for a message skipped."""
    (row,) = parse_batch(OWNER, [("k", raw)])
    return 0 if isinstance(row, str) else sum(len(v) for v in row if isinstance(v, str))


@pytest.mark.parametrize("line_end", ["\n", "\r\n"], ids=["lf", "crlf"])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_row_is_never_more_than_its_bound(shape: str, line_end: str) -> None:
    text = f"Message-ID: <b@example.org>\n{SHAPES[shape]}\nbody\n"
    raw = text.replace("\n", line_end).encode()
    assert 0 < _row_chars(raw) <= row_bound(raw)


def test_rows_of_random_header_sections_are_never_more_than_their_bound() -> None:
    pieces = ["a", ".", ",", '"', "\\", "(", ")", "<", ">", "@", ":", ";", " ", "\x01", "\x1f",
              "=?utf-8?q?=22?=", "\u00e9", "%", "*", "'", "="]
    names = ["To", "From", "Cc", "Reply-To", "Subject", "Authentication-Results", "List-Id",
             "List-Unsubscribe", "Date", "Message-ID", "References", "Content-Type", "X-A"]
    rng = random.Random(2231)
    for _ in range(300):
        fields = [f"{rng.choice(names)}: "
                  + "".join(rng.choice(pieces) for _ in range(rng.randint(1, 6)))
                  * rng.choice([1, 3, 30, 120])
                  for _ in range(rng.randint(1, 6))]
        raw = ("\n".join(fields) + "\n\nbody\n").encode()
        assert _row_chars(raw) <= row_bound(raw), raw[:200]


def test_a_body_counts_once_up_to_the_text_bound() -> None:
    # A body is stored once, as text, no longer than MAX_TEXT_CHARS: a message of a large
    # attachment weighs little more than its bytes, as before.
    raw = b"Subject: s\n\n" + b"x" * (4 * MiB)
    assert row_bound(raw) < 2 * MAX_TEXT_CHARS
