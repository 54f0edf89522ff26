"""A content-keyed cache of the determinism scan's findings, so ``toolhost check`` parses only
the plugin files that changed since the last check.

A file's entry is keyed by the sha256 of the scanner's own source and the file's bytes: a
changed file, or a changed scanner (a new ambient call in its tables, a fixed walk), is a new
key, so an entry can never be stale; there is nothing to invalidate. The cache is an
optimization and nothing more: one that cannot be read is empty, one that cannot be written is
not written, and neither is ever an error.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator, MutableMapping
from pathlib import Path

__all__ = ["ScanCache"]

#: Entries kept at most: the files of every installed plugin, with room for several versions.
MAX_ENTRIES = 4096


class ScanCache(MutableMapping[str, list[str]]):
    """``key(source bytes) -> findings`` ("line: text" lines, without the file name), loaded
    from ``path`` and written back by ``save`` when something was added."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: dict[str, list[str]] = {}
        self._dirty = False
        with contextlib.suppress(OSError, ValueError):
            loaded = json.loads(path.read_bytes())
            if isinstance(loaded, dict):
                self._entries = {k: v for k, v in loaded.items()
                                 if isinstance(v, list) and all(isinstance(x, str) for x in v)}
        # The scanner's own source is part of every key: a changed rule is a changed key.
        from toolhost._registration import ambient

        self._salt = hashlib.sha256(Path(ambient.__file__).read_bytes()).digest()

    def key(self, source: bytes) -> str:
        return hashlib.sha256(self._salt + source).hexdigest()

    def __getitem__(self, key: str) -> list[str]:
        return self._entries[key]

    def __setitem__(self, key: str, value: list[str]) -> None:
        self._entries[key] = list(value)
        self._dirty = True

    def __delitem__(self, key: str) -> None:
        del self._entries[key]
        self._dirty = True

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def save(self) -> None:
        """Write the entries atomically (a temp file renamed over the cache), if any were
        added; the oldest are dropped past ``MAX_ENTRIES``. Failing to write is not an error."""
        if not self._dirty:
            return
        import tempfile  # only a check that scanned something writes

        entries = dict(list(self._entries.items())[-MAX_ENTRIES:])
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".scan-", dir=self.path.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    json.dump(entries, f, separators=(",", ":"))
                os.replace(tmp, self.path)
            except OSError:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        self._dirty = False
