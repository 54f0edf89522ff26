"""Fixtures: the owner's fixture mailbox (and a second account's), imported once per module
through toolhost-email's import command into a data directory, and a host over this plugin on
that directory. Tests that change the cache (erase, links) take ``fresh`` instead, a data
directory of their own.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from people_support import OTHER_ACCOUNT, OTHER_MAIL, OWNER, OWNER_MAIL, harness, import_mail
from toolhost.testing import Harness, remove_tree


def _imported(base: Path) -> Path:
    data_dir = base / "data"
    data_dir.mkdir()
    import_mail(data_dir, OWNER, OWNER_MAIL, "owner")
    import_mail(data_dir, OTHER_ACCOUNT, OTHER_MAIL, "other")
    return data_dir


@pytest.fixture(scope="module")
def shared_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The data directory with both mailboxes imported, for tests that only read."""
    base = tmp_path_factory.mktemp("people")
    yield _imported(base)
    remove_tree(base)


@pytest.fixture(scope="module")
def host(shared_dir: Path) -> Iterator[Harness]:
    with harness(shared_dir) as h:
        yield h


@pytest.fixture
def fresh(tmp_path: Path) -> Path:
    """A data directory of this test's own with both mailboxes imported."""
    return _imported(tmp_path)
