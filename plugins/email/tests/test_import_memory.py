"""What an import holds in memory does not grow with the mailbox. A batch held up to 500 raw
messages of up to 25 MiB each, with those over the size bound among them until they were
parsed and skipped: an export of attachment-heavy mail made the operator's import run out of
memory. Measured with ``tracemalloc`` (every bytes object the import reads is traced) on real
mbox files and Maildirs at the real bounds; the import parses in this process (the library's
default), so the batches it holds are this process's."""

from __future__ import annotations

import base64
import random
import shutil
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mail_support import OWNER
from toolhost_email.importer import ImportReport, import_path
from toolhost_email.parse import MAX_MESSAGE_BYTES

MiB = 1 << 20


def _message(i: int, size: int) -> bytes:
    """A short text part and an attachment of about ``size`` bytes, distinct per ``i``: base64
    in lines of 1,000 characters (RFC 2045's 76 take three times as long to parse traced, and
    the import holds the same bytes)."""
    block = base64.b64encode(random.Random(i).randbytes(750)) + b"\n"
    attachment = (block * (size // len(block) + 1))[:size]
    return (b"From: Sender <s@example.org>\nTo: " + OWNER.encode() + b"\nSubject: scan %d\n"
            b"Message-ID: <m%d@example.org>\nMIME-Version: 1.0\n"
            b"Content-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/plain\n\n"
            b"See attached %d.\n--b\nContent-Type: application/pdf\n"
            b"Content-Transfer-Encoding: base64\n\n" % (i, i, i)) + attachment + b"--b--\n"


def _mbox(path: Path, messages: Iterator[bytes]) -> Path:
    with path.open("wb") as f:
        for raw in messages:
            f.write(b"From s@example.org Tue Dec  1 10:00:00 2026\n" + raw + b"\n")
    return path


def _maildir(path: Path, messages: Iterator[bytes]) -> Path:
    for sub in ("cur", "new", "tmp"):
        (path / sub).mkdir(parents=True)
    for i, raw in enumerate(messages):
        (path / "new" / f"{1700000000 + i}.M{i}P1.host").write_bytes(raw)
    return path


SOURCES: dict[str, Callable[[Path, Iterator[bytes]], Path]] = {"mbox": _mbox,
                                                                "maildir": _maildir}


@pytest.fixture
def source(tmp_path: Path) -> Iterator[Path]:
    """Where a test writes its mailbox (some 200 MiB), removed once it ends."""
    path = tmp_path / "in"
    yield path
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def _peak(data_dir: Path, source: Path) -> tuple[ImportReport, int]:
    """The import's report, and the most memory it held at once (bytes traced)."""
    tracemalloc.start()
    try:
        report = import_path(data_dir, OWNER, source)
        return report, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("kind", list(SOURCES))
def test_messages_over_the_size_bound_are_not_held_while_the_import_reads(
    source: Path, data_dir: Path, kind: str,
) -> None:
    # Each is read to the bound and a byte more, its key taken, its bytes let go: 8 of them
    # held at once were over 200 MiB, for mail that is never stored.
    report, peak = _peak(data_dir, SOURCES[kind](
        source, (_message(i, MAX_MESSAGE_BYTES + MiB) for i in range(8))))
    assert (report.seen, report.added, dict(report.skipped)) == (8, 0, {"too_large": 8})
    assert peak < 3 * MAX_MESSAGE_BYTES


def test_a_repeated_message_over_the_bound_is_one_skip_and_one_duplicate(
    source: Path, data_dir: Path,
) -> None:
    big = _message(1, MAX_MESSAGE_BYTES + MiB)
    report = import_path(data_dir, OWNER, _mbox(source, iter([big, big])))
    assert (report.seen, report.added, report.duplicates, dict(report.skipped)) == (
        2, 0, 1, {"too_large": 1})


@pytest.mark.parametrize("kind", list(SOURCES))
def test_a_batch_of_large_messages_holds_a_bounded_number_of_bytes(
    source: Path, data_dir: Path, kind: str,
) -> None:
    # 60 messages of 3 MiB are one batch by count (500): held whole (over 180 MiB traced)
    # before; now batches end by their bytes too.
    SOURCES[kind](source, (_message(i, 3 * MiB) for i in range(60)))
    report, peak = _peak(data_dir, source)
    assert (report.seen, report.added, dict(report.skipped)) == (60, 60, {})
    assert peak < 96 * MiB
    # Every message stored once.
    assert import_path(data_dir, OWNER, source).duplicates == 60
