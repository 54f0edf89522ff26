"""``toolhost-email erase`` killed after its commit, before its checkpoint (D164: erase leaves
no copy in the cache files): every interface already answers as if the mail were gone, so the
next open of the cache, a reader's or a writer's, takes the checkpoint the erase owed and the
erased mail leaves ``mail.sqlite3`` and its ``-wal``."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from email_support import cache_dir
from mail_support import OTHER, OWNER, mail, write_mbox
from toolhost_email import open_mail_cache, store
from toolhost_email.importer import import_path

MARKER = "ERASED-BODY-5c0e9d41"

#: ``toolhost-email`` whose erase is SIGKILLed as its checkpoint starts: right after the
#: commit, the moment a crash or an operator's kill -9 leaves the checkpoint undone.
KILLED_AT_CHECKPOINT = textwrap.dedent("""\
    import os, signal, sys, time
    from toolhost_email import erase
    from toolhost_email.cli import main

    opened = erase.open_writable

    def killed_at_checkpoint(*args, **kwargs):
        conn = opened(*args, **kwargs)

        def trace(sql):
            if "wal_checkpoint" in sql:
                os.kill(os.getpid(), signal.SIGKILL)
                time.sleep(30)

        conn.set_trace_callback(trace)
        return conn

    erase.open_writable = killed_at_checkpoint
    raise SystemExit(main(sys.argv[1:]))
    """)


def run_cli(data_root: Path, *args: str,
            script: tuple[str, ...] = ("-m", "toolhost_email.cli"),
            ) -> subprocess.CompletedProcess[str]:
    """``toolhost-email ARGS`` (or ``script``) in a process of its own over the host data
    directory ``data_root``."""
    return subprocess.run(
        [sys.executable, *script, *args],
        env={**os.environ, "TOOLHOST_DATA_DIR": str(data_root), "TOOLHOST_CONFIG": ""},
        capture_output=True, text=True, timeout=60, check=False)


def import_marked(tmp_path: Path) -> Path:
    """A host data directory under ``tmp_path`` whose cache holds 30 messages of ``OWNER``,
    every body carrying ``MARKER``."""
    root = tmp_path / "data"
    import_path(cache_dir(root), OWNER, write_mbox(tmp_path / "in.mbox", [
        mail(message_id=f"<m{n}@example.org>", subject=f"message {n}",
             body=f"The body says {MARKER} {n}.\n" * 40) for n in range(30)]))
    return root


def residue(data_dir: Path) -> list[str]:
    """The cache files that still hold the erased mail's text."""
    return [p.name for p in sorted(data_dir.iterdir())
            if p.name.startswith("mail.sqlite3") and MARKER.encode() in p.read_bytes()]


def _read(data_root: Path, tmp_path: Path) -> None:
    with open_mail_cache(cache_dir(data_root)) as cache:
        assert list(cache.messages()) == []


def _list_owners(data_root: Path, tmp_path: Path) -> None:
    listed = run_cli(data_root, "owners")
    assert (listed.returncode, listed.stdout, listed.stderr) == (0, "", "")


def _import(data_root: Path, tmp_path: Path) -> None:
    import_path(cache_dir(data_root), OTHER,
                write_mbox(tmp_path / "other.mbox", [mail(message_id="<other@example.org>")]))


@pytest.mark.parametrize("next_use", [_read, _list_owners, _import],
                         ids=["reader", "owners command", "import"])
def test_the_next_open_finishes_the_checkpoint_of_an_erase_killed_after_its_commit(
    tmp_path: Path, next_use: Callable[[Path, Path], None],
) -> None:
    # Regression: the killed erase left the erased bodies in clear in mail.sqlite3 for good:
    # readers (email.context, people, `owners`) open read-only and never checkpointed.
    root = import_marked(tmp_path)
    killed = run_cli(root, "erase", "--account", OWNER, script=("-c", KILLED_AT_CHECKPOINT))
    assert killed.returncode == -9, killed.stderr
    assert "mail.sqlite3" in residue(cache_dir(root))  # the crash window is real
    with sqlite3.connect(f"{cache_dir(root).joinpath('mail.sqlite3').as_uri()}?mode=ro",
                         uri=True) as peek:  # committed: every interface says it is gone
        assert peek.execute("SELECT count(*) FROM messages").fetchone() == (0,)

    next_use(root, tmp_path)

    assert residue(cache_dir(root)) == []


def owed(data_dir: Path) -> list[tuple[int]]:
    """The checkpoint_owed record of the cache in ``data_dir``, read without settling it."""
    with sqlite3.connect(f"{(data_dir / 'mail.sqlite3').as_uri()}?mode=ro", uri=True) as conn:
        return conn.execute("SELECT value FROM meta WHERE key = 'checkpoint_owed'").fetchall()


def test_settling_one_erase_keeps_the_record_of_a_later_one(data_dir: Path) -> None:
    # An erase committed while another open was settling an earlier one owes its own
    # checkpoint still: dropping its record would leave its mail in the files if it is killed.
    conn = store.open_writable(data_dir)
    try:
        with store.immediate(conn):
            store.owe_checkpoint(conn, 7)
        assert store.settle(conn, 6)
        assert owed(data_dir) == [(7,)]
        assert store.settle(conn, 7)
        assert owed(data_dir) == []
    finally:
        conn.close()


def test_a_settle_after_the_cache_was_removed_makes_no_empty_cache(tmp_path: Path) -> None:
    # Between a reader's open and its settle the cache may be removed (erase of everything,
    # the operator): the settle's own connection must not make it again, empty.
    from toolhost_email.store import _settle_owed

    _settle_owed(tmp_path / "mail.sqlite3", 3)
    assert list(tmp_path.iterdir()) == []
