"""WorkspaceHandle.listdir's bounds and what it hides: a recursive listing holds a few
directory fds and O(limit) entries however deep the tree, goes back up only into the
directories it came down from, and hides only this process's writes' temp files in flight."""

from __future__ import annotations

import fcntl
import os
import signal
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import toolhost._adapters.fs_workspace as fs_workspace
from toolhost._adapters.fs_workspace import WorkspaceHandle, remove_tree
from toolhost._model.workspace import MAX_PATH_BYTES
from toolhost.testing import open_file_limit

TEMP_ID = "0123456789abcdef0123456789abcdef"


def _chain(root: Path, depth: int, files: dict[int, list[str]], name: str = "d") -> None:
    """``depth`` nested directories ``name`` under ``root`` (by dir fd: no path is ever longer
    than a name), with ``files[level]`` made in the directory ``level`` levels down."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for level in range(depth + 1):
            for file in files.get(level, []):
                os.close(os.open(file, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
            if level == depth:
                break
            os.mkdir(name, dir_fd=fd)
            child = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
    finally:
        os.close(fd)


@pytest.fixture
def deep_root(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "root"
    root.mkdir()
    yield root
    remove_tree(root)  # deeper than shutil.rmtree recurses: pytest's cleanup would crash


def test_a_tree_deeper_than_the_fd_limit_is_listed_whole(deep_root: Path) -> None:
    """The walk held one fd a level: 1,000 levels under a limit of 64 spare fds ran out (the
    listing failed, or stopped silently where the opens did)."""
    depth = 1000
    _chain(deep_root, depth, {0: ["top.txt"], 500: ["mid.txt"], depth: ["bottom.txt"]})
    chain = ["/".join(["d"] * level) for level in range(1, depth + 1)]
    expected = sorted([*chain, "top.txt", chain[499] + "/mid.txt", chain[-1] + "/bottom.txt"],
                      key=str.encode)
    with WorkspaceHandle(deep_root) as handle, open_file_limit() as limit:
        assert limit < depth
        full = handle.listdir(recursive=True, limit=5000)
        capped = handle.listdir(recursive=True, limit=700)
        below = handle.listdir("d/d", recursive=True, limit=5000)
    assert [e.path for e in full.entries] == expected and not full.truncated
    kinds = {e.path: (e.kind, e.byte_count) for e in full.entries}
    assert kinds[chain[-1]] == ("directory", 0)
    assert kinds[chain[-1] + "/bottom.txt"] == ("file", 0)
    assert capped.truncated and list(capped.entries) == list(full.entries[:700])
    assert [e.path for e in below.entries] == [p for p in expected if p.startswith("d/d/")]


def test_a_listing_needs_a_few_spare_fds_however_deep_it_climbs(deep_root: Path) -> None:
    """A constant, not one a level (D381): 300 levels, each with files sorting after its
    subdirectory (measured on the way back up, by ``..``), listed with 6 fds to spare."""
    depth = 300
    _chain(deep_root, depth, {level: ["e.txt", "f.txt"] for level in range(depth + 1)})
    with WorkspaceHandle(deep_root) as handle:
        handle.listdir()  # the root fd, opened on first use, is not the listing's
        with open_file_limit(spare=6):
            listing = handle.listdir(recursive=True, limit=5000)
    assert len(listing.entries) == 3 * depth + 2 and not listing.truncated
    assert listing.entries[-1].path == "f.txt"


def test_listing_memory_is_bounded_by_the_limit_not_the_depth(deep_root: Path) -> None:
    """Each level held up to ``limit`` + 1 entries while the walk was below it: 100 levels of
    100 files on the way down, listed with a limit of 100, held some 10,000."""
    files = [f"f{i:03d}.txt" for i in range(100)]
    _chain(deep_root, 150, dict.fromkeys(range(151), files))
    with WorkspaceHandle(deep_root) as handle:
        tracemalloc.start()
        try:
            listing = handle.listdir(recursive=True, limit=100)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    # The chain of directories sorts first ("d" < "f"): the listing is its first 100 levels.
    assert [e.path for e in listing.entries] == ["/".join(["d"] * n) for n in range(1, 101)]
    assert listing.truncated
    assert peak < 1 << 19, f"{peak} bytes at the peak"


def test_listing_memory_is_bounded_when_paths_are_longer_than_a_tool_can_name(
    deep_root: Path,
) -> None:
    """A path has no length bound of its own: 255-byte names 300 levels deep, listed with a
    limit of 200, held 201 paths of up to 51 KB (5 MB, 10 MB at the peak; 1,000 such levels
    under the tool's 1,000: 246 MiB). The kept paths total at most (limit + 1) paths as long
    as a tool can name; the listing is the prefix that fits, and says it was cut."""
    limit, name = 200, "n" * 255
    _chain(deep_root, 300, {}, name)
    budget = (limit + 1) * MAX_PATH_BYTES
    chain, held = [], 0
    while held + (len(chain) + 1) * 256 - 1 <= budget:
        chain.append("/".join([name] * (len(chain) + 1)))
        held += len(chain[-1])
    with WorkspaceHandle(deep_root) as handle:
        tracemalloc.start()
        try:
            listing = handle.listdir(recursive=True, limit=limit)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert peak < 3 * budget, f"{peak} bytes at the peak"
    assert len(chain) == 79
    assert [e.path for e in listing.entries] == chain and listing.truncated


def _on_scan(monkeypatch: pytest.MonkeyPatch, marker: str, act: Any) -> None:
    """Run ``act`` once, right after the walk has read the directory holding ``marker``
    (before it goes on): what a command renaming things beside the walk does, at a known
    moment."""
    listable = fs_workspace._listable
    done: list[bool] = []

    def reading(*args: Any) -> Iterator[os.DirEntry[str]]:
        listed = list(listable(*args))
        if not done and marker in (e.name for e in listed):
            done.append(True)
            act()
        return iter(listed)

    monkeypatch.setattr(fs_workspace, "_listable", reading)


def test_a_directory_swapped_for_a_symlink_after_it_was_listed_is_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = tmp_path / "root"
    (root / "a" / "b").mkdir(parents=True)
    (root / "z").mkdir()
    (root / "z" / "y.txt").write_bytes(b"y")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_bytes(b"secret")

    def swap() -> None:
        os.rename(root / "a", tmp_path / "a-moved")
        os.symlink(tmp_path / "outside", root / "a")

    _on_scan(monkeypatch, "z", swap)
    with WorkspaceHandle(root) as handle:
        listing = handle.listdir(recursive=True)
    # "a" was a directory when listed; what is there now is not entered.
    assert [e.path for e in listing.entries] == ["a", "z", "z/y.txt"]


def test_the_walk_never_climbs_into_where_a_moved_directory_went(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The walk stands in a/b/c1 when c1 is moved out of the root: its ``..`` is not a/b any
    more, and the c2 beside where c1 went is not the one to list. The walk comes down again
    from the root and lists a/b/c2."""
    root = tmp_path / "root"
    for name in ("c1", "c2"):
        (root / "a" / "b" / name).mkdir(parents=True)
        (root / "a" / "b" / name / f"{name}.txt").write_bytes(b"in")
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "c2").mkdir(parents=True)
    (elsewhere / "c2" / "secret.txt").write_bytes(b"secret")
    _on_scan(monkeypatch, "c1.txt", lambda: os.rename(root / "a" / "b" / "c1", elsewhere / "c1"))
    with WorkspaceHandle(root) as handle:
        listing = handle.listdir(recursive=True)
    assert [e.path for e in listing.entries] == [
        "a", "a/b", "a/b/c1", "a/b/c1/c1.txt", "a/b/c2", "a/b/c2/c2.txt"]


def test_a_file_named_like_a_temp_file_is_listed(tmp_path: Path) -> None:
    """A command (or anyone) can name a file as the handle names its temp files; a listing
    hid every such name, so a command could hide a file from list_files."""
    root = tmp_path / "root"
    (root / "d").mkdir(parents=True)
    hidden = f".notes.md.{TEMP_ID}.tmp"
    (root / hidden).write_bytes(b"look at me")
    (root / "d" / f".x.{TEMP_ID}.tmp").write_bytes(b"")
    with WorkspaceHandle(root) as handle:
        flat = handle.listdir()
        deep = handle.listdir(recursive=True)
        assert handle.read(hidden) == b"look at me"
    assert [(e.path, e.byte_count) for e in flat.entries] == [(hidden, 10), ("d", 0)]
    assert [e.path for e in deep.entries] == [hidden, "d", f"d/.x.{TEMP_ID}.tmp"]


def _paused_child(work: Callable[[Callable[[], None]], None]) -> int:
    """Fork a child that runs ``work``, which calls the function it is given once it got where
    the test needs it: the child tells the parent and waits there until killed. Its pid, once
    it got there."""
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.close(ready_r)

            def ready() -> None:
                os.write(ready_w, b"x")
                signal.pause()

            work(ready)
        finally:
            os._exit(1)
    os.close(ready_w)
    try:
        assert os.read(ready_r, 1) == b"x"
    finally:
        os.close(ready_r)
    return pid


def _listed_while(pid: int, root: Path) -> list[tuple[str, int]]:
    """A recursive listing of ``root`` while the child ``pid`` waits, then the child killed."""
    try:
        with WorkspaceHandle(root) as handle:
            return [(e.path, e.byte_count) for e in handle.listdir(recursive=True).entries]
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def test_a_temp_named_file_another_process_holds_locked_is_listed(tmp_path: Path) -> None:
    """A command (or any process writing into the workspace) can name a file as the handle
    names its temp files and hold an flock on it, as a write in flight did: the listing hid it
    for as long as that process (or a child it left behind) lived."""
    root = tmp_path / "root"
    (root / "d").mkdir(parents=True)
    forged = f"d/.notes.md.{TEMP_ID}.tmp"
    (root / forged).write_bytes(b"look at me")

    def lock_it(ready: Callable[[], None]) -> None:
        fcntl.flock(os.open(root / forged, os.O_RDONLY), fcntl.LOCK_EX)
        ready()

    assert _listed_while(_paused_child(lock_it), root) == [("d", 0), (forged, 10)]


def test_another_processs_write_in_flight_is_listed(tmp_path: Path) -> None:
    """What another process's write has in flight is not known here: its temp file is listed
    like any file (so nothing a workspace user can make hides one), as it is once that writer
    is killed before its rename."""
    root = tmp_path / "root"
    root.mkdir()
    handle = WorkspaceHandle(root)
    handle.write("d/kept.txt", b"kept")

    def write_until_the_rename(ready: Callable[[], None]) -> None:
        os.rename = lambda *_, **__: ready()
        handle.write("d/notes.md", b"half written")

    pid = _paused_child(write_until_the_rename)
    [temp] = [n for n in os.listdir(root / "d") if n.endswith(".tmp")]
    assert temp.startswith(".notes.md.")
    expected = [("d", 0), (f"d/{temp}", 12), ("d/kept.txt", 4)]
    assert _listed_while(pid, root) == expected
    assert [(e.path, e.byte_count) for e in handle.listdir(recursive=True).entries] == expected
    handle.close()


def test_the_handles_own_write_in_flight_is_not_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A listing made while the same handle's write, or another handle's of this process on
    the same directory, is between its temp file and its rename (here, during its fsync)
    shows neither the temp file nor the file yet."""
    root = tmp_path / "root"
    root.mkdir()
    handle = WorkspaceHandle(root)
    real_fsync = os.fsync
    seen: list[list[str]] = []

    def listing_meanwhile(fd: int) -> None:
        if not seen:
            assert os.path.basename(os.readlink(f"/proc/self/fd/{fd}")).startswith(".a.md.")
            seen.append([e.path for e in handle.listdir(recursive=True).entries])
            with WorkspaceHandle(root) as other:
                seen.append([e.path for e in other.listdir(recursive=True).entries])
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", listing_meanwhile)
    handle.write("a.md", b"text")
    monkeypatch.undo()
    assert seen == [[], []]
    assert [e.path for e in handle.listdir().entries] == ["a.md"]
    handle.close()


def test_a_listing_opens_no_temp_named_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A command's thousands of temp-named files cost a listing nothing more than other files:
    opening and locking 100,000 of them took a listing of 10 entries over a second, and the
    listing still shows them."""
    root = tmp_path / "root"
    root.mkdir()
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i in range(2000):
            os.close(os.open(f".n.{i:032x}.tmp", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    finally:
        os.close(fd)
    (root / "a").write_bytes(b"a")
    real_open = os.open
    opened: list[str] = []

    def counted(path: Any, *args: Any, **kwargs: Any) -> int:
        opened.append(str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", counted)
    with WorkspaceHandle(root) as handle:
        listing = handle.listdir(limit=10)
    monkeypatch.undo()
    assert [e.path for e in listing.entries] == [f".n.{i:032x}.tmp" for i in range(10)]
    assert listing.truncated
    assert not [name for name in opened if name.endswith(".tmp")]


def test_a_kept_file_that_vanished_leaves_the_listing_truncated() -> None:
    """Entries past the limit were met and not kept; a kept file removed before the walk
    measured it must not make the listing look whole (it said truncated=False, with the
    entries past the limit never met again)."""
    kept = fs_workspace._Kept(2)
    for name in ("a", "b", "c", "d", "e"):
        kept.add(name.encode(), fs_workspace.ListedEntry(name, "file", 0))
    assert kept.truncated
    kept.sized(b"b", None)  # removed before it was measured
    assert [entry.path for _, entry, _ in kept.items] == ["a", "c"]
    assert kept.truncated
