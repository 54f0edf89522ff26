"""``toolhost-email erase`` while another connection holds a read transaction on the cache (a
running host's reader pins the WAL): the checkpoint that overwrites the erased mail's old pages
cannot complete. The erase gives up after a few seconds rather than waiting out the busy
timeout at every try, says in its line that those pages are still there, and leaves its
``checkpoint_owed`` record to the next open that can take the checkpoint (D467)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import test_email_erase_killed as killed
from email_support import cache_dir
from mail_support import OWNER
from toolhost_email import open_mail_cache

HELD = (f"erased account {OWNER}: 30 messages removed; their old pages may stay in "
        "mail.sqlite3 or its write-ahead log until a later open of the mail cache finishes the "
        "checkpoint another connection held back (a running host's reader, an import)\n")


@contextmanager
def reading(data_dir: Path) -> Iterator[None]:
    """A read transaction on the cache for the block, as a reader between two statements of
    one query holds it: the WAL cannot be checkpointed past its snapshot, nor truncated."""
    with closing(sqlite3.connect(data_dir / "mail.sqlite3", isolation_level=None)) as reader:
        reader.execute("BEGIN")
        assert reader.execute("SELECT count(*) FROM messages").fetchone() == (30,)
        yield
        reader.execute("ROLLBACK")


def _timed_open(data_dir: Path) -> float:
    started = time.monotonic()
    with open_mail_cache(data_dir) as cache:
        assert list(cache.messages()) == []
    return time.monotonic() - started


def test_an_erase_whose_checkpoint_a_reader_holds_says_so_and_the_next_open_finishes_it(
    tmp_path: Path,
) -> None:
    # Regression: the erase tried 50 checkpoints, each waiting out the connection's 30 s busy
    # timeout (25 minutes), then said "erased" with the mail still in clear in mail.sqlite3.
    root = killed.import_marked(tmp_path)
    data_dir = cache_dir(root)
    with reading(data_dir):
        started = time.monotonic()
        erased = killed.run_cli(root, "erase", "--account", OWNER)
        took = time.monotonic() - started
        assert (erased.returncode, erased.stdout, erased.stderr) == (0, HELD, "")
        assert took < 10  # about 4 s of retries, not 30 s each
        assert killed.residue(data_dir) == ["mail.sqlite3"]  # what the line says
        owed = killed.owed(data_dir)
        assert len(owed) == 1

        # An open while the reader is still there cannot take it either: the record stays.
        assert _timed_open(data_dir) < 10
        assert killed.owed(data_dir) == owed
        assert killed.residue(data_dir) == ["mail.sqlite3"]

    _timed_open(data_dir)  # the reader is gone: this open takes the checkpoint

    assert killed.residue(data_dir) == []
    assert killed.owed(data_dir) == []


def test_an_erase_nobody_holds_back_says_only_what_it_removed(tmp_path: Path) -> None:
    root = killed.import_marked(tmp_path)
    erased = killed.run_cli(root, "erase", "--account", OWNER)
    assert (erased.returncode, erased.stdout, erased.stderr) == (
        0, f"erased account {OWNER}: 30 messages removed\n", "")
    assert killed.residue(cache_dir(root)) == []
    assert killed.owed(cache_dir(root)) == []
