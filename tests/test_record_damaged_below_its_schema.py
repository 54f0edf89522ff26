"""A record whose schema is intact but one of its pages is damaged (a torn write, a bad
sector): the start's check passes (D82 reads the schema only), so the damage is met in the
middle of a command. Every command then says so in the one line D82 gives a damaged database
(exit 1, no traceback), and a call that cannot be recorded because of it is not retryable.

Each record is made by the real ``toolhost`` command and damaged as a torn write would: the
first bytes of a b-tree page overwritten, ``sqlite_master`` untouched.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from toolhost._adapters.sqlite_db import DATABASE_NAME
from toolhost._model import host_reasons
from toolhost.testing import run_toolhost

PLUGINS = "toolhost-math,toolhost-demo,toolhost-artifact"
WRITE = ("call", "demo.external_write", "--args", '{"destination": "x", "content": "y"}')


def toolhost(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_toolhost(*args, data_dir=data, plugins=PLUGINS)


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A record with one finished call, one call awaiting approval (its id) and one upload."""
    data = tmp_path_factory.mktemp("made")
    assert toolhost(data, "call", "math.calculate", "--args",
                    '{"expression": "1+1"}').returncode == 0
    paused = toolhost(data, *WRITE)
    assert paused.returncode != 0 and paused.stdout.strip(), paused
    upload = data.parent / "upload.txt"
    upload.write_text("x\n")
    assert toolhost(data, "artifacts", "upload", str(upload), "--conversation",
                    "c1").returncode == 0
    return data, paused.stdout.strip()


def damaged(made: tuple[Path, str], tmp_path: Path, *names: str) -> Path:
    """A copy of the made record with the root page of each of ``names`` (a table or an
    index) overwritten in its first bytes: its b-tree header is no longer one."""
    data = tmp_path / "data"
    shutil.copytree(made[0], data)
    database = data / DATABASE_NAME
    conn = sqlite3.connect(database)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # every page in the file itself
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    roots = dict(conn.execute("SELECT name, rootpage FROM sqlite_master"))
    conn.close()
    with database.open("r+b") as file:
        for name in names:
            file.seek((roots[name] - 1) * page_size)
            file.write(b"\x0d" + b"\xff" * 7)
    return data


def line(data: Path) -> str:
    return (f"toolhost: the database {data / DATABASE_NAME} is damaged or not a toolhost "
            "database (database disk image is malformed): restore it from a backup, or move "
            "it aside and toolhost starts a new one, or set TOOLHOST_DATA_DIR to another "
            "directory\n")


@pytest.mark.parametrize("command", [
    ("pending",), ("recover",), ("approve", "{id}"), ("deny", "{id}", "--reason", "no"), ("artifacts", "list"),
    ("artifacts", "upload", "{upload}", "--conversation", "c1"), ("serve",),
])
def test_a_command_meeting_a_damaged_page_says_so_in_one_line(
        made: tuple[Path, str], tmp_path: Path, command: tuple[str, ...]) -> None:
    data = damaged(made, tmp_path, "tool_invocations_open", "artifacts")
    upload = tmp_path / "upload.txt"
    upload.write_text("again\n")
    args = [part.format(id=made[1], upload=upload) for part in command]
    result = toolhost(data, *args)
    assert (result.returncode, result.stdout, result.stderr) == (1, "", line(data))


def test_show_of_a_row_on_a_damaged_page_says_so_in_one_line(
        made: tuple[Path, str], tmp_path: Path) -> None:
    data = damaged(made, tmp_path, "tool_invocations")
    result = toolhost(data, "show", made[1])
    assert (result.returncode, result.stdout, result.stderr) == (1, "", line(data))


def test_a_call_the_damaged_record_cannot_take_is_not_retryable(
        made: tuple[Path, str], tmp_path: Path) -> None:
    # Its row goes into the damaged index: a retry would meet the same page.
    data = damaged(made, tmp_path, "tool_invocations_open")
    result = toolhost(data, *WRITE, "--json")
    outcome = json.loads(result.stdout)
    assert (outcome["reason_code"], outcome["retryable"], outcome["invocation_id"]) == (
        host_reasons.RECORD_UNUSABLE, False, None)
    # The operator's log line names the database and what to do.
    logged = [json.loads(text) for text in result.stderr.splitlines() if text.startswith("{")]
    failed = [event for event in logged if event["event"] == "pipeline.store_failed"]
    assert [event["error"] for event in failed] == [line(data).removeprefix("toolhost: ")
                                                    .rstrip("\n")]
