"""How many bytes a SQLite database really holds, for tests and benchmarks that bound its
growth (tests/test_stored_output.py, bench/bench_read_record.py): the file's size counts
free pages and leaves out a WAL not yet checkpointed."""

from __future__ import annotations

import sqlite3
from pathlib import Path

__all__ = ["used_bytes"]


def used_bytes(path: Path) -> int:
    """The database's pages in use, once the WAL is checkpointed into it."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages, free, size = (conn.execute(f"PRAGMA {name}").fetchone()[0]
                             for name in ("page_count", "freelist_count", "page_size"))
        return int((pages - free) * size)
    finally:
        conn.close()
