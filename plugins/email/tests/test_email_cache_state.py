"""``MailCacheReader.state``: a digest of what the cache holds, recorded with each generation.
The generation alone did not say it: it starts from 0 again in a cache made anew, so
toolhost-people took the new cache's generation 1 for the old cache's and served erased mail."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from mail_support import OTHER, OWNER, mail, write_mbox
from toolhost_email import open_mail_cache
from toolhost_email.erase import erase
from toolhost_email.importer import import_path
from toolhost_email.owners import set_owner


def _read(data_dir: Path) -> tuple[int, str]:
    with open_mail_cache(data_dir) as cache:
        return cache.generation(), cache.state()


def _remove(data_dir: Path) -> None:
    for name in ("mail.sqlite3", "mail.sqlite3-wal", "mail.sqlite3-shm"):
        (data_dir / name).unlink(missing_ok=True)


def test_a_cache_made_anew_with_other_mail_has_another_state_at_the_same_generation(
        tmp_path: Path) -> None:
    data_dir = tmp_path / "cache"
    assert _read(data_dir) == (0, "")  # no cache
    first = write_mbox(tmp_path / "first.mbox", [mail()])
    other = write_mbox(tmp_path / "other.mbox", [mail(sender="Bob <bob@example.org>",
                                                      message_id="<b1@example.org>")])
    import_path(data_dir, OWNER, first)
    generation, old = _read(data_dir)
    assert generation == 1 and len(old) == 16
    _remove(data_dir)  # the operator starts over, and imports other mail
    import_path(data_dir, OWNER, other)
    assert _read(data_dir)[0] == 1 and _read(data_dir)[1] not in ("", old)
    _remove(data_dir)  # the same mail again: the same state
    import_path(data_dir, OWNER, first)
    assert _read(data_dir) == (1, old)


def test_every_change_that_moves_the_generation_records_the_state(tmp_path: Path) -> None:
    data_dir = tmp_path / "cache"
    import_path(data_dir, OWNER, write_mbox(tmp_path / "a.mbox", [mail()]))
    import_path(data_dir, OTHER, write_mbox(tmp_path / "b.mbox", [mail()]))
    seen = {_read(data_dir)[1]}
    set_owner(data_dir, OTHER, "bob")  # an owner: the same mail, read by someone else
    seen.add(_read(data_dir)[1])
    erase(data_dir, "account", OTHER)
    seen.add(_read(data_dir)[1])
    assert len(seen) == 3 and "" not in seen


def test_a_cache_last_changed_by_an_older_version_has_no_state_until_its_next_change(
        tmp_path: Path) -> None:
    data_dir = tmp_path / "cache"
    import_path(data_dir, OWNER, write_mbox(tmp_path / "a.mbox", [mail()]))
    with sqlite3.connect(data_dir / "mail.sqlite3", isolation_level=None) as conn:
        conn.execute("DELETE FROM meta WHERE key = 'state'")  # as an older writer left it
    assert _read(data_dir) == (1, "")
    erase(data_dir, "account", OTHER)  # nothing of it, but a change all the same
    assert _read(data_dir)[0] == 2 and _read(data_dir)[1] != ""
