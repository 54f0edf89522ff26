"""The invocation record's lookups (issue #11), side by side in one run.

1. The approval lookup of a gated MCP call (``Pipeline.rows_for`` + ``find_row``) after N rows
   in one run: on the schema before migration 4 (its query, cattrs records) and as shipped,
   next to the floor, an indexed ``LIMIT 1`` on the same table.
2. ``toolhost pending`` with 100,000 invocations awaiting approval: one page (the default 50),
   and the whole listing paged with ``--after``, next to two raw SELECTs of the same rows,
   fetched, nothing rendered: the store's own statement (``InvocationStore.pending``'s eight
   columns), and the whole rows (the 26 columns ``list`` reads). Rows made at distinct
   instants, and at one instant (a bulk import, a frozen clock), which is where the old index
   had to sort them all.

Run: python bench/bench_record.py [--rows 100000] [--quick]
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import shutil
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toolhost._adapters.sqlite_db import DATABASE_NAME, connect, migrate
from toolhost._adapters.sqlite_invocations import (
    _COLUMNS,
    _SELECT_PENDING,
    MIGRATIONS,
    SQLiteInvocationStore,
)
from toolhost._cli.approvals import list_pending
from toolhost._mcp.approvals import find_row
from toolhost._model.convert import from_row, to_row
from toolhost._model.invocations import InvocationRecord, InvocationState

START = dt.datetime(2026, 7, 25, 13, 3, 11, tzinfo=dt.UTC)
_SELECT = f"SELECT {', '.join(_COLUMNS)} FROM tool_invocations"


def record(i: int, *, state: InvocationState, same_instant: bool = False,
           digest: str | None = None) -> InvocationRecord:
    instant = START if same_instant else START + dt.timedelta(microseconds=i)
    return InvocationRecord(
        id=f"{i:032x}", run_id="run-1", principal_id="local", scopes=("fxw.write",),
        tool_name="fxw.external_write", tool_version="1.0.0",
        arguments={"destination": f"crm://acme/{i}"},
        argument_digest=digest or f"sha256:{i:064x}", state=state,
        policy={"action": "require_approval", "rule": "EXTERNAL_WRITE/HIGH"},
        created_at=instant)


def database(directory: Path, rows: list[InvocationRecord], *, version: int) -> Path:
    """A database at schema ``version`` holding ``rows``."""
    path = directory / f"v{version}-{len(rows)}-{id(rows)}" / DATABASE_NAME
    conn = connect(path)
    migrate(conn, MIGRATIONS[:version])
    # Only the columns the table had at ``version``: later migrations added more.
    there = {row[1] for row in conn.execute("PRAGMA table_info(tool_invocations)")}
    columns = [c for c in _COLUMNS if c in there]
    insert = (f"INSERT INTO tool_invocations ({', '.join(columns)}) "
              f"VALUES ({', '.join('?' * len(columns))})")
    conn.execute("BEGIN")
    conn.executemany(insert, ([to_row(r)[c] for c in columns] for r in rows))
    conn.execute("COMMIT")
    conn.close()
    return path


def old_select(conn: sqlite3.Connection) -> str:
    """``_SELECT`` on an older schema: a column a later migration added reads as NULL."""
    there = {row[1] for row in conn.execute("PRAGMA table_info(tool_invocations)")}
    picked = [c if c in there else f"NULL AS {c}" for c in _COLUMNS]
    return f"SELECT {', '.join(picked)} FROM tool_invocations"


def median_ms(action: Callable[[], Any], *, runs: int) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        action()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def old_records(rows: list[Any]) -> list[InvocationRecord]:
    return [from_row(InvocationRecord, dict(zip(_COLUMNS, row, strict=True))) for row in rows]


def approval_lookup(directory: Path, sizes: list[int], runs: int) -> None:
    print("1. approval lookup of a repeated gated call, after N rows in one run (ms, median)")
    print(f"{'N rows':>8} {'before (v3)':>12} {'as shipped':>11} {'LIMIT 1 floor':>14} "
          f"{'before / floor':>15} {'shipped / floor':>16}")
    for n in sizes:
        lookup_after(directory, n, runs)


def lookup_after(directory: Path, n: int, runs: int) -> None:
    digest = "sha256:" + "ab" * 32
    rows = [record(i, state=InvocationState.SUCCEEDED) for i in range(n)]
    rows.append(record(n, state=InvocationState.AWAITING_APPROVAL, digest=digest))
    old = sqlite3.connect(database(directory, rows, version=3), isolation_level=None)
    store = SQLiteInvocationStore(connect(database(directory, rows, version=4)))
    where = ("run_id = ? AND tool_name = ? AND tool_version = ? AND argument_digest = ? "
             "ORDER BY created_at, id")
    criteria = ("run-1", "fxw.external_write", "1.0.0", digest)

    def before() -> None:
        found = find_row(old_records(old.execute(f"{old_select(old)} WHERE {where}",
                                                 criteria).fetchall()), ())
        assert found is not None

    def shipped() -> None:
        found = find_row(store.list(run_id="run-1", tool_name="fxw.external_write",
                                    tool_version="1.0.0", argument_digest=digest), ())
        assert found is not None

    def floor() -> None:
        assert store._conn.execute(
            "SELECT id FROM tool_invocations WHERE run_id = ? AND argument_digest = ? "
            "ORDER BY created_at DESC, id DESC LIMIT 1", ("run-1", digest)).fetchone()

    b, s, f = (median_ms(a, runs=runs) for a in (before, shipped, floor))
    print(f"{n:>8} {b:12.3f} {s:11.3f} {f:14.3f} {b / f:15.1f} {s / f:16.1f}")
    old.close()
    store.close()


def pending(directory: Path, n: int, runs: int) -> None:
    print(f"2. toolhost pending with {n:,} invocations awaiting approval (ms, median)")
    print(f"{'rows made':>14} {'what':<24} {'before (v3)':>12} {'as shipped':>11} "
          f"{'raw, same SQL':>14} {'raw, 26 cols':>13} {'shipped / same':>15} "
          f"{'shipped / 26':>13}")
    for label, same in (("at N instants", False), ("at one instant", True)):
        pending_at(directory, n, runs, label, same=same)
    print("before (v3): the store's query then and cattrs records, nothing rendered; as "
          "shipped: the whole pending command after loading the host (InvocationStore.pending's "
          "read, the rendered page, the check for stranded running rows)")


def pending_at(directory: Path, n: int, runs: int, label: str, *, same: bool) -> None:
    awaiting = InvocationState.AWAITING_APPROVAL.value
    rows = [record(i, state=InvocationState.AWAITING_APPROVAL, same_instant=same)
            for i in range(n)]
    old = sqlite3.connect(database(directory, rows, version=3), isolation_level=None)
    store = SQLiteInvocationStore(connect(database(directory, rows, version=4)))
    where = "WHERE state NOT IN ('denied', 'failed', 'succeeded') AND state = ? ORDER BY " \
            "created_at, id"

    def before_page(limit: int = 51) -> None:
        old_records(old.execute(f"{old_select(old)} WHERE state = ? ORDER BY created_at, id "
                                "LIMIT ?", (awaiting, limit)).fetchall())

    def shipped_page() -> None:
        list_pending(store, limit=50, after=None, as_json=False, out=io.StringIO(),
                     err=io.StringIO())

    def raw(select: str, limit: int | None) -> Callable[[], int]:
        sql = f"{select} {where}" + (" LIMIT ?" if limit is not None else "")
        values = (awaiting,) if limit is None else (awaiting, limit)
        return lambda: len(store._conn.execute(sql, values).fetchall())

    b, s, r, w = (median_ms(a, runs=runs) for a in (
        before_page, shipped_page, raw(_SELECT_PENDING, 51), raw(_SELECT, 51)))
    print(f"{label:>14} {'first page of 50':<24} {b:12.2f} {s:11.2f} {r:14.2f} {w:13.2f} "
          f"{s / r:15.2f} {s / w:13.2f}")

    def shipped_all() -> None:
        after, listed = None, 0
        while True:
            out, err = io.StringIO(), io.StringIO()
            list_pending(store, limit=1000, after=after, as_json=False, out=out, err=err)
            lines = out.getvalue().splitlines()
            listed += len(lines)
            if "--after" not in err.getvalue():
                break
            after = lines[-1].split()[0]
        assert listed == n, listed

    # Interleaved, a round of each at a time, so a noisy neighbour weighs on all alike.
    actions = {"before": lambda: before_page(n + 1), "shipped": shipped_all,
               "same": raw(_SELECT_PENDING, None), "whole": raw(_SELECT, None)}
    samples: dict[str, list[float]] = {name: [] for name in actions}
    for _ in range(max(3, runs // 8)):
        for name, action in actions.items():
            samples[name].append(median_ms(action, runs=1))
    b, s, r, w = (statistics.median(samples[name]) for name in actions)
    print(f"{'':>14} {'all, in pages of 1,000':<24} {b:12.1f} {s:11.1f} {r:14.1f} {w:13.1f} "
          f"{s / r:15.2f} {s / w:13.2f}")
    old.close()
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--quick", action="store_true", help="10,000 rows, fewer runs")
    args = parser.parse_args()
    rows, runs = (10_000, 21) if args.quick else (args.rows, 41)
    directory = Path(tempfile.mkdtemp(prefix="toolhost-bench-record-"))
    try:
        approval_lookup(directory, [n for n in (100, 1_000, 10_000, 100_000) if n <= rows],
                        runs)
        pending(directory, rows, runs)
    finally:
        shutil.rmtree(directory)


if __name__ == "__main__":
    main()
