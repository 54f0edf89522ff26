"""What ``toolhost-email import`` accepts (issue #26 item 6): a file that is no mbox, or a
source with no message in it, is one line and exit status 2 with nothing written; a Maildir
entry that is not a regular file (a symbolic link, a FIFO, a directory) is skipped unopened
and counted, the rest imported. Run as the operator runs it: the console script in a
subprocess, with a timeout (a FIFO once blocked the import for ever)."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from email_support import cache_dir
from mail_support import OWNER, mail, write_maildir, write_mbox
from toolhost_email import open_mail_cache

#: What stands for /etc/shadow: a file outside the Maildir that reads as a message.
SECRET = "SHADOW-5e1b7c0d-root-hash"
NO_MESSAGES = "no messages found in"


def _cli(data_root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TOOLHOST_DATA_DIR": str(data_root)}
    return subprocess.run([sys.executable, "-m", "toolhost_email.cli", *args], env=env,
                          capture_output=True, text=True, timeout=60, check=False)


def _import(data_root: Path, src: Path) -> subprocess.CompletedProcess[str]:
    return _cli(data_root, "import", "--account", OWNER, str(src))


def _cache_files(data_root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(cache_dir(data_root).iterdir())}


def _assert_no_messages(result: subprocess.CompletedProcess[str], src: Path) -> None:
    assert (result.returncode, result.stdout) == (2, "")
    line = result.stderr
    assert line.startswith(f"toolhost-email: {NO_MESSAGES} {src}")
    assert "an mbox file" in line and "a Maildir directory" in line
    assert line.count("\n") == 1 and line.endswith("\n") and "Traceback" not in line


def _secret_mail() -> bytes:
    return mail(subject=f"root:{SECRET}", body=f"{SECRET}\n", message_id="<shadow@x>").as_bytes()


_NOT_MBOX = {
    "empty": b"",
    "random bytes": random.Random(26).randbytes(8192),
    "a single .eml": mail(message_id="<eml@x>").as_bytes(),
    # mailbox.mbox takes the "From " line in this body for the start of a message.
    "a .eml with From in its body": mail(
        message_id="<eml2@x>", body="Hello,\n\nFrom now on, write to me here.\n").as_bytes(),
    "plain text": b"notes for tuesday\n\n- call the bank\n",
    "text, then an mbox": b"notes\n" + mail(message_id="<late@x>").as_bytes(unixfrom=True),
}


@pytest.mark.parametrize("kind", list(_NOT_MBOX))
def test_a_file_that_is_no_mbox_is_one_line_and_status_2_and_no_cache(
    tmp_path: Path, kind: str,
) -> None:
    src = tmp_path / "in.eml"
    src.write_bytes(_NOT_MBOX[kind])
    root = tmp_path / "data"
    _assert_no_messages(_import(root, src), src)
    assert not root.exists()


@pytest.mark.parametrize("kind", ["empty", "a single .eml"])
def test_a_file_that_is_no_mbox_leaves_an_existing_cache_as_it_was(
    tmp_path: Path, kind: str,
) -> None:
    root = tmp_path / "data"
    assert _import(root, write_mbox(tmp_path / "in.mbox", [mail()])).returncode == 0
    before = _cache_files(root)
    src = tmp_path / "one.eml"
    src.write_bytes(_NOT_MBOX[kind])
    _assert_no_messages(_import(root, src), src)
    assert _cache_files(root) == before


def test_an_empty_maildir_is_no_messages(tmp_path: Path) -> None:
    maildir = write_maildir(tmp_path / "Maildir", [])
    root = tmp_path / "data"
    _assert_no_messages(_import(root, maildir), maildir)
    assert not root.exists()


def test_a_symlink_in_a_maildir_is_skipped_and_counted_and_never_read(tmp_path: Path) -> None:
    shadow = tmp_path / "etc" / "shadow"
    shadow.parent.mkdir()
    shadow.write_bytes(_secret_mail())
    maildir = write_maildir(tmp_path / "Maildir", [mail(message_id="<real@x>")])
    os.symlink(shadow, maildir / "cur" / "1700000000.M1P1.host:2,S")
    os.symlink(shadow, maildir / "new" / "1700000001.M1P1.host")
    root = tmp_path / "data"
    result = _import(root, maildir)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == (f"imported {maildir} as {OWNER}: 3 read, 1 added, 0 already "
                             "cached, 2 skipped (2 not_regular_file)\n")
    with open_mail_cache(cache_dir(root)) as cache:
        assert [m.message_id for m in cache.messages()] == ["real@x"]
    assert not any(SECRET.encode() in data for data in _cache_files(root).values())


def test_a_fifo_in_a_maildir_is_skipped_and_the_import_ends(tmp_path: Path) -> None:
    maildir = write_maildir(tmp_path / "Maildir", [mail(message_id="<real@x>")])
    os.mkfifo(maildir / "new" / "1700000000.M1P1.fifo")
    os.mkfifo(maildir / "cur" / "1700000001.M1P1.fifo:2,S")
    (maildir / "cur" / "1700000002.M1P1.dir:2,S").mkdir()
    root = tmp_path / "data"
    env = {**os.environ, "TOOLHOST_DATA_DIR": str(root)}
    # The old importer opened the FIFO and waited for a writer for ever: bounded here.
    result = subprocess.run(
        [sys.executable, "-m", "toolhost_email.cli", "import", "--account", OWNER, str(maildir)],
        env=env, capture_output=True, text=True, timeout=20, check=False)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == (f"imported {maildir} as {OWNER}: 4 read, 1 added, 0 already "
                             "cached, 3 skipped (3 not_regular_file)\n")


def test_a_maildir_of_only_entries_that_are_no_files_is_no_messages(tmp_path: Path) -> None:
    shadow = tmp_path / "shadow"
    shadow.write_bytes(_secret_mail())
    maildir = write_maildir(tmp_path / "Maildir", [])
    os.symlink(shadow, maildir / "cur" / "1700000000.M1P1.host:2,S")
    os.mkfifo(maildir / "new" / "1700000001.M1P1.fifo")
    root = tmp_path / "data"
    result = subprocess.run(
        [sys.executable, "-m", "toolhost_email.cli", "import", "--account", OWNER, str(maildir)],
        env={**os.environ, "TOOLHOST_DATA_DIR": str(root)}, capture_output=True, text=True,
        timeout=20, check=False)
    _assert_no_messages(result, maildir)
    assert "2 entries skipped: not regular files" in result.stderr
    assert not root.exists()


def test_a_maildir_whose_cur_is_a_symlink_is_refused(tmp_path: Path) -> None:
    elsewhere = write_maildir(tmp_path / "elsewhere", [])
    (elsewhere / "cur" / "1700000000.M1P1.host:2,S").write_bytes(_secret_mail())
    maildir = write_maildir(tmp_path / "Maildir", [mail(message_id="<real@x>")])
    (maildir / "cur").rmdir()
    os.symlink(elsewhere / "cur", maildir / "cur")
    root = tmp_path / "data"
    result = _import(root, maildir)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (f"toolhost-email: {maildir / 'cur'} is a symbolic link: a "
                             "Maildir's cur/ and new/ are read only as its own directories\n")
    assert not root.exists()


def test_a_good_mbox_and_a_good_maildir_still_import(tmp_path: Path) -> None:
    root = tmp_path / "data"
    src = tmp_path / "in.mbox"
    write_mbox(src, [mail(message_id="<m1@x>"), mail(message_id="<m2@x>")])
    src.write_bytes(b"\n\n" + src.read_bytes())  # a leading blank line or two is still an mbox
    first = _import(root, src)
    assert (first.returncode, first.stderr) == (0, "")
    assert first.stdout == (f"imported {src} as {OWNER}: 2 read, 2 added, 0 already cached, "
                            "0 skipped\n")
    maildir = write_maildir(tmp_path / "Maildir", [
        mail(message_id="<m2@x>"), mail(message_id="<d1@x>")])
    second = _import(root, maildir)
    assert (second.returncode, second.stderr) == (0, "")
    assert second.stdout == (f"imported {maildir} as {OWNER}: 2 read, 1 added, 1 already "
                             "cached, 0 skipped\n")
    with open_mail_cache(cache_dir(root)) as cache:
        assert sorted(m.message_id for m in cache.messages()) == ["d1@x", "m1@x", "m2@x"]
