"""The file behind each of ``check``'s caches (the determinism scan's, the validators', the
readiness hint): read as JSON, written whole and atomically. Failing to read or write is never
an error: a cache that cannot be read is empty, and one that cannot be written is not written.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from toolhost._model.data_layout import make_private_dirs

__all__ = ["read_entries", "read_json", "write_entries", "write_json"]


def read_json(path: Path) -> Any:
    """The file's JSON value, or None when it is missing or unreadable."""
    with contextlib.suppress(OSError, ValueError):
        return json.loads(path.read_bytes())
    return None


def write_json(path: Path, value: Any) -> None:
    """Write ``value`` over ``path`` (a temp file beside it, renamed), or nothing when the
    directory cannot be written."""
    import tempfile  # only a command that has something new to keep writes

    with contextlib.suppress(OSError):
        make_private_dirs(path.parent)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}-", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(value, f, separators=(",", ":"))
            os.replace(tmp, path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise


def read_entries(path: Path) -> dict[str, Any]:
    """The cache's JSON object, or an empty one when it is missing, unreadable or not one."""
    loaded = read_json(path)
    return loaded if isinstance(loaded, dict) else {}


def write_entries(path: Path, entries: dict[str, Any], *, most: int) -> None:
    """Write the newest ``most`` entries over ``path``."""
    write_json(path, dict(list(entries.items())[-most:]))
