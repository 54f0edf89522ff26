"""A content-keyed cache of the determinism scan's findings, so ``toolhost check`` parses only
the plugin files that changed since the last check.

A file's entry is keyed by the sha256 of the scanner's own source and the file's bytes: a
changed file, or a changed scanner (a new ambient call in its tables, a fixed walk), is a new
key, so an entry can never be stale; there is nothing to invalidate. The cache is an
optimization and nothing more: one that cannot be read is empty, one that cannot be written is
not written, and neither is ever an error.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, MutableMapping
from pathlib import Path

from toolhost._registration.cache_file import read_entries, write_entries

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
        self._entries = {k: v for k, v in read_entries(path).items()
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
        write_entries(self.path, self._entries, most=MAX_ENTRIES)
        self._dirty = False
