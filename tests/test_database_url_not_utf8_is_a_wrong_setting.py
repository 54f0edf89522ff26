"""A TOOLHOST_DATABASE_URL holding bytes that are not UTF-8 (a Latin-1 byte in its password)
is a wrong setting: one line, exit 2, the password not shown (D253, D503), in every command
that opens the record."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from toolhost._testing.cli import run_toolhost

#: ``postgresql://bob:p\xe4ss@...`` as Python hands it over: the byte as a lone surrogate.
LATIN1_PASSWORD_URL = "postgresql://bob:p\udce4ss@127.0.0.1:1/db"
LINE = ("toolhost: TOOLHOST_DATABASE_URL is not UTF-8 text (nor are the bytes its %-escapes "
        "stand for): write every value in it, the password too, as UTF-8\n")


@pytest.mark.skipif(importlib.util.find_spec("psycopg") is None,
                    reason="the PostgreSQL client is not installed")
@pytest.mark.parametrize("args", [["pending"], ["show", "0123"], ["recover"]])
@pytest.mark.parametrize("url", [
    LATIN1_PASSWORD_URL,
    "postgresql://bob:p%E4ss@127.0.0.1:1/db",  # the same byte %-escaped: libpq decodes it
    "host=127.0.0.1 user=bob password=p\udce4ss",  # a libpq conninfo string
])
def test_a_database_url_that_is_not_utf8_is_one_line_and_exit_2(
        tmp_path: Path, args: list[str], url: str) -> None:
    # Regression: psycopg's UnicodeEncodeError (UnicodeDecodeError) traceback, exit 1.
    result = run_toolhost(*args, data_dir=tmp_path / "data", plugins="", drop=("AWS_", "PG"),
                          env={"TOOLHOST_DATABASE_URL": url})
    assert (result.returncode, result.stdout, result.stderr) == (2, "", LINE)
    assert "p\udce4ss" not in result.stderr and "bob" not in result.stderr
