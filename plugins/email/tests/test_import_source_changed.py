"""An mbox that a mail client or a delivery writes while it is imported: nothing of it is
stored, the import says to import again, and importing again stores each message whole.
Offsets taken before the change were read in the changed file: torn messages were stored as
whole ones (``truncated`` 0), others skipped as malformed, and the import reported success.
The import holds the shared lock writers take, so a writer that takes it waits for the read.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from email_support import cache_dir
from mail_support import OWNER
from toolhost_email import open_mail_cache
from toolhost_email.importer import ImportFailed, ImportReport, import_path

CHANGED = "changed while it was read"


def _message(i: int, words: int) -> str:
    return (f"From a@example.org Tue Dec  1 10:00:0{i} 2026\n"
            f"From: Sender{i} <s{i}@example.org>\nTo: {OWNER}\nSubject: message {i}\n"
            f"Message-ID: <m{i}@example.org>\n\n{f'word{i} ' * words}\n\n")


#: Four messages of different lengths (a shifted offset lands inside another message).
WORDS = {1: 4000, 2: 5000, 3: 4000, 4: 5000}
MESSAGES = [_message(i, words) for i, words in WORDS.items()]


def _stored(data_dir: Path) -> list[tuple[str, int]]:
    """Each stored message's subject and the length of its text."""
    with open_mail_cache(data_dir) as cache:
        sources = [(m.subject, cache.source(m.message_key)) for m in cache.messages()]
    return sorted((subject, len(source.text)) for subject, source in sources
                  if source is not None)


def _nothing_stored(data_dir: Path) -> None:
    with open_mail_cache(data_dir) as cache:
        assert (cache.generation(), list(cache.messages())) == (0, [])


def _whole(i: int) -> tuple[str, int]:
    return f"message {i}", len(f"word{i} ") * WORDS[i] + 1  # and its line's end


def test_an_mbox_rewritten_in_place_midway_imports_nothing_then_whole_messages(
    tmp_path: Path, data_dir: Path,
) -> None:
    box = tmp_path / "in.mbox"
    box.write_text("".join(MESSAGES))

    def client_deletes_message_1(n: int) -> None:
        if n == 1:  # as mutt syncs a deletion: truncate, write the rest back
            with box.open("r+") as f:
                f.truncate(0)
                f.write("".join(MESSAGES[1:]))

    with pytest.raises(ImportFailed, match=CHANGED) as failed:
        import_path(data_dir, OWNER, box, on_read=client_deletes_message_1)
    assert "import again" in str(failed.value) and "\n" not in str(failed.value)
    _nothing_stored(data_dir)
    report = import_path(data_dir, OWNER, box)
    assert (report.seen, report.added, dict(report.skipped)) == (3, 3, {})
    assert _stored(data_dir) == sorted(_whole(i) for i in (2, 3, 4))


def test_an_mbox_replaced_by_another_file_midway_imports_nothing(
    tmp_path: Path, data_dir: Path,
) -> None:
    # A client that writes a new file and renames it over the old one: the open file still
    # reads the old bytes whole, but they are no longer the mailbox at PATH.
    box = tmp_path / "in.mbox"
    box.write_text("".join(MESSAGES))

    def client_replaces(n: int) -> None:
        if n == 2:
            fresh = tmp_path / "in.mbox.new"
            fresh.write_text("".join(MESSAGES[:3]))
            fresh.replace(box)

    with pytest.raises(ImportFailed, match=CHANGED):
        import_path(data_dir, OWNER, box, on_read=client_replaces)
    _nothing_stored(data_dir)


def test_mail_delivered_after_the_last_read_still_fails_the_import_before_it_commits(
    tmp_path: Path, data_dir: Path,
) -> None:
    box = tmp_path / "in.mbox"
    box.write_text("".join(MESSAGES))

    def delivery_appends(n: int) -> None:
        if n == len(MESSAGES):  # every message read: only the check before COMMIT is left
            with box.open("a") as f:
                f.write(_message(5, 10))

    with pytest.raises(ImportFailed, match=CHANGED):
        import_path(data_dir, OWNER, box, on_read=delivery_appends)
    _nothing_stored(data_dir)
    assert import_path(data_dir, OWNER, box).added == 5


_TRY_WRITE_LOCK = """
import fcntl, sys
with open(sys.argv[1], "r+b") as f:
    try:
        fcntl.lockf(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        print("refused")
    else:
        print("locked")
"""

_HOLD_WRITE_LOCK = """
import fcntl, sys
with open(sys.argv[1], "r+b") as f:
    fcntl.lockf(f.fileno(), fcntl.LOCK_EX)
    print("locked", flush=True)
    sys.stdin.read()  # until the test closes it
"""


def test_a_writer_that_takes_the_mbox_lock_cannot_take_it_while_the_import_reads(
    tmp_path: Path, data_dir: Path,
) -> None:
    # A writer's fcntl lock (mutt, Dovecot, postfix's local delivery take it) is refused
    # while the import reads, so such a writer waits rather than tear the read.
    box = tmp_path / "in.mbox"
    box.write_text("".join(MESSAGES))
    answers: list[str] = []

    def writer_tries(n: int) -> None:
        if n == 2:
            answers.append(subprocess.run(
                [sys.executable, "-c", _TRY_WRITE_LOCK, str(box)], capture_output=True,
                text=True, timeout=60, check=True).stdout.strip())

    assert import_path(data_dir, OWNER, box, on_read=writer_tries).added == 4
    assert answers == ["refused"]
    # Once the import is over, the lock is the writer's to take.
    assert subprocess.run([sys.executable, "-c", _TRY_WRITE_LOCK, str(box)],
                          capture_output=True, text=True, timeout=60,
                          check=True).stdout.strip() == "locked"


def _holder(box: Path) -> subprocess.Popen[str]:
    holder = subprocess.Popen([sys.executable, "-c", _HOLD_WRITE_LOCK, str(box)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    return holder


def _release(holder: subprocess.Popen[str]) -> None:
    holder.communicate(timeout=60)  # closes its stdin: it lets go and ends


def test_an_mbox_a_writer_keeps_locked_is_one_line_and_status_2_and_no_cache(
    tmp_path: Path,
) -> None:
    # As the operator runs it: the console script, as for any other source it cannot read.
    box = tmp_path / "in.mbox"
    box.write_text("".join(MESSAGES))
    root = tmp_path / "data"
    holder = _holder(box)
    try:
        result = subprocess.run(
            [sys.executable, "-m", "toolhost_email.cli", "import", "--account", OWNER, str(box)],
            env={**os.environ, "TOOLHOST_DATA_DIR": str(root)}, capture_output=True, text=True,
            timeout=120, check=False)
    finally:
        _release(holder)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith(f"toolhost-email: {box} is locked by another program")
    assert "import again" in result.stderr and result.stderr.count("\n") == 1
    assert not cache_dir(root).exists()


def test_an_import_waits_for_a_writer_that_lets_go_of_its_lock(
    tmp_path: Path, data_dir: Path,
) -> None:
    box = tmp_path / "in.mbox"
    box.write_text("".join(MESSAGES[:2]))
    holder = _holder(box)
    reports: list[ImportReport] = []
    worker = threading.Thread(target=lambda: reports.append(import_path(data_dir, OWNER, box)))
    worker.start()
    # The delivery the writer was making lands before the import reads anything.
    with box.open("a") as f:
        f.write("".join(MESSAGES[2:]))
    _release(holder)
    worker.join(timeout=120)
    assert [r.added for r in reports] == [4]


def test_an_unchanged_mbox_imports_as_before_and_is_left_unlocked(
    tmp_path: Path, data_dir: Path,
) -> None:
    box = tmp_path / "in.mbox"
    box.write_text("".join(MESSAGES))
    before = os.stat(box)
    assert import_path(data_dir, OWNER, box).added == 4
    assert (os.stat(box).st_mtime_ns, os.stat(box).st_size) == (before.st_mtime_ns,
                                                                before.st_size)
    with box.open("r+b") as f:  # nothing of the import's lock is left behind
        fcntl.lockf(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
