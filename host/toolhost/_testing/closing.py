"""What the contract suites share: every store a test made is closed when the test ends.

A store holds database connections (and the SQLite store a checkpointer's thread); left to
the garbage collector they close late, in another test, and Python 3.13 reports each one as
``ResourceWarning: unclosed database``. A test that closes its store itself loses nothing: a
store's ``close`` may be called again.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

__all__ = ["ClosesItsStores"]


class ClosesItsStores:
    """Mixed into a contract suite whose factory is ``make_store``."""

    @pytest.fixture(autouse=True)
    def _close_made_stores(self) -> Iterator[None]:
        made: list[Any] = []
        make = getattr(self, "make_store")  # noqa: B009 - the suite's, not this mixin's

        def make_store(*args: Any, **kwargs: Any) -> Any:
            store = make(*args, **kwargs)
            made.append(store)
            return store

        # Per test: pytest makes a fresh instance of the suite for each one.
        setattr(self, "make_store", make_store)  # noqa: B010
        yield
        for store in reversed(made):
            close = getattr(store, "close", None)
            if close is not None:
                close()
