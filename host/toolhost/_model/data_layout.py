"""Where the host's durable data lives: the default data directory and each distribution's
own directory under it.

A module of its own, free of attrs, so that ``toolhost --help`` (whose epilog shows the
default) pays for none of the model's imports.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["DATABASE_NAME", "default_data_dir", "file_in_the_way", "make_private_dirs",
           "plugin_data_dir", "readable_by_others"]

#: The host's own SQLite database in the data directory (the record and the artifact index).
DATABASE_NAME = "toolhost.sqlite3"


def default_data_dir() -> Path:
    """Where the data lives when TOOLHOST_DATA_DIR is unset (``toolhost --help`` shows it):
    an XDG-style per-user directory, ``$XDG_DATA_HOME/toolhost`` or
    ``~/.local/share/toolhost``."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "toolhost"


def plugin_data_dir(data_dir: Path, distribution: str) -> Path:
    """Where ``distribution`` keeps the durable state it owns: ``DATA_DIR/plugins/<name>``.

    The one place this layout is decided: the host builds each distribution's
    ``Services.data_dir`` with it, and a plugin's own console script (or a distribution that
    reads another's public store, as people reads the email cache) finds it the same way.
    """
    return data_dir / "plugins" / distribution


def make_private_dirs(path: Path) -> None:
    """Make ``path`` and each missing directory above it 0700 (``mkdir(parents=True)`` gives
    the parents the umask's mode: the data directory was 0755 when a cache or the artifact
    store made it first). Existing directories are left as they are. Public as
    ``toolhost.make_private_dirs`` (plugin API 1.9): a plugin's console script runs before
    any host has made the data directory, and makes it with this.

    :raises OSError: as ``Path.mkdir``.
    """
    missing = []
    current = path
    while not os.path.lexists(current) and current != current.parent:
        missing.append(current)
        current = current.parent
    for directory in reversed(missing):
        directory.mkdir(mode=0o700, exist_ok=True)
    if not missing and not path.is_dir():
        raise NotADirectoryError(path)


def readable_by_others(data_dir: Path) -> list[tuple[Path, int, str]]:
    """The data directory and its database files that others may read, each with its mode
    and the ``chmod`` that closes it: made before they were private, or opened up by hand,
    and changed by nobody but the operator (who may share them with a group on purpose)."""
    found = []
    for path, private in ((data_dir, "700"), *((p, "600") for p in sorted(
            data_dir.glob(f"{DATABASE_NAME}*")))):
        try:
            mode = os.stat(path).st_mode & 0o777
        except OSError:
            continue
        if mode & 0o077:
            found.append((path, mode, f"chmod {private} {path}"))
    return found


def file_in_the_way(directory: Path) -> bool:
    """Whether a file (not a directory) stands where ``directory`` or one of its parents
    would be, so that no directory could be made there: found without making anything."""
    return any(os.path.lexists(p) and not p.is_dir() for p in (directory, *directory.parents))
