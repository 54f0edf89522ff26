"""WorkspaceHandle.listdir against a straightforward reference walk (``os.walk``, sorted
bytewise) on random trees: the same entries, kinds, sizes, order and truncated flag, with
names sorting either side of ``/`` ('a-b' < 'a/z' < 'a0'), symlinks, files named like temp
files, this process's writes in flight (D450), a lowered limit and a lowered byte budget for
the kept paths (``(limit + 1) * MAX_PATH_BYTES``)."""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from toolhost_workspace import list_files

import toolhost._adapters.fs_workspace as fs_workspace
from toolhost._adapters.fs_workspace import WorkspaceHandle
from toolhost._model.workspace import MAX_PATH_BYTES, ListedEntry, Listing

TEMP_ID = "0123456789abcdef0123456789abcdef"

# '-' and '.' sort before '/', '0' and 'z' after it: bytewise order on the whole path is not
# component-wise order.
NAME = st.text(st.sampled_from("a-.0z"), min_size=1, max_size=3).filter(
    lambda n: n not in (".", ".."))


@st.composite
def trees(draw: st.DrawFn) -> list[tuple[str, str, bool]]:
    """``(kind, relative path, in flight)`` rows; kind is file, directory or symlink."""
    rows: list[tuple[str, str, bool]] = []
    dirs, taken = [""], set()
    for _ in range(draw(st.integers(min_value=0, max_value=30))):
        parent = draw(st.sampled_from(dirs))
        name = draw(st.one_of(NAME, NAME.map(lambda n: f".{n}.{TEMP_ID}.tmp")))
        path = f"{parent}/{name}" if parent else name
        if path in taken:
            continue
        taken.add(path)
        kind = draw(st.sampled_from(["file", "file", "directory", "directory", "symlink"]))
        rows.append((kind, path, kind == "file" and draw(st.booleans())))
        if kind == "directory":
            dirs.append(path)
    return rows


def _reference(root: Path, *, recursive: bool, hidden: set[str]) -> list[ListedEntry]:
    """Every listable entry under ``root`` (not a symlink, not in ``hidden``), bytewise."""
    found = []
    for top, dirs, files in os.walk(root, followlinks=False):
        relative = os.path.relpath(top, root)
        prefix = "" if relative == "." else relative + "/"
        for name in dirs + files:
            path = prefix + name
            info = os.lstat(os.path.join(top, name))
            if path in hidden or stat.S_ISLNK(info.st_mode):
                continue
            if stat.S_ISDIR(info.st_mode):
                found.append(ListedEntry(path, "directory", 0))
            else:
                found.append(ListedEntry(path, "file", info.st_size))
        if not recursive:
            break
    return sorted(found, key=lambda e: e.path.encode())


def _expected(full: list[ListedEntry], limit: int, path_bytes: int) -> Listing:
    """The longest prefix of at most ``limit`` + 1 entries whose paths total at most
    ``(limit + 1) * path_bytes``; its first ``limit`` are listed, truncated if it is not
    the whole of ``full`` or holds more than ``limit``."""
    count = held = 0
    for entry in full:
        held += len(entry.path.encode())
        if count == limit + 1 or held > (limit + 1) * path_bytes:
            break
        count += 1
    return Listing(entries=tuple(full[:min(count, limit)]),
                   truncated=count > limit or count < len(full))


@settings(max_examples=300, deadline=None)
# A directory whose own path fits and whose entries' do not: it holds more than is listed.
@example(rows=[("directory", "zz", False), ("file", "zz/a", False)], recursive=True, limit=1,
         path_bytes=1)
@given(rows=trees(), recursive=st.booleans(),
       limit=st.one_of(st.integers(min_value=1, max_value=3), st.integers(min_value=1, max_value=25)),
       path_bytes=st.sampled_from([1, 2, 3, 4, 6, 12, MAX_PATH_BYTES]))
def test_a_listing_is_the_reference_walks_prefix(
    tmp_path_factory: pytest.TempPathFactory, rows: list[tuple[str, str, bool]],
    recursive: bool, limit: int, path_bytes: int,
) -> None:
    root = tmp_path_factory.mktemp("ws")
    for kind, path, _ in rows:
        if kind == "directory":
            (root / path).mkdir()
        elif kind == "file":
            (root / path).write_bytes(b"x" * (len(path) % 4))
        else:
            (root / path).symlink_to(root if len(path) % 2 else root / rows[0][1])
    hidden = {path for _, path, in_flight in rows if in_flight}
    with contextlib.ExitStack() as stack:
        for path in hidden:
            parent, _, name = path.rpartition("/")
            fd = os.open(root / parent, os.O_RDONLY | os.O_DIRECTORY)
            stack.callback(os.close, fd)
            stack.enter_context(fs_workspace._in_flight(fd, name))
        stack.enter_context(mock.patch.object(fs_workspace, "MAX_PATH_BYTES", path_bytes))
        with WorkspaceHandle(root) as handle:
            listing = handle.listdir(recursive=recursive, limit=limit)
    full = _reference(root, recursive=recursive, hidden=hidden)
    assert listing == _expected(full, limit, path_bytes)
    if path_bytes == MAX_PATH_BYTES:  # no path this long: only the count cuts
        assert listing == Listing(tuple(full[:limit]), len(full) > limit)


@pytest.mark.parametrize(("tree", "listed"), [
    (["a-b", "a/z", "a0"], ["a", "a-b", "a/z", "a0"]),
    (["a/z/y", "a-b/c", "a.b"], ["a", "a-b", "a-b/c", "a.b", "a/z", "a/z/y"]),
])
def test_names_either_side_of_the_separator_sort_on_the_whole_path(
    tmp_path: Path, tree: list[str], listed: list[str],
) -> None:
    with WorkspaceHandle(tmp_path) as handle:
        for path in tree:
            handle.write(path, b"x")
        assert [e.path for e in handle.listdir(recursive=True).entries] == listed


def test_the_handles_byte_cut_never_shortens_list_files_answer() -> None:
    """list_files cuts its answer to maximum_output_bytes, and every entry costs it at least
    its path's bytes: a handle's listing cut where its paths pass (LIMIT + 1) *
    MAX_PATH_BYTES holds every entry the tool could return (its answer is unchanged)."""
    assert list_files.SPEC.maximum_output_bytes <= (list_files.LIMIT + 1) * MAX_PATH_BYTES
