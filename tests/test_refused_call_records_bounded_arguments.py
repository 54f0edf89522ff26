"""A call refused at step 4 records its arguments only up to a bound: past it, a fixed text with
their size and digest, as arguments nested too deeply are recorded (D336). A review sent a
``tools/call`` of 31 MB the schema refuses, and its row held all 31 MB.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from fixture_tools import PLUGIN

from toolhost._model.digest import canonical_json, sha256_digest
from toolhost._pipeline.steps import MAX_REFUSED_ARGUMENT_BYTES
from toolhost.testing import host_for


def _recorded_lengths(data_dir: Path) -> list[int]:
    """What the record file holds of each row's arguments, in bytes (the real SQLite file)."""
    (db,) = data_dir.glob("*.sqlite3")
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return [n for (n,) in conn.execute(
            "select length(cast(arguments as blob)) from tool_invocations")]


def test_a_refused_calls_large_arguments_are_recorded_as_their_size_and_digest(
        tmp_path: Path) -> None:
    arguments = {"x": [{} for _ in range(1_000_000)]}  # 3 MB of JSON, not the string x is
    encoded = canonical_json(arguments)
    with host_for({"fx-dist": PLUGIN}, data_dir=tmp_path) as host:
        outcome = host.invoke_sync("fx.echo", arguments)
        assert outcome.failure is not None
        assert outcome.failure.reason_code == "tool.invalid_arguments.schema"
        (row,) = host.pipeline.invocations.list()
    assert row.arguments == (f"(arguments of {len(encoded)} bytes, too large to record; "
                             f"{sha256_digest(encoded)})")
    (length,) = _recorded_lengths(tmp_path)
    assert length < 200


def test_a_refused_calls_arguments_within_the_bound_are_recorded_whole(tmp_path: Path) -> None:
    arguments = {"x": ["y" * (MAX_REFUSED_ARGUMENT_BYTES - 16)]}
    assert len(canonical_json(arguments)) <= MAX_REFUSED_ARGUMENT_BYTES
    with host_for({"fx-dist": PLUGIN}, data_dir=tmp_path) as host:
        outcome = host.invoke_sync("fx.echo", arguments)
        assert outcome.failure is not None
        (row,) = host.pipeline.invocations.list()
    assert row.arguments == arguments
