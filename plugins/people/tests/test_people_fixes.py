"""What the fixes of the review (issue #16) added beyond its tests: the operator's ``me``
addresses, the sent rule for them, the static failures for a locked or unusable file, and
the bounds every result is held to."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import pytest
from toolhost_email import CachedMessage, MessageSource

from people_support import OWNER, Mail, harness, import_mail, ok, only_person, people_command
from toolhost import ToolFailure
from toolhost_people import index
from toolhost_people.bounds import shown, worst_case_bytes
from toolhost_people.store import Cache

ALIAS = "owner.alias@example.com"


def test_an_alias_the_operator_names_is_the_owners(fresh: Path) -> None:
    # The owner writes to Dave from an alias that is no imported account.
    import_mail(fresh, OWNER, [Mail(f"Me <{ALIAS}>", "Dave <dave@example.org>", "Plan", 23,
                                    "alias1@example.com")], "alias")
    with harness(fresh) as host:
        assert len(ok(host.invoke("people.search", query="owner.alias"))["people"]) == 1
        done = people_command(fresh, "me", ALIAS.upper())
        assert (done.returncode, done.stdout) == (0, f"added: {ALIAS}\n")
        assert ok(host.invoke("people.search", query="owner.alias"))["people"] == []
        dave = ok(host.invoke("people.context", person_id=only_person(host, "dave")))
        assert (dave["sent"], dave["received"]) == (1, 0)
    # Every account people saw is listed too (recorded by the first rebuild).
    assert people_command(fresh, "me").stdout.split() == sorted(
        [ALIAS, OWNER, "second@example.com"])
    again = people_command(fresh, "me", ALIAS)
    assert (again.returncode, again.stdout) == (0, f"already the owner: {ALIAS}\n")


@pytest.mark.parametrize("command", [["me"], ["links"], ["me", "a@example.org"]])
def test_a_data_directory_that_cannot_be_used_is_one_line_and_exit_1(
        tmp_path: Path, command: list[str]) -> None:
    # Regression: `me` and `links` on an unusable data directory printed nothing, exit 0.
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("")
    done = people_command(not_a_directory, *command)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.startswith("toolhost-people: cannot use the data directory ")
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_me_refuses_what_is_no_address(tmp_path: Path) -> None:
    done = people_command(tmp_path, "me", "not an address")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


class _LockedReader:
    """A cache reader whose every read meets a lock held past SQLite's wait."""

    def __init__(self, error: sqlite3.Error) -> None:
        self.error = error

    def state(self) -> str:
        raise self.error

    def generation(self) -> int:
        raise self.error

    def messages(self) -> Iterator[CachedMessage]:
        raise self.error

    def source(self, message_key: str) -> MessageSource | None:
        raise self.error


@pytest.fixture
def lock_error(tmp_path: Path) -> sqlite3.OperationalError:
    path = tmp_path / "locked.sqlite3"
    with closing(sqlite3.connect(path, isolation_level=None)) as holder:
        holder.execute("CREATE TABLE t (x)")
        holder.execute("BEGIN EXCLUSIVE")
        with (closing(sqlite3.connect(path, timeout=0)) as waiter,
              pytest.raises(sqlite3.OperationalError) as raised):
            waiter.execute("SELECT * FROM t")
        holder.execute("ROLLBACK")
    return raised.value


def test_a_locked_cache_is_busy_and_retryable(lock_error: sqlite3.OperationalError) -> None:
    cache = Cache(_LockedReader(lock_error))  # type: ignore[arg-type]
    for read in (cache.state, cache.generation, lambda: list(cache.messages()),
                 lambda: cache.source("k")):
        with pytest.raises(ToolFailure) as failure:
            read()
        assert failure.value.reason_code == "tool.upstream_unavailable.people_busy"
        assert failure.value.retryable is True


class _SnapshotReader:
    """A cache reader whose snapshot fails to start with ``error``, or records its end."""

    def __init__(self, error: sqlite3.Error | None) -> None:
        self.error = error
        self.ended: list[type[BaseException] | None] = []

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        if self.error is not None:
            raise self.error
        try:
            yield
        except BaseException as exc:
            self.ended.append(type(exc))
            raise
        self.ended.append(None)


def test_only_the_start_of_a_snapshot_is_translated(
        lock_error: sqlite3.OperationalError) -> None:
    with pytest.raises(ToolFailure) as failure, Cache(
            _SnapshotReader(lock_error)).snapshot():  # type: ignore[arg-type]
        pass
    assert failure.value.reason_code == "tool.upstream_unavailable.people_busy"
    reader = _SnapshotReader(None)
    with Cache(reader).snapshot():  # type: ignore[arg-type]
        pass
    with pytest.raises(KeyError), Cache(reader).snapshot():  # type: ignore[arg-type]
        raise KeyError("the block's own")
    assert reader.ended == [None, KeyError]


def test_a_damaged_cache_read_is_source_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "damaged.sqlite3"
    path.write_bytes(b"not a database" * 100)
    with closing(sqlite3.connect(path)) as conn, pytest.raises(sqlite3.DatabaseError) as raised:
        conn.execute("SELECT 1 FROM sqlite_master")
    cache = Cache(_LockedReader(raised.value))  # type: ignore[arg-type]
    with pytest.raises(ToolFailure) as failure:
        cache.source("k")
    assert failure.value.reason_code == "tool.upstream_unavailable.people_source_unavailable"
    assert failure.value.retryable is False


def test_only_a_damaged_index_is_deleted(tmp_path: Path) -> None:
    (tmp_path / index.INDEX_FILE).mkdir()  # cannot be opened; deleting would not mend it
    with pytest.raises(sqlite3.OperationalError):
        index.open_index(tmp_path)
    assert (tmp_path / index.INDEX_FILE).is_dir()
    (tmp_path / index.INDEX_FILE).rmdir()
    (tmp_path / index.INDEX_FILE).write_bytes(b"not a database" * 100)
    with closing(index.open_index(tmp_path)) as conn:  # damaged: deleted and made anew
        assert conn.execute("SELECT count(*) FROM person").fetchone() == (0,)


def test_shown_drops_what_json_would_escape_long_and_cuts() -> None:
    assert shown("a\x00b\x07c\td\ne\rf\x1f", 100) == ("abc\td\ne\rf", False)
    assert shown("\u984c" * 5, 3) == ("\u984c" * 3, True)


def test_worst_case_bytes_is_the_largest_value_the_schema_allows() -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 3},
            "items": {"type": "array", "maxItems": 2, "items": {"type": ["string", "null"],
                                                                 "maxLength": 2}},
            "kind": {"enum": ["sent", "received"]},
            "n": {"type": "integer"},
            "more": {"type": "boolean"},
        },
    }
    largest = {"name": "\U0001f600" * 3, "items": ["\U0001f600" * 2] * 2, "kind": "received",
               "n": -(2**63), "more": False}
    encoded = json.dumps(largest, ensure_ascii=False, separators=(",", ":")).encode()
    assert worst_case_bytes(schema) == len(encoded)
    with pytest.raises(ValueError):
        worst_case_bytes({"type": "string"})
    with pytest.raises(ValueError):
        worst_case_bytes({"type": "array", "items": {"type": "null"}})
