"""Helpers shared by the demo's tests (public API only)."""

from __future__ import annotations

from pathlib import Path

_SQLITE_HEADER = b"SQLite format 3\x00"


def _is_sqlite(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(len(_SQLITE_HEADER)) == _SQLITE_HEADER


def database(data_dir: Path) -> Path:
    """The host's one SQLite database under ``data_dir``, found by its file header (its name
    is the host's business, not the plugin's)."""
    found = [p for p in data_dir.iterdir() if p.is_file() and _is_sqlite(p)]
    assert len(found) == 1, found
    return found[0]
