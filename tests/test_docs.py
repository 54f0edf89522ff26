"""Docs that cannot drift: the README and docs/plugin-api.md show the tested files byte for byte,
every hook is documented, every relative link resolves, and docs/decisions-index.md lists every
decision in docs/decisions.md.

The public names themselves are pinned in tests/test_public_api.py.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

import toolhost
from toolhost import hookspecs

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PLUGIN_API = ROOT / "docs/plugin-api.md"
GREET = ROOT / "examples/toolhost-greet"


def _python_blocks(markdown: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", markdown, flags=re.S)


def _section(markdown: str, heading: str) -> str:
    return markdown.split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]


def test_the_readme_is_a_front_page() -> None:
    assert len(README.read_text().splitlines()) <= 160


def test_the_readme_plugin_is_the_template_byte_for_byte() -> None:
    template = (ROOT / "templates/plugin/src/toolhost_DOMAIN/plugin.py").read_text()
    assert template in _python_blocks(_section(README.read_text(), "## Writing a plugin"))


def test_the_template_plugin_is_twenty_lines_of_code() -> None:
    # Issue #28's measure: lines of plugin code, blank lines (PEP 8's spacing) not counted.
    template = (ROOT / "templates/plugin/src/toolhost_DOMAIN/plugin.py").read_text()
    assert len([line for line in template.splitlines() if line.strip()]) <= 20


def test_the_plugin_api_example_is_the_tested_example_byte_for_byte() -> None:
    example = (GREET / "src/toolhost_greet/plugin.py").read_text()
    assert example in _python_blocks(PLUGIN_API.read_text())


def test_the_plugin_api_test_kit_snippet_is_the_examples_test() -> None:
    test = (GREET / "tests/test_greet.py").read_text()
    assert test in _python_blocks(PLUGIN_API.read_text())


def test_the_plugin_api_conformance_snippet_is_the_examples_test() -> None:
    test = (GREET / "tests/test_conformance.py").read_text()
    assert test in _python_blocks(PLUGIN_API.read_text())


def test_the_written_out_spec_is_the_one_the_typed_example_derives() -> None:
    # Loaded from its file: the host's tests run without the example installed (installed, its
    # tools would join every command that loads all plugins).
    import importlib.util

    found = importlib.util.spec_from_file_location(
        "toolhost_greet_plugin_under_test", GREET / "src/toolhost_greet/plugin.py")
    assert found is not None and found.loader is not None
    plugin = importlib.util.module_from_spec(found)
    found.loader.exec_module(plugin)

    written = next(b for b in _python_blocks(PLUGIN_API.read_text()) if "SPEC = ToolSpec(" in b)
    namespace: dict[str, object] = {}
    exec(compile(written, str(PLUGIN_API), "exec"), namespace)
    assert namespace["SPEC"] == plugin.hello.spec


@pytest.mark.parametrize("doc", ["docs/plugin-api.md", "docs/plugins.md"])
def test_the_plugin_api_names_the_version_the_host_implements(doc: str) -> None:
    # The guide said 1.5 two versions after the host moved on.
    stated = re.findall(r"Plugin API (\d+\.\d+)", (ROOT / doc).read_text())
    assert stated and set(stated) == {toolhost.PLUGIN_API_VERSION}


def test_readme_quick_start_is_exactly_two_commands_and_ci_runs_the_second() -> None:
    readme = README.read_text()
    quick = readme.split("## Quick start", 1)[1].split("```", 2)[1].strip().splitlines()
    assert len(quick) == 2 and "-s demo" in quick[0]
    assert quick[1] in (ROOT / ".ci/run").read_text()


def _anchors(page: Path) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces to -."""
    headings = re.findall(r"^#+ (.*)$", re.sub(r"```.*?```", "", page.read_text(), flags=re.S),
                          flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


def test_every_relative_link_in_the_readme_and_docs_resolves() -> None:
    broken = []
    for page in [README, *sorted((ROOT / "docs").glob("*.md"))]:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            path, _, anchor = target.partition("#")
            if re.match(r"[a-z]+:", path):
                continue
            linked = page.parent / path if path else page
            if not linked.exists() or (anchor and linked.suffix == ".md"
                                       and anchor not in _anchors(linked)):
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert broken == []


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



def _decisions() -> dict[int, str]:
    text = (ROOT / "docs/decisions.md").read_text()
    entries = re.findall(r"^\*\*D(\d+)\. (.*?)\*\*", text, flags=re.M | re.S)
    numbers = [int(n) for n, _ in entries]
    assert len(numbers) == len(set(numbers)), "a decision number is used twice"
    return {int(n): " ".join(title.split()) for n, title in entries}


def _index() -> dict[int, tuple[str, str, str]]:
    text = (ROOT / "docs/decisions-index.md").read_text()
    rows = re.findall(r"^\| D(\d+) \| (.*) \| (.*?) \| (.*?) \|$", text, flags=re.M)
    numbers = [int(n) for n, *_ in rows]
    assert len(numbers) == len(set(numbers)), "the index lists a decision twice"
    return {int(n): (title, status, area) for n, title, status, area in rows}


def test_the_decisions_index_lists_every_entry_with_its_title_and_nothing_more() -> None:
    decisions, index = _decisions(), _index()
    unlisted = sorted(set(decisions) - set(index))
    assert unlisted == [], f"docs/decisions-index.md needs a row for each of {unlisted}"
    assert sorted(set(index) - set(decisions)) == []
    assert {n: row[0] for n, row in index.items()} == decisions


def test_every_amendment_in_the_decisions_is_a_status_in_the_index() -> None:
    decisions, index = _decisions(), _index()
    amended: dict[int, set[int]] = {}
    for n, title in decisions.items():
        for mark in re.findall(r"amends (D\d+(?:-D\d+)?(?:, D\d+(?:-D\d+)?)*)", title):
            for part in mark.split(", "):
                first, *last = (int(x) for x in re.findall(r"\d+", part))
                for old in range(first, (last or [first])[0] + 1):
                    amended.setdefault(old, set()).add(n)
    for n, (_, status, area) in index.items():
        assert area, n
        said = {int(x) for x in re.findall(r"D(\d+)", status)}
        assert status == "in force" if not said else status.startswith("amended by "), n
        assert said <= set(decisions) and all(later > n for later in said), n
        assert amended.get(n, set()) <= said, f"D{n} is amended by {amended[n]}"
