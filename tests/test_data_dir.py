"""A data directory or database the host cannot use stops `call`, `serve` and the approval
commands at their start with one line naming the path and what to do, and leaves the file as
it was. Each case is made with real files and run through the real `toolhost` command.

Root writes through any mode bits, so the read-only cases run the command as ``nobody``
(uid 65534) when the tests run as root, as the workspace tests do.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from toolhost._adapters.sqlite_db import DATABASE_NAME, connect, migrate
from toolhost._adapters.sqlite_invocations import MIGRATIONS
from toolhost._model.settings import StoreUnavailable
from toolhost.testing import run_toolhost

PLUGINS = "toolhost-math,toolhost-system"
CALL = ("call", "math.calculate", "--args", '{"expression": "17 * 23"}')
ELSEWHERE = "or set TOOLHOST_DATA_DIR to another directory"

#: Run as root, the command drops to nobody after importing everything it will need (the
#: interpreter's own files may live where nobody cannot read, e.g. under /root).
_AS_NOBODY = textwrap.dedent("""
    import os, shutil, sys, tempfile
    from toolhost._cli.main import main
    from toolhost._composition import load_host
    from toolhost._model.settings import Settings

    try:
        import toolhost._mcp  # serve's import, when the extra is installed
    except ImportError:
        pass
    scratch = tempfile.mkdtemp()
    with load_host(Settings.from_environ({**os.environ, "TOOLHOST_DATA_DIR": scratch})) as host:
        host.pipeline  # imports and opens everything a command does
    shutil.rmtree(scratch)
    os.setgroups([])
    os.setgid(65534)
    os.setuid(65534)
    sys.exit(main(sys.argv[1:]))
""")


def toolhost(data_dir: Path, *args: str, unprivileged: bool = False
             ) -> subprocess.CompletedProcess[str]:
    command = None
    if unprivileged and os.geteuid() == 0:
        command = [sys.executable, "-c", _AS_NOBODY]
    return run_toolhost(*args, data_dir=data_dir, plugins=PLUGINS, command=command)


def assert_refused(result: subprocess.CompletedProcess[str], line: str) -> None:
    assert (result.returncode, result.stdout, result.stderr) == (1, "", f"toolhost: {line}\n")


@pytest.fixture
def base() -> Iterator[Path]:
    """A directory every user can reach (pytest's own is private to its user)."""
    path = Path(tempfile.mkdtemp(prefix="toolhost-datadir-"))
    path.chmod(0o755)
    yield path
    for sub in [path, *path.rglob("*")]:
        if sub.is_dir() and not sub.is_symlink():
            sub.chmod(0o755)
    shutil.rmtree(path)


@pytest.fixture(scope="module")
def real_database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database a real `toolhost call` wrote (one succeeded row)."""
    data = tmp_path_factory.mktemp("real")
    result = toolhost(data, *CALL)
    assert (result.returncode, result.stdout) == (0, "391\n"), result.stderr
    return data / DATABASE_NAME


def copy_of(real: Path, data: Path) -> Path:
    data.mkdir(mode=0o755)
    database = data / DATABASE_NAME
    shutil.copyfile(real, database)
    return database


# --------------------------------------------------------------------------------------------
# Each case makes the data directory at ``data`` and returns the line the command prints.
# --------------------------------------------------------------------------------------------


def data_dir_is_a_file(data: Path, real: Path) -> str:
    data.write_text("not a directory\n")
    return f"the data directory {data} is a file, not a directory: move the file away, {ELSEWHERE}"


def data_dir_under_a_file(data: Path, real: Path) -> str:
    data.write_text("not a directory\n")
    return (f"the data directory {data}/sub cannot be made: {data} is a file, not a directory; "
            f"move the file away, {ELSEWHERE}")


def garbage(data: Path, real: Path) -> str:
    data.mkdir()
    (data / DATABASE_NAME).write_bytes(bytes(range(256)) * 40)
    return (f"the database {data / DATABASE_NAME} is damaged or not a toolhost database (file is "
            f"not a database): restore it from a backup, or move it aside and toolhost starts a "
            f"new one, {ELSEWHERE}")


def truncated(data: Path, real: Path) -> str:
    data.mkdir()
    whole = real.read_bytes()
    (data / DATABASE_NAME).write_bytes(whole[: len(whole) // 2])
    return (f"the database {data / DATABASE_NAME} is damaged or not a toolhost database "
            f"(database disk image is malformed): restore it from a backup, or move it aside "
            f"and toolhost starts a new one, {ELSEWHERE}")


def wrong_columns(data: Path, real: Path) -> str:
    database = copy_of(real, data)
    conn = sqlite3.connect(database)
    conn.execute("ALTER TABLE tool_invocations DROP COLUMN approver")
    conn.commit()
    conn.close()
    return (f"the database {database} does not have toolhost's schema (table tool_invocations "
            f"lacks column approver): move it aside and toolhost starts a new one, {ELSEWHERE}")


def someone_elses_table(data: Path, real: Path) -> str:
    data.mkdir()
    conn = sqlite3.connect(data / DATABASE_NAME)
    conn.execute("CREATE TABLE tool_invocations (id TEXT PRIMARY KEY, owner TEXT)")
    conn.commit()
    conn.close()
    return (f"the database {data / DATABASE_NAME} does not have toolhost's schema (table "
            f"tool_invocations already exists): move it aside and toolhost starts a new one, "
            f"{ELSEWHERE}")


def newer_schema(data: Path, real: Path) -> str:
    database = copy_of(real, data)
    conn = sqlite3.connect(database)
    conn.execute("INSERT INTO schema_migrations (component, version) VALUES ('invocations', 99)")
    conn.commit()
    conn.close()
    return (f"the database {database} was written by a newer toolhost (invocations schema "
            f"version 99; this one knows {len(MIGRATIONS)}): upgrade toolhost-core, {ELSEWHERE}")


def read_only_database(data: Path, real: Path) -> str:
    database = copy_of(real, data)
    database.chmod(0o444)
    if os.geteuid() == 0:
        os.chown(data, 65534, 65534)  # nobody may write the directory, not the file
    return (f"cannot write the database {database} (permission denied): make it readable and "
            f"writable by this user, {ELSEWHERE}")


def read_only_data_dir(data: Path, real: Path) -> str:
    copy_of(real, data)
    data.chmod(0o555)
    return (f"cannot write the data directory {data} (permission denied): make it writable by "
            f"this user, {ELSEWHERE}")


CASES: dict[str, Callable[[Path, Path], str]] = {
    f.__name__: f for f in (data_dir_is_a_file, data_dir_under_a_file, garbage, truncated,
                            wrong_columns, someone_elses_table, newer_schema,
                            read_only_database, read_only_data_dir)
}
#: The cases whose refusal depends on permissions: run as nobody when the tests run as root.
UNPRIVILEGED = {"read_only_database", "read_only_data_dir"}


def snapshot(path: Path, *, logical: bool = False) -> dict[str, object]:
    """Every file under ``path`` (or ``path`` itself) and its bytes; with ``logical``, a
    database's schema and rows instead (opening a database that is not in WAL mode yet sets
    that mode in its header before the schema can be read and refused)."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    if logical:
        dumps = {}
        for file in files:
            conn = sqlite3.connect(file)
            dumps[str(file)] = list(conn.iterdump())
            conn.close()
        return dumps
    return {str(p): p.read_bytes() for p in files}


@pytest.mark.parametrize("case", sorted(CASES))
def test_call_is_refused_in_one_line_and_the_data_is_left_as_it_was(
    case: str, base: Path, real_database: Path,
) -> None:
    data = base / "data"
    line = CASES[case](data, real_database)
    logical = case == "someone_elses_table"
    before = snapshot(data, logical=logical)
    target = data / "sub" if case == "data_dir_under_a_file" else data
    result = toolhost(target, *CALL, unprivileged=case in UNPRIVILEGED)
    assert_refused(result, line)
    assert snapshot(data, logical=logical) == before


@pytest.mark.parametrize("case", ["data_dir_is_a_file", "wrong_columns", "read_only_data_dir"])
def test_serve_is_refused_at_its_start(case: str, base: Path, real_database: Path) -> None:
    data = base / "data"
    line = CASES[case](data, real_database)
    result = toolhost(data, "serve", unprivileged=case in UNPRIVILEGED)
    assert_refused(result, line)


@pytest.mark.parametrize("case", ["data_dir_is_a_file", "data_dir_under_a_file"])
def test_check_says_a_file_stands_where_the_data_directory_would_be(
        case: str, base: Path, real_database: Path) -> None:
    # Regression: check printed "ok" (and advised chmod 700 on the file) while every other
    # command refused to start.
    data = base / "data"
    line = CASES[case](data, real_database)
    target = data / "sub" if case == "data_dir_under_a_file" else data
    assert_refused(toolhost(target, "check"), line)
    assert data.read_text() == "not a directory\n"


def test_the_approval_commands_are_refused_in_one_line(base: Path, real_database: Path) -> None:
    data = base / "data"
    line = garbage(data, real_database)
    assert_refused(toolhost(data, "pending"), line)
    assert_refused(toolhost(data, "approve", "0123"), line)


def test_a_usable_data_directory_is_made_and_used(base: Path) -> None:
    data = base / "new" / "data"
    result = toolhost(data, *CALL)
    assert (result.returncode, result.stdout, result.stderr) == (0, "391\n", "")
    conn = sqlite3.connect(data / DATABASE_NAME)
    assert conn.execute("SELECT tool_name, state FROM tool_invocations").fetchall() == [
        ("math.calculate", "succeeded")]
    conn.close()


def test_migrate_refuses_a_foreign_table_and_leaves_no_trace(tmp_path: Path) -> None:
    conn = connect(tmp_path / DATABASE_NAME)
    conn.execute("CREATE TABLE tool_invocations (id TEXT PRIMARY KEY)")
    with pytest.raises(StoreUnavailable) as info:
        migrate(conn, MIGRATIONS)
    assert info.value.path == tmp_path / DATABASE_NAME
    assert str(info.value) == (
        f"the database {tmp_path / DATABASE_NAME} does not have toolhost's schema (table "
        f"tool_invocations already exists): move it aside and toolhost starts a new one, "
        f"{ELSEWHERE}")
    # One transaction: not even the bookkeeping table was left behind.
    assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == [
        "tool_invocations", "sqlite_autoindex_tool_invocations_1"]
    conn.close()


def test_migrate_refuses_a_table_with_an_extra_column(tmp_path: Path) -> None:
    conn = connect(tmp_path / DATABASE_NAME)
    migrate(conn, MIGRATIONS)
    conn.execute("ALTER TABLE tool_invocations ADD COLUMN note TEXT")
    with pytest.raises(StoreUnavailable, match=r"\(table tool_invocations has column note\)"):
        migrate(conn, MIGRATIONS)
    conn.close()



def test_each_distribution_has_its_own_directory_and_finds_another_s(tmp_path: Path) -> None:
    # One rule, DATA_DIR/plugins/<distribution>: the host builds Services.data_dir with it, a
    # plugin's console script finds the same directory from the settings alone, and a
    # distribution reading another's public store (people reads the email cache) finds it too.
    from conftest import make_plugin

    from toolhost import Settings
    from toolhost.testing import Harness

    settings = Settings.from_environ({"TOOLHOST_DATA_DIR": str(tmp_path)})
    assert settings.plugin_data_dir("toolhost-email") == tmp_path / "plugins" / "toolhost-email"
    with Harness.over({"fx-dist": make_plugin(tools=[])}, data_dir=tmp_path) as h:
        services = h.host.services_for("toolhost-people")
        assert services.data_dir == settings.plugin_data_dir("toolhost-people")
        assert services.data_dir.is_dir()
        other = services.data_dir_of("toolhost-email")
        assert other == settings.plugin_data_dir("toolhost-email")
        assert not other.exists()  # found, not created: it belongs to the other distribution
