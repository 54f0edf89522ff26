"""The file behind a content-keyed cache (the determinism scan's, the validators'): read as
a JSON object, written whole and atomically. Failing to read or write is never an error: a
cache that cannot be read is empty, and one that cannot be written is not written."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

__all__ = ["read_entries", "write_entries"]


def read_entries(path: Path) -> dict[str, Any]:
    """The cache's JSON object, or an empty one when it is missing, unreadable or not one."""
    with contextlib.suppress(OSError, ValueError):
        loaded = json.loads(path.read_bytes())
        if isinstance(loaded, dict):
            return loaded
    return {}


def write_entries(path: Path, entries: dict[str, Any], *, most: int) -> None:
    """Write the newest ``most`` entries over ``path`` (a temp file beside it, renamed), or
    nothing when the directory cannot be written."""
    import tempfile  # only a command that added entries writes

    kept = dict(list(entries.items())[-most:])
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}-", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(kept, f, separators=(",", ":"))
            os.replace(tmp, path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
