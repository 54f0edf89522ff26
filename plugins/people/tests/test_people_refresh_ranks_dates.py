"""``toolhost-people refresh`` ranks a forged future Date as the tools do (D160, D505): the
index it builds (at the wall clock, as the file system stamps a new file) is the one a tool's
call at its clock would build, so the call reads it as it is, without rebuilding it."""

from __future__ import annotations

import datetime as _dt
import sqlite3
from contextlib import closing
from email.utils import format_datetime
from pathlib import Path

from people_support import (
    ENABLED,
    OWNER,
    PLUGINS,
    Mail,
    import_mail,
    ok,
    only_person,
    people_command,
)
from test_people_forged_dates import FORGED
from toolhost.testing import FixedClock, Harness
from toolhost_people.index import INDEX_FILE


def _data_version(conn: sqlite3.Connection) -> int:
    """SQLite's count of commits other connections made to the file since ``conn`` began."""
    return int(conn.execute("PRAGMA data_version").fetchone()[0])


def test_the_index_refresh_builds_ranks_a_forged_date_as_the_next_call_does(
    tmp_path: Path,
) -> None:
    # The host's clock is the wall clock here too (tests may read it): the mail is dated
    # around it, so the command and the call see the same dates as real or forged.
    now = _dt.datetime.now(_dt.UTC)
    data = tmp_path / "data"
    data.mkdir()
    import_mail(data, OWNER, [
        Mail("Anna <anna@example.org>", OWNER, "Two days ago", None, "a@example.org",
             date=format_datetime(now - _dt.timedelta(days=2))),
        Mail("Anna <anna@example.org>", OWNER, "Forged", None, "f@example.org", date=FORGED),
        Mail("Anna <anna@example.org>", OWNER, "Yesterday", None, "b@example.org",
             date=format_datetime(now - _dt.timedelta(days=1))),
    ], "owner")
    done = people_command(data, "refresh")
    assert (done.returncode, done.stdout, done.stderr) == (0, "rebuilt: 1 people\n", "")
    index_file = data / "plugins" / "toolhost-people" / INDEX_FILE
    with closing(sqlite3.connect(index_file)) as watcher, \
            Harness.over(PLUGINS, settings=ENABLED, data_dir=data,
                         clock=FixedClock(now)) as host:
        before = _data_version(watcher)
        anna = only_person(host, "anna")
        context = ok(host.invoke("people.context", person_id=anna))
        history = ok(host.invoke("people.history", person_id=anna))
        # No commit since the command's: the call found the index current, not rebuilt.
        assert _data_version(watcher) == before
    assert context["last_interaction"] != "9999-12-31T23:59:59Z"
    assert [t["subject"] for t in context["recent_threads"]] == [
        "Yesterday", "Two days ago", "Forged"]
    assert [i["subject"] for i in history["interactions"]] == [
        "Yesterday", "Two days ago", "Forged"]
