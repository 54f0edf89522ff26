"""The noxfile's placement of the host's test files between the two Pythons (D317): every file
it names exists (a renamed one would run on both, silently), none is named for both, and each
Python it names is one the host's tests run on. Read from the noxfile's text: nox is not
installed where these tests run."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _assigned(name: str) -> Any:
    tree = ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8"))
    for node in tree.body:
        targets = (node.targets if isinstance(node, ast.Assign) else
                   [node.target] if isinstance(node, ast.AnnAssign) else [])
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            assert node.value is not None
            return ast.literal_eval(node.value)
    raise AssertionError(f"noxfile.py assigns no {name}")


def test_every_file_placed_on_one_python_exists_and_is_placed_once() -> None:
    placed: dict[str, tuple[str, ...]] = _assigned("ONE_PYTHON_ONLY")
    assert set(placed) == set(_assigned("HOST_PYTHONS"))
    paths = [path for version in placed.values() for path in version]
    assert [p for p in paths if not (ROOT / p).exists()] == []
    assert len(paths) == len(set(paths))
    # A directory named for one Python and a file under it for the other would run on neither.
    assert [(a, b) for a in paths for b in paths if a != b and b.startswith(a + "/")] == []
