"""Docs that cannot drift: the README's plugin is the tested example, every hook is documented.

The public names themselves are pinned in tests/test_public_api.py.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from toolhost import hookspecs

ROOT = Path(__file__).resolve().parent.parent


def _python_blocks(markdown: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", markdown, flags=re.S)


def test_readme_plugin_is_the_tested_example_byte_for_byte() -> None:
    example = (ROOT / "examples/toolhost-greet/src/toolhost_greet/plugin.py").read_text()
    assert example in _python_blocks((ROOT / "README.md").read_text())


def test_readme_test_kit_snippet_is_the_examples_test() -> None:
    test = (ROOT / "examples/toolhost-greet/tests/test_greet.py").read_text()
    assert test in _python_blocks((ROOT / "README.md").read_text())


def test_readme_conformance_snippet_is_the_examples_test() -> None:
    test = (ROOT / "examples/toolhost-greet/tests/test_conformance.py").read_text()
    assert test in _python_blocks((ROOT / "README.md").read_text())


def test_readme_quick_start_is_exactly_two_commands_and_ci_runs_the_second() -> None:
    readme = (ROOT / "README.md").read_text()
    quick = readme.split("## Quick start", 1)[1].split("```", 2)[1].strip().splitlines()
    assert len(quick) == 2 and "-s demo" in quick[0]
    assert quick[1] in (ROOT / ".ci/run").read_text()


def test_every_hookspec_is_documented_with_its_return() -> None:
    specs = [f for name, f in inspect.getmembers(hookspecs, inspect.isfunction)
             if name.startswith("toolhost_")]
    assert {f.__name__ for f in specs} == {"toolhost_domains", "toolhost_readiness",
                                           "toolhost_settings", "toolhost_tools"}
    # Plugin API 1.0 removed toolhost_messages; the module says so and what replaced it.
    assert "1.0 removed ``toolhost_messages``" in (hookspecs.__doc__ or "")
    assert "1.1 added\n``toolhost_readiness``" in (hookspecs.__doc__ or "")
    for f in specs:
        doc = inspect.getdoc(f) or ""
        assert "Called" in doc and ":return:" in doc, f.__name__

