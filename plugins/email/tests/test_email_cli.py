"""``toolhost-email``: import, erase and their errors, run as the operator runs them (the
console script in a subprocess, the cache found through TOOLHOST_DATA_DIR)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

from email_support import cache_dir
from mail_support import MALFORMED, OTHER, OWNER, mail, write_mbox
from toolhost.testing import run_toolhost
from toolhost_email import open_mail_cache
from toolhost_email.importer import ImportFailed, import_path


def _cli(data_root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TOOLHOST_DATA_DIR": str(data_root)}
    return subprocess.run([sys.executable, "-m", "toolhost_email.cli", *args], env=env,
                          capture_output=True, text=True, timeout=60, check=False)


def _accounts(data_root: Path) -> list[str]:
    with open_mail_cache(cache_dir(data_root)) as cache:
        return sorted(m.account for m in cache.messages())


def test_import_twice_then_erase_one_account(tmp_path: Path) -> None:
    root = tmp_path / "data"
    src = write_mbox(tmp_path / "in.mbox", [mail(), MALFORMED])
    first = _cli(root, "import", "--account", OWNER, str(src))
    assert (first.returncode, first.stderr) == (0, "")
    assert first.stdout == (f"imported {src} as {OWNER}: 2 read, 1 added, 0 already cached, "
                            "1 skipped (1 no_header_section)\n")
    again = _cli(root, "import", "--account", OWNER, str(src))
    assert again.stdout == (f"imported {src} as {OWNER}: 2 read, 0 added, 1 already cached, "
                            "1 skipped (1 no_header_section)\n")
    assert _cli(root, "import", "--account", OTHER, str(src)).returncode == 0
    assert _accounts(root) == [OWNER, OTHER]
    erased = _cli(root, "erase", "--account", OTHER)
    assert (erased.returncode, erased.stdout) == (
        0, f"erased account {OTHER}: 1 messages removed\n")
    assert _accounts(root) == [OWNER]


@pytest.mark.parametrize(("args", "says"), [
    (("import", "--account", "nobody", "{src}"), "--account must be one mail address"),
    (("import", "--account", OWNER, "{missing}"), "does not exist"),
    (("import", "--account", OWNER, "{dir}"), "not a Maildir"),
])
def test_bad_input_is_one_line_and_status_2(tmp_path: Path, args: tuple[str, ...],
                                            says: str) -> None:
    src = write_mbox(tmp_path / "in.mbox", [mail()])
    (tmp_path / "plain").mkdir()
    filled = [a.format(src=src, missing=tmp_path / "nope", dir=tmp_path / "plain")
              for a in args]
    result = _cli(tmp_path / "data", *filled)
    assert result.returncode == 2
    assert result.stderr.startswith("toolhost-email: ") and says in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


#: Accounts no From header carries: the owner's own mail would never match one and count as
#: received. The zero-width space prints as nothing, so ``owners`` showed two alike lines.
NOT_ADDRESSES = {
    "zero-width space": ("owner\u200b@example.com", "U+200B"),
    "backslash in the domain": ("a@b\\n", "domain"),
    "hyphen labels": ("x@-.-", "domain"),
    "empty label": ("x@example..com", "domain"),
    "quote in the local part": ('a"b@example.com', "local part"),
}


@pytest.mark.parametrize("case", sorted(NOT_ADDRESSES))
@pytest.mark.parametrize("command", ["import", "owners set"])
def test_an_account_no_from_header_carries_is_refused(tmp_path: Path, case: str,
                                                      command: str) -> None:
    account, says = NOT_ADDRESSES[case]
    src = write_mbox(tmp_path / "in.mbox", [mail()])
    args = (("import", "--account", account, str(src)) if command == "import"
            else ("owners", "set", account, "alice"))
    result = _cli(tmp_path / "data", *args)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith("toolhost-email: ") and result.stderr.count("\n") == 1
    assert "must be one mail address" in result.stderr and says in result.stderr
    assert not cache_dir(tmp_path / "data").exists()


#: NOT_ADDRESSES and more, for import_path called directly: what the caller passed no CLI.
NOT_ONE_ADDRESS = {
    **NOT_ADDRESSES,
    "two addresses": ("owner,boss@example.com", "local part"),
    "a display name in a comment": ("owner@example.com(Owner)", "domain"),
    "a display name before the address": ("Owner<owner@example.com>", "must be"),
    "a line break": ("owner@example.com\r\nBcc: x@attacker.example", "must be"),
}


@pytest.mark.parametrize("case", sorted(NOT_ONE_ADDRESS))
def test_import_path_itself_refuses_an_account_no_from_header_carries(
        tmp_path: Path, case: str) -> None:
    # D506 checked the account in the CLI only: any other caller of import_path cached it.
    account, says = NOT_ONE_ADDRESS[case]
    src = write_mbox(tmp_path / "in.mbox", [mail()])
    with pytest.raises(ImportFailed, match=r"^--account must be one mail address") as refused:
        import_path(cache_dir(tmp_path / "data"), account, src)
    assert says in str(refused.value) and "\n" not in str(refused.value)
    assert not cache_dir(tmp_path / "data").exists()  # nothing written, not even a cache


def test_an_internationalized_or_one_label_account_is_taken(tmp_path: Path) -> None:
    root = tmp_path / "data"
    src = write_mbox(tmp_path / "in.mbox", [mail()])
    for account in ("jösé@exämple.org", "me@localhost", "o+tag@xn--bcher-kva.example"):
        assert _cli(root, "import", "--account", account, str(src)).returncode == 0
    assert _accounts(root) == ["jösé@exämple.org", "me@localhost",
                               "o+tag@xn--bcher-kva.example"]


def test_an_odd_account_cached_before_can_still_be_cleared_and_erased(tmp_path: Path) -> None:
    # Refused for import and owners set only: what an import before D506 cached stays
    # removable (made here as it cached it: the account's rows under that name).
    root = tmp_path / "data"
    odd = "x@-.-"
    import_path(cache_dir(root), OWNER, write_mbox(tmp_path / "in.mbox", [mail()]))
    with closing(sqlite3.connect(cache_dir(root) / "mail.sqlite3")) as conn, conn:
        conn.execute("UPDATE messages SET account = ?", (odd,))
    assert _cli(root, "owners", "clear", odd).stderr == f"toolhost-email: {odd} has no owner\n"
    erased = _cli(root, "erase", "--account", odd)
    assert (erased.returncode, erased.stdout) == (0, f"erased account {odd}: 1 messages removed\n")


def test_erase_needs_exactly_one_source(tmp_path: Path) -> None:
    result = _cli(tmp_path / "data", "erase", "--account", OWNER, "--thread", "t_1")
    assert result.returncode == 2 and "not allowed with argument" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_damaged_cache_is_one_line_and_status_2(tmp_path: Path) -> None:
    root = tmp_path / "data"
    cache_dir(root).mkdir(parents=True)
    (cache_dir(root) / "mail.sqlite3").write_bytes(b"not a database" * 100)
    src = write_mbox(tmp_path / "in.mbox", [mail()])
    result = _cli(root, "import", "--account", OWNER, str(src))
    assert result.returncode == 2 and "is not a mail cache" in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


#: toolhost.toml files the host refuses, each with the line and key its one line names: not
#: TOML, the host's own table, and toolhost-email's own ``[plugins.toolhost-email]``.
_UNUSABLE_CONFIGS = {
    "not TOML": ("[[[\n", "1: not TOML"),
    "unknown host key": ("[host]\nnonsense = 1\n", "2: [host] nonsense: not a setting"),
    "bad host value": ("[host]\ndata_dir = 3\n", "2: [host] data_dir: must be a string"),
    "unknown key of its own": ("[plugins.toolhost-email]\nmode_enabled = true\nbogus = 1\n",
                               "3: [plugins.toolhost-email] bogus: not a setting"),
    "bad value of its own": ("[plugins.toolhost-email]\nrequest_timeout_s = \"abc\"\n",
                             "2: [plugins.toolhost-email] request_timeout_s: must be"),
}
_COMMANDS = (("import", "--account", OWNER, "in.mbox"), ("owners",),
             ("owners", "set", "--unowned", "p"), ("erase", "--account", OWNER),
             ("feedback", "undo", "f1"))


@pytest.mark.parametrize("case", sorted(_UNUSABLE_CONFIGS))
def test_a_toolhost_toml_it_cannot_use_is_one_line_and_status_2(tmp_path: Path,
                                                                 case: str) -> None:
    # Regression: a traceback (ConfigFileError) and exit 1, as toolhost-people had (D427);
    # then its own table's unknown key or bad value taken without a word (exit 0) where the
    # host refuses to start.
    text, where = _UNUSABLE_CONFIGS[case]
    bad = tmp_path / "toolhost.toml"
    bad.write_text(text)
    data = tmp_path / "data"
    host = run_toolhost("config", data_dir=data, plugins="toolhost-email",
                        env={"TOOLHOST_CONFIG": str(bad)})
    assert host.returncode != 0 and host.stderr.startswith(f"toolhost: {bad}:{where}")
    assert host.stderr.count("\n") == 1
    env = {**os.environ, "TOOLHOST_DATA_DIR": str(data), "TOOLHOST_CONFIG": str(bad)}
    for command in _COMMANDS:
        done = subprocess.run([sys.executable, "-m", "toolhost_email.cli", *command], env=env,
                              capture_output=True, text=True, timeout=60, check=False)
        # The host's own line, word for word, under this command's name.
        assert (done.returncode, done.stdout, done.stderr) == (
            2, "", host.stderr.replace("toolhost: ", "toolhost-email: ", 1)), command
    assert not data.exists()
