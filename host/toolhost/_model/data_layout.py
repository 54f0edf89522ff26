"""Where the host's durable data lives: the default data directory and each distribution's
own directory under it.

A module of its own, free of attrs, so that ``toolhost --help`` (whose epilog shows the
default) pays for none of the model's imports.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["default_data_dir", "plugin_data_dir"]


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
