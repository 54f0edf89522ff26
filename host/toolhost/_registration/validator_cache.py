"""A content-keyed cache of the validators' generated code, so a start generates code only for
the schemas that changed since the last start (D128's scan cache is the model).

An entry is keyed by the sha256 of the generator (fastjsonschema's own source files and
toolhost's ``schema.py``), the ``apply_defaults`` choice and the schema's JSON text: a changed
schema, a changed generator or a reinstalled fastjsonschema is a new key, so an entry can never
be stale and nothing is invalidated. Only a schema that generated code is cached (a bad one is
refused afresh at every start), and only plain JSON values make a key (a tuple and a list would
encode alike). One that cannot be read is empty, one that cannot be written is not written;
neither is ever an error.

The entries are code every start runs, so they are read only from a file that nobody but this
user could have written: the file and its directory owned by this user and writable by nobody
else (as ssh's StrictModes judges ``authorized_keys``). Anything else is read as empty and
regenerated; no signature would do better, since a key this user can read to check it, the
same user could read to forge it (D256).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from toolhost._registration.cache_file import read_entries, write_entries

__all__ = ["ValidatorCache"]

#: Entries kept at most: two validators a tool, several versions of every installed tool.
MAX_ENTRIES = 1024


class ValidatorCache:
    """``key(schema, apply_defaults) -> generated code``, loaded from ``path`` and written
    back by ``save`` when something was added."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: dict[str, str] = {}
        self._dirty = False
        if _only_ours(path):
            self._entries = {k: v for k, v in read_entries(path).items() if isinstance(v, str)}
        self._salt = _generator_digest()

    def key(self, schema: Mapping[str, Any], *, apply_defaults: bool) -> str | None:
        """The schema's key, or None when it is not plain JSON (it is then never cached)."""
        plain = dict(schema)  # as compile_schema hands it to fastjsonschema
        if self._salt is None or not _plain_json(plain):
            return None
        text = json.dumps(plain, ensure_ascii=False, separators=(",", ":"))
        flag = b"1" if apply_defaults else b"0"
        return hashlib.sha256(self._salt + flag + text.encode("utf-8")).hexdigest()

    def get(self, key: str) -> str | None:
        return self._entries.get(key)

    def put(self, key: str, code: str) -> None:
        self._entries[key] = code
        self._dirty = True

    def save(self) -> None:
        """Write the entries atomically (a temp file renamed over the cache), if any were
        added; the oldest are dropped past ``MAX_ENTRIES``. Failing to write is not an error."""
        if not self._dirty:
            return
        if self.path.parent.exists() and not _ours(self.path.parent):
            return  # no start would read it there: written, it is only a cost at every start
        write_entries(self.path, self._entries, most=MAX_ENTRIES)
        self._dirty = False


def _only_ours(path: Path) -> bool:
    """Whether only this user could have written ``path``: it and its directory are this
    user's and not writable by group or others (a missing file is nothing to read)."""
    return _ours(path) and _ours(path.parent)


def _ours(path: Path) -> bool:
    """``path`` is this user's and not writable by group or others."""
    uid = os.geteuid() if hasattr(os, "geteuid") else None
    try:
        status = os.lstat(path)
    except OSError:
        return False
    return (uid is None or status.st_uid == uid) and not status.st_mode & 0o022


def _generator_digest() -> bytes | None:
    """sha256 of every source file of the installed fastjsonschema (found without importing
    it) and of toolhost's schema.py; None when they cannot be read (nothing is cached then)."""
    digest = hashlib.sha256()
    try:
        spec = find_spec("fastjsonschema")
        locations = spec.submodule_search_locations if spec is not None else None
        if not locations:
            return None
        package = Path(next(iter(locations)))
        for file in sorted(package.glob("*.py")):
            digest.update(file.name.encode("utf-8") + b"\0" + file.read_bytes() + b"\0")
        digest.update(Path(__file__).with_name("schema.py").read_bytes())
    except (OSError, ValueError, ImportError):
        return None
    return digest.digest()


def _plain_json(value: object) -> bool:
    """Only dicts with string keys, lists, strings, numbers, booleans and None."""
    if value is None or type(value) in (str, int, float, bool):
        return True
    if type(value) is list:
        return all(_plain_json(v) for v in value)
    if type(value) is dict:
        return all(type(k) is str and _plain_json(v) for k, v in value.items())
    return False
