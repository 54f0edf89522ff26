"""Every SQLite connection the host opens is closed by the host, never by the garbage
collector (issue #26: Python 3.13 reported the ones that were not, as `ResourceWarning:
unclosed database`; older Pythons said nothing)."""

from __future__ import annotations

import gc
import os
import sqlite3
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

from toolhost._adapters.sqlite_artifacts import open_artifact_store
from toolhost._adapters.sqlite_db import DATABASE_NAME, connect
from toolhost._model.settings import StoreUnavailable
from toolhost.testing import DEFAULT_INSTANT, FixedClock

HERE = Path(__file__).parent


def unclosed_after(action: Callable[[], object]) -> list[str]:
    """The `unclosed database` warnings raised while ``action`` ran and its garbage was
    collected."""
    gc.collect()  # what earlier tests left is reported now, not counted as the action's
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        action()
        gc.collect()
    return [str(w.message) for w in caught
            if issubclass(w.category, ResourceWarning) and "unclosed database" in str(w.message)]


def test_a_connection_collected_open_is_reported_on_every_python() -> None:
    # On 3.13 by the interpreter; before it, by tests/unclosed_databases.py (conftest).
    def leak() -> None:
        sqlite3.connect(":memory:").execute("SELECT 1")

    reported = unclosed_after(leak)
    assert len(reported) == 1 and reported[0].startswith("unclosed database in <"), reported


def test_a_closed_connection_is_not_reported() -> None:
    def tidy() -> None:
        sqlite3.connect(":memory:").close()

    assert unclosed_after(tidy) == []


def test_the_artifact_store_closes_the_connection_it_opened_for_a_database_it_refuses(
        tmp_path: Path) -> None:
    conn = connect(tmp_path / DATABASE_NAME)
    conn.execute("CREATE TABLE schema_migrations (component TEXT NOT NULL, "
                 "version INTEGER NOT NULL, PRIMARY KEY (component, version))")
    conn.execute("INSERT INTO schema_migrations VALUES ('artifacts', 999)")
    conn.close()
    refusals: list[str] = []

    def refused() -> None:
        try:
            open_artifact_store(tmp_path, FixedClock(DEFAULT_INSTANT))
        except StoreUnavailable as exc:
            refusals.append(str(exc))

    assert unclosed_after(refused) == []
    assert len(refusals) == 1 and "was written by a newer toolhost (artifacts schema version " \
        "999; this one knows" in refusals[0]


# The command runs in a process of its own (as an operator runs it), with the same report on
# every Python: an unclosed connection prints its ResourceWarning on stderr.
_COMMAND = textwrap.dedent("""
    import gc, sys
    sys.path.insert(0, {tests!r})
    from unclosed_databases import report_unclosed
    report_unclosed()
    from toolhost._cli.main import main
    code = main(sys.argv[1:])
    gc.collect()
    sys.exit(code)
""")


@pytest.mark.parametrize(("args", "code"), [
    (["call", "math.calculate", "--args", '{"expression": "17 * 23"}'], 0),
    (["call", "math.calculate", "--args", '{"expression": "1 / 0"}'], 1),
    (["pending"], 0),
    (["artifacts", "list"], 0),
    (["recover"], 0),
], ids=["call", "failed-call", "pending", "artifacts-list", "recover"])
def test_a_command_closes_the_stores_it_opened(tmp_path: Path, args: list[str],
                                               code: int) -> None:
    env = {**os.environ, "TOOLHOST_DATA_DIR": str(tmp_path / "data"),
           "TOOLHOST_PLUGINS": "toolhost-math"}
    result = subprocess.run(
        [sys.executable, "-W", "always::ResourceWarning", "-c",
         _COMMAND.format(tests=str(HERE)), *args],
        capture_output=True, text=True, env=env, timeout=120)
    assert "unclosed database" not in result.stderr, result.stderr
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr

