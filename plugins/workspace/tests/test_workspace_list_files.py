"""workspace.list_files through the pipeline: hard gate 13 as a property over generated
workspaces, the real 1000-entry cap, what an entry carries, the roster, and the failures."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolhost import Settings, Trust
from toolhost.testing import Harness, Run
from toolhost_workspace import list_files, plugin
from toolhost_workspace.list_files import LIMIT
from workspace_support import PLUGINS, Call, remove_tree


def paths(outcome: Any) -> list[str]:
    assert outcome.ok, outcome.to_json()
    return [e["path"] for e in outcome.structured["entries"]]


def bytewise(items: list[str]) -> list[str]:
    return sorted(items, key=lambda p: p.encode("utf-8"))


def oracle(root: Path, start: str = "", *, recursive: bool) -> list[str]:
    """The full listing computed independently: os.walk without following links, bytewise."""
    top = root / start if start else root
    found: list[str] = []
    for here, dirs, files in os.walk(top, followlinks=False):
        rel = os.path.relpath(here, root)
        prefix = "" if rel == "." else rel + "/"
        for name in dirs + files:
            if not os.path.islink(os.path.join(here, name)):
                found.append(prefix + name)
        if not recursive:
            break
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(here, d))]
    return bytewise(found)


# ---------------------------------------------------------------------------- hard gate 13

# Characters either side of "/" (0x2f) in byte order, plus multi-byte ones, so bytewise order
# on the full path differs from component-wise order and from code-point-free sorting.
NAME = st.text(st.sampled_from("-.0Aa_~é日 ") , min_size=1, max_size=3).filter(
    lambda n: n not in (".", ".."))


@st.composite
def workspaces(draw: st.DrawFn) -> list[tuple[str, str, str]]:
    """``(kind, relative path, link target)`` rows: files, directories and symlinks."""
    rows: list[tuple[str, str, str]] = []
    dirs = [""]
    taken: set[str] = set()
    for _ in range(draw(st.integers(min_value=0, max_value=40))):
        parent = draw(st.sampled_from(dirs))
        path = f"{parent}/{draw(NAME)}" if parent else draw(NAME)
        if path in taken:
            continue
        taken.add(path)
        kind = draw(st.sampled_from(["file", "file", "directory", "symlink"]))
        target = ""
        if kind == "symlink":
            target = draw(st.sampled_from([*sorted(taken - {path}), "../outside", "/etc"]))
        rows.append((kind, path, target))
        if kind == "directory":
            dirs.append(path)
    return rows


def build(root: Path, rows: list[tuple[str, str, str]]) -> set[str]:
    """Lay the rows out under root; returns the symlinks' relative paths."""
    links = set()
    for kind, rel, target in rows:
        where = root / rel
        if kind == "file":
            where.write_bytes(b"x" * (len(rel) % 5))
        elif kind == "directory":
            where.mkdir()
        else:
            # Inside targets are relative to the root; a link to a directory is the one a
            # careless walk would follow.
            os.symlink(target if target.startswith(("/", "..")) else root / target, where)
            links.add(rel)
    return links


@pytest.fixture(scope="module")
def prop_host() -> Iterator[Harness]:
    # One host for every example (the kit's toolhost_host is per test, and hypothesis runs
    # many examples in one test); its data directory is a temporary one, removed on close.
    with Harness.over(PLUGINS) as harness:
        yield harness


@settings(max_examples=150)
@given(rows=workspaces(), recursive=st.booleans(), cap=st.integers(min_value=0, max_value=12))
def test_gate_13_ordering_prefix_truncation_and_no_symlinks(
    prop_host: Harness, tmp_path_factory: pytest.TempPathFactory,
    rows: list[tuple[str, str, str]], recursive: bool, cap: int,
) -> None:
    root = tmp_path_factory.mktemp("ws")
    links = build(root, rows)
    run = prop_host.start_run(workspace=root, enabled_tools=["workspace.list_files"])
    args = {"path": "", "recursive": recursive}
    full = prop_host.call("workspace.list_files", args, run=run)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(list_files, "LIMIT", cap)  # the cap, lowered so generated trees exceed it
        capped = prop_host.call("workspace.list_files", args, run=run)
    prop_host.end_run(run)

    whole, part = paths(full), paths(capped)
    assert full.structured is not None and capped.structured is not None
    # Bytewise ascending on the full relative path, no duplicates.
    assert whole == bytewise(whole) and len(set(whole)) == len(whole)
    # A truncated listing is a prefix of the untruncated one, dropped from the tail only.
    assert part == whole[:cap]
    assert capped.structured["truncated"] is (len(whole) > cap)
    assert full.structured["truncated"] is False
    # No entry names a symlink, and nothing reached through one is listed.
    assert not set(whole) & links
    assert not any(os.path.islink(root / p) for p in whole)
    assert not any(p.startswith(link + "/") for p in whole for link in links)
    # And it is exactly the tree, computed independently.
    assert whole == oracle(root, recursive=recursive)


def test_the_real_cap_truncates_at_1000_from_the_tail(call: Call, root: Path) -> None:
    names = [f"f{i:04d}.txt" for i in range(LIMIT + 7)]
    for name in names:
        (root / name).write_bytes(b"")
    outcome = call("workspace.list_files")
    assert LIMIT == 1000
    assert paths(outcome) == names[:1000]
    assert outcome.structured is not None and outcome.structured["truncated"] is True
    assert not outcome.truncated  # the cap keeps it under maximum_output_bytes: no excerpt
    assert outcome.content.endswith(
        "Truncated: these are the first 1000 entries in bytewise order; list a subdirectory "
        "to see the rest.")
    (root / names[-1]).unlink()
    for name in names[1000:-1]:
        (root / name).unlink()
    exact = call("workspace.list_files")
    assert len(paths(exact)) == 1000
    assert exact.structured is not None and exact.structured["truncated"] is False


def test_long_paths_are_cut_from_the_tail_before_the_byte_bound_not_excerpted(
        call: Call, root: Path) -> None:
    """Paths of a thousand bytes pass maximum_output_bytes long before 1000 entries: the
    listing is still a prefix with truncated true, never the pipeline's excerpt of it."""
    deep = root.joinpath(*["d" * 200] * 4)
    deep.mkdir(parents=True)
    for i in range(400):
        (deep / f"{i:03d}{'f' * 200}").write_bytes(b"")
    whole = oracle(root, recursive=True)
    outcome = call("workspace.list_files", recursive=True)
    listed = paths(outcome)
    assert not outcome.truncated  # no excerpt: the structured result is whole
    assert outcome.structured is not None and outcome.structured["truncated"] is True
    assert 100 < len(listed) < len(whole) and listed == whole[:len(listed)]
    limit = list_files.SPEC.maximum_output_bytes
    measured = json.dumps(outcome.structured, sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False).encode()
    assert len(measured) <= limit and len(outcome.content.encode()) <= limit
    assert outcome.content.endswith(f"these are the first {len(listed)} entries in bytewise "
                                    "order; list a subdirectory to see the rest.")


def test_a_listing_that_fits_whole_is_measured_with_truncated_false() -> None:
    """``false`` is a byte longer than ``true``: a whole listing exactly at the bound with
    ``true`` would be a byte over it as returned (a review's repro)."""
    limit = list_files.SPEC.maximum_output_bytes

    def size(value: object) -> int:
        return len(json.dumps(value, sort_keys=True, separators=(",", ":")).encode())

    entries = [{"path": f"d/{i:04d}{'a' * 243}", "kind": "file", "byte_count": 1}
               for i in range(900)]
    entries[-1]["path"] += "b" * (limit - size({"path": ".", "entries": entries,
                                                "truncated": True}))
    fitting = list_files._fitting(".", entries)
    returned = {"path": ".", "entries": entries[:fitting], "truncated": fitting < 900}
    assert size(returned) <= limit and fitting == 899


def test_recursive_truncation_is_a_prefix_across_directories(call: Call, root: Path) -> None:
    for d in ("a", "a-b", "b"):
        (root / d).mkdir()
        for i in range(600):
            (root / d / f"{i:03d}").write_bytes(b"")
    whole = oracle(root, recursive=True)
    assert len(whole) == 1803
    assert paths(call("workspace.list_files", recursive=True)) == whole[:1000]


def test_a_recursive_listing_of_the_deepest_tree(call: Call, root: Path) -> None:
    try:
        assert call("workspace.write_text", path="/".join(["a"] * 2048), content="x").ok
        outcome = call("workspace.list_files", recursive=True)
        # A thousand paths of up to 2000 characters are over list_files' 262144-byte limit:
        # the listing stops at the last entry that fits, a prefix marked truncated, rather
        # than be excerpted by step 12 in the middle of a path.
        listed = paths(outcome)
        assert not outcome.truncated and not outcome.artifacts
        assert outcome.structured is not None and outcome.structured["truncated"] is True
        assert 100 < len(listed) < 1000
        assert listed == ["/".join(["a"] * n) for n in range(1, len(listed) + 1)]
        measured = json.dumps(outcome.structured, sort_keys=True, separators=(",", ":"))
        assert len(measured.encode()) <= list_files.SPEC.maximum_output_bytes
    finally:
        remove_tree(root / "a")


# ---------------------------------------------------------------------------- entries


def test_an_entry_is_path_kind_and_size_and_nothing_else(call: Call, root: Path) -> None:
    (root / "docs").mkdir()
    (root / "docs" / "a.md").write_bytes(b"12345")
    (root / "b.txt").write_bytes(b"")
    top = call("workspace.list_files")
    assert top.structured == {"path": "", "truncated": False, "entries": [
        {"path": "b.txt", "kind": "file", "byte_count": 0},
        {"path": "docs", "kind": "directory", "byte_count": 0},
    ]}
    assert top.content == 'file "b.txt" 0 bytes\ndirectory "docs"'
    sub = call("workspace.list_files", path="docs")
    # Paths are relative to the workspace root, not to the directory listed.
    assert sub.structured is not None and sub.structured["entries"] == [
        {"path": "docs/a.md", "kind": "file", "byte_count": 5}]


def test_bytewise_order_is_not_component_order(call: Call, root: Path) -> None:
    (root / "a").mkdir()
    (root / "a" / "z").write_bytes(b"")
    (root / "a-b").write_bytes(b"")
    (root / "a0").write_bytes(b"")
    (root / "B").write_bytes(b"")
    (root / "é").write_bytes(b"")
    # "-" (0x2d) < "/" (0x2f) < "0" (0x30); upper case before lower; UTF-8 after ASCII.
    assert paths(call("workspace.list_files", recursive=True)) == [
        "B", "a", "a-b", "a/z", "a0", "é"]


def test_no_arguments_list_the_root_not_recursively(call: Call, root: Path) -> None:
    # The body reads both arguments as given: step 4 applied the schema's defaults
    # (path "", recursive false) before it ran, so {} reaches it as the root, one level.
    (root / "d").mkdir()
    (root / "d" / "inner").write_bytes(b"")
    top = call("workspace.list_files")
    assert paths(top) == ["d"]
    assert top.structured is not None and top.structured["path"] == ""
    assert paths(call("workspace.list_files", recursive=True)) == ["d", "d/inner"]
    assert paths(call("workspace.list_files", path="d")) == ["d/inner"]


def test_an_empty_directory(call: Call, root: Path) -> None:
    outcome = call("workspace.list_files")
    assert outcome.structured == {"path": "", "entries": [], "truncated": False}
    assert outcome.content == "No entries under the workspace root."
    (root / "empty").mkdir()
    inner = call("workspace.list_files", path="empty")
    assert inner.content == 'No entries under "empty".'


def test_a_name_that_could_forge_a_line_is_quoted(call: Call, root: Path) -> None:
    (root / 'evil\nfile "x" 1 bytes').write_bytes(b"")
    outcome = call("workspace.list_files")
    assert outcome.content == r'file "evil\nfile \"x\" 1 bytes" 0 bytes'
    assert outcome.output_trust is Trust.EXTERNAL_UNTRUSTED


def test_no_mtime_and_no_checksum_so_the_bytes_are_stable(call: Call, root: Path) -> None:
    (root / "f").write_bytes(b"abc")
    first = call("workspace.list_files")
    os.utime(root / "f", (1, 1))
    second = call("workspace.list_files")
    assert first.structured == second.structured and first.content == second.content


# ---------------------------------------------------------------------------- failures


def test_a_file_is_not_a_directory(call: Call, root: Path) -> None:
    (root / "notes.md").write_bytes(b"x")
    outcome = call("workspace.list_files", path="notes.md")
    assert outcome.failure is not None
    assert outcome.failure.reason_code == "tool.invalid_arguments.not_a_directory"
    assert outcome.content == "That path is a file. Use workspace.read_text."
    assert outcome.failure.retryable is False


def test_a_missing_directory_is_no_such_path(call: Call) -> None:
    outcome = call("workspace.list_files", path="nowhere")
    assert outcome.failure is not None
    assert outcome.failure.reason_code == "tool.not_found.no_such_path"
    assert outcome.content == "No such path in the workspace."


# ---------------------------------------------------------------------------- the roster


def test_registered_but_not_in_the_default_roster() -> None:
    # The host builds the default roster from default_enabled (its own tests cover that).
    roster = {t.spec.name: t.default_enabled for t in plugin.toolhost_tools(Settings())}
    assert roster == {"workspace.read_text": True, "workspace.write_text": True,
                      "workspace.list_files": False}


def test_a_run_that_does_not_name_it_cannot_list(toolhost_host: Harness, root: Path) -> None:
    roster = toolhost_host.start_run(
        workspace=root, enabled_tools=["workspace.read_text", "workspace.write_text"])
    refused = toolhost_host.call("workspace.list_files", {}, run=roster)
    assert refused.failure is not None
    assert refused.failure.reason_code == "tool.permission_denied.not_enabled"
    # The other two run in that run.
    assert toolhost_host.call("workspace.write_text", {"path": "a", "content": ""},
                              run=roster).ok
    assert toolhost_host.call("workspace.read_text", {"path": "a"}, run=roster).ok
    named = toolhost_host.start_run(workspace=root, enabled_tools=["workspace.list_files"])
    assert toolhost_host.call("workspace.list_files", {}, run=named).ok


def test_a_killed_writes_temp_file_is_listed(
    toolhost_host: Harness, call: Call, run: Run, root: Path
) -> None:
    """A process killed between writing its temp file and the rename leaves the temp file in
    the workspace: no write holds it any more, so it is listed like any other file (a listing
    hides a temp name only while its write is in flight)."""
    assert call("workspace.write_text", path="d/kept.md", content="kept").ok
    body = toolhost_host.tool("workspace.write_text")
    context = toolhost_host.context(run=run)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child, killed just before its rename
        os.rename = lambda *a, **k: os._exit(0)
        try:
            body({"path": "d/notes.md", "content": "half"}, context)
        finally:
            os._exit(1)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    [temp] = [n for n in os.listdir(root / "d") if n != "kept.md"]  # the stale temp file
    assert paths(call("workspace.list_files", recursive=True)) == ["d", f"d/{temp}", "d/kept.md"]
    assert paths(call("workspace.list_files", path="d")) == [f"d/{temp}", "d/kept.md"]
