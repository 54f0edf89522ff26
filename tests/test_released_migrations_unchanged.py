"""A migration a release shipped is never edited: a database that release made recorded it as
applied and never runs it again, so a change to its text reaches new databases only and the
old ones differ from them for good. A schema change is a new migration.

Each released migration's text is pinned here by its sha256 (whitespace runs read as one
space, so re-indenting passes). When a release is made (D310: the commit that changes
``__version__``), add the migrations it ships to ``RELEASED``; ``tests/data`` keeps the last
release's texts whole for tests/test_record_upgrade_from_0_5.py.

Before: commit c060640 added ``user_turn`` to SQLite's invocations migration 5 and PostgreSQL's
migration 2 after 0.5.0 had shipped them, and 0.5.0's records were refused or broken.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from toolhost._adapters import pg_artifacts, pg_invocations, sqlite_artifacts, sqlite_invocations
from toolhost._adapters.sqlite_db import Migration

#: Every versioned migration list of the core, by the name a failure line gives.
LISTS: dict[str, Sequence[Migration] | Sequence[tuple[str, int, object]]] = {
    "sqlite_invocations.MIGRATIONS": sqlite_invocations.MIGRATIONS,
    "sqlite_artifacts.MIGRATIONS": sqlite_artifacts.MIGRATIONS,
    "sqlite_artifacts.BUCKET_MIGRATIONS": sqlite_artifacts.BUCKET_MIGRATIONS,
    "pg_invocations.MIGRATIONS": pg_invocations.MIGRATIONS,
    "pg_artifacts.MIGRATIONS": pg_artifacts.MIGRATIONS,
}

#: (list, component, version) -> (the release that first shipped it, sha256 of its text).
RELEASED: dict[tuple[str, str, int], tuple[str, str]] = {
    ("sqlite_invocations.MIGRATIONS", "invocations", 1): (
        "0.3.0", "572de2892e1a67cbaeee9aa1203aa2885318a46e2a0c2df1491f0f9064e043c6"),
    ("sqlite_invocations.MIGRATIONS", "invocations", 2): (
        "0.3.0", "d99f976c379f78010de5ec1db07893a53288e191d452dba8821e4062cc7ee913"),
    ("sqlite_invocations.MIGRATIONS", "invocations", 3): (
        "0.3.0", "82696a2c059223d4481f34701949be7a8af1310fd63083335413b792d3145933"),
    ("sqlite_invocations.MIGRATIONS", "invocations", 4): (
        "0.3.0", "fa09c7cfac9c58d6e211b7962c3a727ce4cc403488cc324651eaee6ca32a71d7"),
    ("sqlite_invocations.MIGRATIONS", "invocations", 5): (
        "0.5.0", "cd7226c28e4728bb5e1fb9af4a1e739c2f33b46fbeba8ac45a9befc9efc09e8f"),
    ("sqlite_artifacts.MIGRATIONS", "artifacts", 1): (
        "0.3.0", "b7c652faeb900065848590b2ba4b92e419cfe0d938b9280d7fe2f07bc76019e3"),
    ("sqlite_artifacts.MIGRATIONS", "artifacts", 2): (
        "0.3.0", "2b3e322f6938ccca7d25e13c744d1741d6ebe90acc173ce162d814bcdfd66330"),
    ("sqlite_artifacts.MIGRATIONS", "artifacts", 3): (
        "0.3.0", "573497abd1e070c59decba3277bd3d110d2c908995fb1f2570eb7ad745ae55ab"),
    # Shipped in 0.4.0 as s3_artifacts.S3_MIGRATIONS; the list moved, the text did not.
    ("sqlite_artifacts.BUCKET_MIGRATIONS", "s3_artifacts", 1): (
        "0.4.0", "dc705a39b52bfbba939c1afff0f494b8a96d85e3d21054486cd38e6b43a99874"),
    ("pg_invocations.MIGRATIONS", "invocations", 1): (
        "0.4.0", "b179d478c50a50d766a06364c368f5d39238353e3baa393ec0f77cf77861aea4"),
    ("pg_invocations.MIGRATIONS", "invocations", 2): (
        "0.5.0", "cd7226c28e4728bb5e1fb9af4a1e739c2f33b46fbeba8ac45a9befc9efc09e8f"),
    ("pg_artifacts.MIGRATIONS", "artifacts", 1): (
        "0.4.0", "48f63423f5cb0b82169904d77dc523709fe245f70c8be24309f3348dc3386191"),
    ("pg_artifacts.MIGRATIONS", "artifacts", 2): (
        "0.4.0", "80276129e714f82d7fdb38b1b07cb66073f1e8e21c9348da90d46e0762a33938"),
}

FIXTURE = Path(__file__).parent / "data" / "migrations_0_5_0.json"


def digest(text: str) -> str:
    return hashlib.sha256(" ".join(text.split()).encode()).hexdigest()


def _steps(migrations: Sequence[Migration] | Sequence[tuple[str, int, object]]
           ) -> dict[tuple[str, int], object]:
    """Each migration's step by (component, version): its SQL, or its function."""
    steps: dict[tuple[str, int], object] = {}
    for m in migrations:
        if isinstance(m, Migration):
            steps[m.component, m.version] = m.sql if m.rewrite is None else m.rewrite
        else:
            steps[m[0], m[1]] = m[2]
    return steps


@pytest.mark.parametrize("key", sorted(RELEASED), ids=lambda k: f"{k[0]}-{k[2]}")
def test_a_released_migration_keeps_its_text(key: tuple[str, str, int]) -> None:
    listed, component, version = key
    release, pinned = RELEASED[key]
    step = _steps(LISTS[listed]).get((component, version))
    changed = (f"{component} migration {version} ({listed}) shipped in {release} and has "
               "changed: databases that release made ran the old text and never run it "
               "again; put it back and add a new migration for the change")
    assert isinstance(step, str) and digest(step) == pinned, changed


def test_the_0_5_0_fixture_holds_the_released_texts() -> None:
    released = json.loads(FIXTURE.read_text())
    texts = {(store, c, v): t
             for store in ("sqlite", "postgresql") for name, rows in released[store].items()
             if name != "bootstrap" for c, v, t in rows}
    pinned = {("postgresql" if listed.startswith("pg_") else "sqlite", c, v): sha
              for (listed, c, v), (_, sha) in RELEASED.items()}
    assert {key: digest(text) for key, text in texts.items()} == pinned
