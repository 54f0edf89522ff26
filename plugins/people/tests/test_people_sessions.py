"""The files a people tool keeps open between calls (issue #27): a call opens nothing the
previous one left open and current, and still reads the cache, the links and the index as
they are now, also when one of them was deleted and made anew under the open connection.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from people_support import (
    OWNER,
    Mail,
    email_dir,
    failed,
    harness,
    import_mail,
    ok,
    only_person,
)
from toolhost.testing import remove_tree
from toolhost_people.index import INDEX_FILE, remove_index
from toolhost_people.sessions import IDLE_LIMIT, Session, Sessions

DAVE = Mail("Dave <dave@example.org>", OWNER, "Hi", 25, "d1@example.org")


def _own_dir(data_dir: Path) -> Path:
    return data_dir / "plugins" / "toolhost-people"


def _names(host: Any, query: str) -> list[str]:
    return [p["name"] for p in ok(host.invoke("people.search", query=query))["people"]]


def _deleted_files_open() -> list[str]:
    """The files this process holds open that were deleted (Linux's /proc)."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # closed since the listing (the listing's own descriptor)
        if target.endswith(" (deleted)"):
            found.append(target)
    return found


needs_proc = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"),
                                reason="lists open files through /proc/self/fd")


def test_calls_after_the_first_open_nothing(fresh: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # Regression (issue #27): every call opened the cache, the links and the index anew,
    # most of a search's cost.
    connects: list[object] = []
    real: Callable[..., sqlite3.Connection] = sqlite3.connect

    def counted(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        connects.append(args[0])
        return real(*args, **kwargs)

    with harness(fresh) as host:
        # The first call builds the index; the second reopens the files the first created
        # (the index, the cache's write-ahead log beside it).
        only_person(host, "anna")
        only_person(host, "anna")
        monkeypatch.setattr(sqlite3, "connect", counted)
        for query in ("anna", "bob", "zoe", "anna"):
            assert len(ok(host.invoke("people.search", query=query))["people"]) == 1
    assert connects == []


def test_a_cache_made_after_the_first_call_is_read(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with harness(data_dir) as host:
        assert _names(host, "dave") == []  # no cache yet: the reader kept has none open
        import_mail(data_dir, OWNER, [DAVE], "later")
        assert _names(host, "dave") == ["Dave"]


def test_a_cache_deleted_and_imported_anew_is_read_anew(fresh: Path) -> None:
    with harness(fresh) as host:
        only_person(host, "anna")
        only_person(host, "anna")
        # The operator starts over: the kept reader still holds the old, deleted file.
        remove_tree(email_dir(fresh))
        import_mail(fresh, OWNER, [DAVE], "anew")
        assert _names(host, "anna") == []
        assert _names(host, "dave") == ["Dave"]


@needs_proc
def test_a_deleted_index_is_rebuilt_in_a_new_file_and_not_kept_open(fresh: Path) -> None:
    own = _own_dir(fresh)
    with harness(fresh) as host:
        only_person(host, "anna")
        only_person(host, "anna")
        remove_index(own)  # "The index is derived: deleting it is safe" (the README)
        assert only_person(host, "anna")
        assert (own / INDEX_FILE).is_file()
        assert not [f for f in _deleted_files_open() if str(own) in f]


def test_an_index_that_could_not_be_used_is_used_again_once_it_can(fresh: Path) -> None:
    own = _own_dir(fresh)
    with harness(fresh) as host:
        only_person(host, "anna")
        remove_index(own)
        (own / INDEX_FILE).mkdir()  # not a file: neither opened nor removable as one
        assert failed(host.invoke("people.search", query="anna")) == (
            "tool.upstream_unavailable.people_index_unavailable")
        (own / INDEX_FILE).rmdir()
        assert only_person(host, "anna")


def test_a_link_made_while_the_links_file_is_kept_open_counts_at_once(fresh: Path) -> None:
    from toolhost_people.links import LINKS_FILE, link

    with harness(fresh) as host:
        anna = only_person(host, "anna")
        only_person(host, "bob")
        assert (_own_dir(fresh) / LINKS_FILE).exists()  # the owner's accounts are kept there
        link(_own_dir(fresh), "anna.smith@example.org", "bob@example.net")
        assert only_person(host, "bob") == anna


def test_a_links_file_deleted_and_made_anew_between_calls_is_read_anew(fresh: Path) -> None:
    from toolhost_people.links import LINKS_FILE, link

    own = _own_dir(fresh)
    with harness(fresh) as host:
        anna = only_person(host, "anna")
        link(own, "anna.smith@example.org", "bob@example.net")
        assert only_person(host, "bob") == anna
        # The operator starts the links over, and links others before the next call.
        for suffix in ("", "-wal", "-shm"):
            Path(f"{own / LINKS_FILE}{suffix}").unlink(missing_ok=True)
        link(own, "zoe@example.com", "bob@example.net")
        assert only_person(host, "anna") == anna
        assert only_person(host, "zoe") == only_person(host, "bob") != anna


# ------------------------------------------------------------------------------ Sessions


def test_a_session_is_lent_to_one_call_at_a_time_and_kept_per_principal() -> None:
    pool = Sessions()
    first, second = pool.take("ana"), pool.take("ana")
    assert first is not second  # two calls at once: two sessions
    pool.give(first)
    pool.give(second)
    assert pool.take("ana") is second  # the most recent first
    assert pool.take("ben") is not first  # never another principal's


def test_idle_sessions_past_the_limit_are_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    closed: list[Session] = []
    monkeypatch.setattr(Session, "close", lambda self: closed.append(self))
    pool = Sessions()
    made = [pool.take("ana") for _ in range(IDLE_LIMIT + 2)]
    for session in made:
        pool.give(session)
    assert closed == made[:2]  # the oldest idle ones
    pool.give(pool.take("ana"), reusable=False)
    assert closed[-1] is made[-1]


def test_clear_closes_idle_sessions_and_those_in_use_when_given_back(
        monkeypatch: pytest.MonkeyPatch) -> None:
    closed: list[Session] = []
    monkeypatch.setattr(Session, "close", lambda self: closed.append(self))
    pool = Sessions()
    idle, busy = pool.take("ana"), pool.take("ana")
    pool.give(idle)
    pool.clear()
    assert closed == [idle]
    pool.give(busy)
    assert closed == [idle, busy]
    assert pool.take("ana") not in (idle, busy)


def test_a_forked_process_never_uses_its_parents_sessions(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pool = Sessions()
    parents = pool.take("ana")
    pool.give(parents)
    monkeypatch.setattr(os, "getpid", lambda: -1)
    assert pool.take("ana") is not parents
