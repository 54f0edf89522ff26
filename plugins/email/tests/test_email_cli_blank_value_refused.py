"""``toolhost-email`` refuses an empty or blank value of any argument as bad input: one line on
stderr, exit 2, the cache untouched. An empty thread or account is what general and
account-wide feedback is stored with, so ``erase --thread ""`` erased all of that; an empty
PATH was read as the working directory."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from email_support import cache_dir
from mail_support import OWNER, mail, write_maildir, write_mbox
from toolhost_email.cli import main
from toolhost_email.erase import EraseScope, erase_source
from toolhost_email.feedback import record_feedback
from toolhost_email.importer import import_path
from toolhost_email.owners import set_owner

#: What was recorded before: general feedback (no account, no thread), an account's, a thread's.
GENERAL, ACCOUNT_WIDE = "keep replies short", "sign as Ben please"


@pytest.fixture
def data_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "data"
    cache = cache_dir(root)
    import_path(cache, OWNER, write_mbox(tmp_path / "in.mbox", [mail()]))
    for account, text in (("", GENERAL), (OWNER, ACCOUNT_WIDE)):
        record_feedback(cache, account=account, thread_id="", feedback=text, quote=text,
                        recorded_at="2026-12-01T10:00:00+00:00")
    set_owner(cache, OWNER, "ben")
    monkeypatch.setenv("TOOLHOST_DATA_DIR", str(root))
    return root


def _cache(data_root: Path) -> dict[str, list[tuple[object, ...]]]:
    """Everything the cache holds that a command could change."""
    with sqlite3.connect(cache_dir(data_root) / "mail.sqlite3") as conn:
        return {table: conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall()
                for table in ("messages", "feedback", "feedback_versions", "account_owners",
                              "meta")}


@pytest.mark.parametrize("blank", ["", " ", "\t "])
@pytest.mark.parametrize(("args", "name"), [
    (("erase", "--thread", "{}"), "--thread"),
    (("erase", "--account", "{}"), "--account"),
    (("erase", "--message", "{}"), "--message"),
    (("erase", "--owner", "{}"), "--owner"),
    (("feedback", "undo", "{}"), "ID"),
    (("owners", "set", "{}", "ben"), "ADDRESS"),
    (("owners", "set", OWNER, "{}"), "PRINCIPAL"),
    (("owners", "set", "--unowned", "{}"), "PRINCIPAL"),
    (("owners", "clear", "{}"), "ADDRESS"),
    (("import", "--account", "{}", "in.mbox"), "--account"),
    (("import", "--account", OWNER, "--owner", "{}", "in.mbox"), "--owner"),
])
def test_an_empty_or_blank_value_is_one_line_and_exit_2_and_changes_nothing(
        data_root: Path, capsys: pytest.CaptureFixture[str], args: tuple[str, ...], name: str,
        blank: str) -> None:
    # Regression: erase --thread "" / --account " " printed "erased thread : 0 messages
    # removed", exit 0, and deleted the general and the account-wide feedback (stored with
    # thread '' and account ''); erase --message "" exit 0; feedback undo "" exit 1.
    before = _cache(data_root)
    assert main([a.format(blank) for a in args]) == 2
    assert capsys.readouterr() == ("", f"toolhost-email: argument {name}: must not be empty "
                                       "or blank\n")
    assert _cache(data_root) == before
    assert len(before["feedback"]) == 2 and len(before["messages"]) == 1


def test_an_empty_path_is_not_the_working_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # Regression: Path("") is ".", so in a Maildir an empty PATH imported that Maildir.
    here = write_maildir(tmp_path / "Maildir", [mail()])
    monkeypatch.chdir(here)
    monkeypatch.setenv("TOOLHOST_DATA_DIR", str(tmp_path / "data"))
    assert main(["import", "--account", OWNER, ""]) == 2
    assert capsys.readouterr() == ("", "toolhost-email: argument PATH: must not be empty\n")
    assert not (tmp_path / "data").exists()  # nothing was opened, let alone imported


def test_a_path_of_spaces_is_a_file_name(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # Not blank input: a file may be named so.
    write_mbox(tmp_path / " ", [mail()])
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOOLHOST_DATA_DIR", str(tmp_path / "data"))
    assert main(["import", "--account", OWNER, " "]) == 0
    assert capsys.readouterr().out.startswith("imported")


@pytest.mark.parametrize("scope", ["account", "thread", "message", "owner"])
def test_erase_source_refuses_a_blank_value(data_root: Path, scope: EraseScope) -> None:
    # The library entry point too: '' names no source, and matched the general feedback.
    before = _cache(data_root)
    with pytest.raises(ValueError, match=f"^an empty or blank {scope} names nothing to erase$"):
        erase_source(cache_dir(data_root), scope, " ")
    assert _cache(data_root) == before
