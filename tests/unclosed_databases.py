"""A SQLite connection left open is a test failure on every Python the host claims.

Python 3.13 warns when a connection is garbage collected open (``ResourceWarning: unclosed
database in <sqlite3.Connection object at 0x...>``) and pyproject's ``filterwarnings = error``
makes that a failure. Older Pythons close it silently, so on them ``report_unclosed`` makes
``sqlite3.connect``'s connections say the same: a leak fails the 3.11 run too, not only 3.13's.
"""

from __future__ import annotations

import sqlite3
import sys
import warnings
from collections.abc import Callable
from typing import Any

__all__ = ["NATIVE", "ReportedConnection", "report_unclosed", "running"]

#: The interpreter reports an unclosed connection itself (3.13 and later).
NATIVE = sys.version_info >= (3, 13)


#: The test running now (conftest sets it): a report names the test that opened the
#: connection, whichever test's garbage collection finds it.
running = ""


class ReportedConnection(sqlite3.Connection):
    """A connection that warns as 3.13's does when it is collected without ``close()``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.opened_in = running

    def __del__(self) -> None:
        try:
            self.total_changes  # noqa: B018 - raises once the connection is closed
        except sqlite3.ProgrammingError:
            return
        # ``source``: with ``-X tracemalloc`` the report shows where the connection was opened.
        opened_in = getattr(self, "opened_in", "") or "no test"  # __init__ may have failed
        warnings.warn(f"unclosed database in {object.__repr__(self)}, opened in {opened_in}",
                      ResourceWarning, stacklevel=1, source=self)


def report_unclosed() -> Callable[[], None]:
    """Before 3.13, make ``sqlite3.connect`` open ``ReportedConnection`` unless the caller
    names its own factory. Returns what undoes it."""
    if NATIVE:
        return lambda: None
    original = sqlite3.connect

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        if len(args) < 6:  # ``factory`` is connect's sixth parameter
            kwargs.setdefault("factory", ReportedConnection)
        return original(*args, **kwargs)

    sqlite3.connect = connect

    def undo() -> None:
        sqlite3.connect = original

    return undo
