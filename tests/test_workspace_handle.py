"""WorkspaceHandle containment: every case of issue #4's security list is refused, and nothing
outside the root is read or written. Each test fails if containment is loosened."""

from __future__ import annotations

import contextlib
import errno
import os
import resource
import signal
import socket
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolhost._adapters.fs_workspace import WorkspaceHandle, remove_tree
from toolhost._model.workspace import (
    Provenance,
    WorkspaceEscape,
    WorkspaceIsDirectory,
    WorkspaceNotDirectory,
    WorkspaceNotFound,
    WorkspaceUnavailable,
    WorkspaceUsage,
)

SECRET = b"outside the root\n"


@pytest.fixture
def layout(tmp_path: Path) -> Iterator[tuple[WorkspaceHandle, Path]]:
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "secret").write_bytes(SECRET)
    evil = tmp_path / "root-evil"
    evil.mkdir()
    (evil / "secret").write_bytes(SECRET)
    (root / "inside.txt").write_bytes(b"inside\n")
    handle = WorkspaceHandle(root)
    yield handle, tmp_path
    handle.close()


def snapshot(base: Path) -> dict[str, bytes | str]:
    """Everything outside the root, so a test can assert nothing there changed."""
    out: dict[str, bytes | str] = {}
    for p in sorted(base.rglob("*")):
        if "root" in p.relative_to(base).parts[:1] and p.relative_to(base).parts[0] == "root":
            continue
        out[str(p.relative_to(base))] = p.read_bytes() if p.is_file() and not p.is_symlink() else "d"
    return out


ESCAPES = [
    "../secret",
    "a/../../secret",
    "/etc/passwd",
    "./inside.txt",
    "a//b",
    "a/",
    "a\x00b",
    "x" * 4097,
    "../root-evil/secret",  # the prefix-comparison escape: a sibling sharing the root's prefix
    "\uff0e\uff0e/secret",  # fullwidth full stops: NFKC '..'
    "\u2025/secret",  # TWO DOT LEADER: NFKC '..'
    "a/\u2024\u2024/b",  # ONE DOT LEADER twice
    "..\\secret",
    "",
    "a\nb",
]


@pytest.mark.parametrize("path", ESCAPES)
def test_read_refuses(layout: tuple[WorkspaceHandle, Path], path: str) -> None:
    handle, _ = layout
    with pytest.raises(WorkspaceEscape):
        handle.read(path)


@pytest.mark.parametrize("path", ESCAPES)
def test_write_refuses_and_writes_nothing_outside(layout: tuple[WorkspaceHandle, Path],
                                                  path: str) -> None:
    handle, base = layout
    before = snapshot(base)
    with pytest.raises(WorkspaceEscape):
        handle.write(path, b"pwned")
    assert snapshot(base) == before


@pytest.mark.parametrize("path", [p for p in ESCAPES if p != ""])
def test_listdir_refuses(layout: tuple[WorkspaceHandle, Path], path: str) -> None:
    handle, _ = layout
    with pytest.raises(WorkspaceEscape):
        handle.listdir(path)


def test_non_strings_and_over_long_byte_paths_are_refused(
    layout: tuple[WorkspaceHandle, Path],
) -> None:
    handle, _ = layout
    for bad in (None, 3, b"inside.txt", ["inside.txt"]):
        with pytest.raises(WorkspaceEscape):
            handle.read(bad)  # type: ignore[arg-type]
    with pytest.raises(WorkspaceEscape, match="4096 bytes"):
        handle.read("é" * 2049)  # 2049 characters, 4098 bytes
    with pytest.raises(WorkspaceEscape):
        handle.read("\ud800")  # a lone surrogate is not Unicode text


def test_a_symlink_pointing_outside_is_refused(layout: tuple[WorkspaceHandle, Path]) -> None:
    handle, base = layout
    (handle.root / "out").symlink_to(base / "secret")
    with pytest.raises(WorkspaceEscape):
        handle.read("out")
    before = snapshot(base)
    with pytest.raises(WorkspaceEscape):
        handle.write("out", b"pwned")
    assert snapshot(base) == before and (base / "secret").read_bytes() == SECRET


def test_a_symlink_pointing_inside_is_still_refused(layout: tuple[WorkspaceHandle, Path]) -> None:
    handle, _ = layout
    (handle.root / "alias").symlink_to(handle.root / "inside.txt")
    with pytest.raises(WorkspaceEscape):
        handle.read("alias")
    assert [e.path for e in handle.listdir().entries] == ["inside.txt"]  # not listed either


def test_a_symlinked_parent_directory_is_refused(layout: tuple[WorkspaceHandle, Path]) -> None:
    handle, base = layout
    (handle.root / "d").symlink_to(base / "root-evil", target_is_directory=True)
    with pytest.raises(WorkspaceEscape):
        handle.read("d/secret")
    before = snapshot(base)
    with pytest.raises(WorkspaceEscape):
        handle.write("d/new.txt", b"pwned")
    with pytest.raises(WorkspaceEscape):
        handle.listdir("d")
    assert snapshot(base) == before and not (base / "root-evil" / "new.txt").exists()


def test_a_path_swapped_for_a_symlink_between_two_calls(
    layout: tuple[WorkspaceHandle, Path],
) -> None:
    handle, base = layout
    handle.write("sub/file.txt", b"mine")
    assert handle.read("sub/file.txt") == b"mine"
    # Swap the parent directory for a symlink to outside, then the file itself.
    (handle.root / "sub" / "file.txt").unlink()
    (handle.root / "sub").rmdir()
    (handle.root / "sub").symlink_to(base / "root-evil", target_is_directory=True)
    with pytest.raises(WorkspaceEscape):
        handle.read("sub/secret")
    with pytest.raises(WorkspaceEscape):
        handle.write("sub/file.txt", b"pwned")
    (handle.root / "sub").unlink()
    handle.write("file.txt", b"mine")
    (handle.root / "file.txt").unlink()
    (handle.root / "file.txt").symlink_to(base / "secret")
    with pytest.raises(WorkspaceEscape):
        handle.read("file.txt")
    assert (base / "secret").read_bytes() == SECRET
    assert handle.provenance("file.txt") is Provenance.UNKNOWN


def test_a_symlink_swapped_in_after_the_check_is_replaced_not_followed(
    layout: tuple[WorkspaceHandle, Path], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The race the advisories describe: between the type check and the rename."""
    handle, base = layout
    real_rename = os.rename

    def swap_then_rename(src: str, dst: str, **kw: int) -> None:
        os.symlink(base / "secret", dst, dir_fd=kw["dst_dir_fd"])
        real_rename(src, dst, **kw)

    monkeypatch.setattr(os, "rename", swap_then_rename)
    handle.write("race.txt", b"mine")
    monkeypatch.undo()
    assert (base / "secret").read_bytes() == SECRET
    assert not (handle.root / "race.txt").is_symlink()
    assert handle.read("race.txt") == b"mine"


def _in_child_as_nobody(fn: object) -> int:
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 3
        try:
            os.setgid(65534)
            os.setuid(65534)
            fn()  # type: ignore[operator]
            code = 1
        except WorkspaceEscape:
            code = 0
        except BaseException:
            code = 2
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def test_a_file_that_is_not_readable_is_refused(layout: tuple[WorkspaceHandle, Path]) -> None:
    handle, _ = layout
    locked = handle.root / "locked.txt"
    locked.write_bytes(b"private")
    locked.chmod(0)
    if os.geteuid() == 0:
        # root reads anything; drop to nobody in a child, with the handle's fd inherited.
        assert _in_child_as_nobody(lambda: handle.read("locked.txt")) == 0
    else:
        with pytest.raises(WorkspaceEscape, match="not readable"):
            handle.read("locked.txt")


def _alarm(seconds: int) -> None:
    def fail(*_: object) -> None:
        raise AssertionError("the handle blocked")

    signal.signal(signal.SIGALRM, fail)
    signal.alarm(seconds)


def test_a_fifo_is_refused_and_never_blocks(layout: tuple[WorkspaceHandle, Path]) -> None:
    handle, _ = layout
    os.mkfifo(handle.root / "pipe")
    _alarm(5)
    try:
        with pytest.raises(WorkspaceEscape, match="not a regular file"):
            handle.read("pipe")
        with pytest.raises(WorkspaceEscape, match="not a regular file"):
            handle.write("pipe", b"x")
    finally:
        signal.alarm(0)
    assert handle.listdir().entries[0].path == "inside.txt"  # the FIFO is not listed


def test_a_device_and_a_socket_are_refused(layout: tuple[WorkspaceHandle, Path]) -> None:
    handle, _ = layout
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(handle.root / "sock"))
    try:
        with pytest.raises(WorkspaceEscape, match="not a regular file"):
            handle.read("sock")
    finally:
        sock.close()
    if os.geteuid() == 0:
        os.mknod(handle.root / "null", stat.S_IFCHR | 0o600, os.makedev(1, 3))
        with pytest.raises(WorkspaceEscape, match="not a regular file"):
            handle.read("null")


# ------------------------------------------------------------------ ordinary behaviour


def test_write_creates_parents_atomically_and_reports_created(
    layout: tuple[WorkspaceHandle, Path],
) -> None:
    handle, _ = layout
    first = handle.write("a/b/c.txt", b"one")
    second = handle.write("a/b/c.txt", b"two")
    assert (first.created, second.created) == (True, False)
    assert (handle.root / "a" / "b" / "c.txt").read_bytes() == b"two"
    assert [p.name for p in (handle.root / "a" / "b").iterdir()] == ["c.txt"]  # no temp left


def test_not_found_directory_and_file_kinds(layout: tuple[WorkspaceHandle, Path]) -> None:
    handle, _ = layout
    handle.write("dir/f.txt", b"x")
    with pytest.raises(WorkspaceNotFound):
        handle.read("missing.txt")
    with pytest.raises(WorkspaceNotFound):
        handle.read("nodir/missing.txt")
    with pytest.raises(WorkspaceIsDirectory):
        handle.read("dir")
    with pytest.raises(WorkspaceIsDirectory):
        handle.write("dir", b"x")
    with pytest.raises(WorkspaceNotDirectory):
        handle.listdir("inside.txt")
    with pytest.raises(WorkspaceNotFound):
        handle.read("inside.txt/x")  # a file on the way: that path does not exist


def test_provenance_is_established_by_writes_only(layout: tuple[WorkspaceHandle, Path]) -> None:
    handle, _ = layout
    assert handle.provenance("inside.txt") is Provenance.UNKNOWN
    handle.read("inside.txt")
    assert handle.provenance("inside.txt") is Provenance.UNKNOWN  # reads never launder
    handle.write("a.md", b"mine")
    assert handle.provenance("a.md") is Provenance.TOOL_WRITTEN
    handle.write("s.md", b"theirs", provenance=Provenance.SANDBOX_WRITTEN)
    assert handle.provenance("s.md") is Provenance.SANDBOX_WRITTEN
    (handle.root / "a.md").write_bytes(b"replaced by someone else")
    assert handle.provenance("a.md") is Provenance.UNKNOWN


def test_listing_is_bytewise_capped_and_a_prefix(layout: tuple[WorkspaceHandle, Path]) -> None:
    handle, _ = layout
    for name in ["b", "a-b", "a/c", "a/b", "Z", "é", "a.b"]:
        handle.write(f"t/{name}.txt" if "/" not in name else f"t/{name}", b"1")
    full = handle.listdir("t", recursive=True)
    paths = [e.path for e in full.entries]
    assert paths == sorted(paths, key=lambda p: p.encode())
    assert paths[:3] == ["t/Z.txt", "t/a", "t/a-b.txt"]  # 'Z' < 'a'; '-' < '/'... bytewise
    capped = handle.listdir("t", recursive=True, limit=3)
    assert capped.truncated and [e.path for e in capped.entries] == paths[:3]
    assert not full.truncated
    flat = handle.listdir("t")
    assert [e.kind for e in flat.entries if e.path == "t/a"] == ["directory"]
    assert all("/" not in e.path[2:] for e in flat.entries)


names = st.text(alphabet="ab-._Z", min_size=1, max_size=4).filter(
    lambda s: s not in (".", "..") and not s.startswith(".")
)


@settings(max_examples=60)
@given(tree=st.lists(st.lists(names, min_size=1, max_size=3), min_size=1, max_size=25),
       links=st.lists(names, max_size=3), limit=st.integers(min_value=1, max_value=30))
def test_listing_property(tmp_path_factory: pytest.TempPathFactory, tree: list[list[str]],
                          links: list[str], limit: int) -> None:
    root = tmp_path_factory.mktemp("ws")
    with WorkspaceHandle(root) as handle:
        for parts in tree:
            # A name already used as the other kind is skipped.
            with contextlib.suppress(WorkspaceIsDirectory, WorkspaceNotFound):
                handle.write("/".join(parts), b"x")
        for name in links:
            target = root / f"{name}.link"
            if not target.exists() and not target.is_symlink():
                target.symlink_to(root)
        full = handle.listdir(recursive=True, limit=10_000)
        keys = [e.path.encode() for e in full.entries]
        assert keys == sorted(keys) and len(set(keys)) == len(keys)
        assert not any(e.path.endswith(".link") for e in full.entries)
        capped = handle.listdir(recursive=True, limit=limit)
        assert list(capped.entries) == list(full.entries[:limit])
        assert capped.truncated == (len(full.entries) > limit)


@pytest.mark.parametrize("path", ["n" * 256, "n" * 256 + "/x", "d/" + "n" * 256])
def test_a_component_longer_than_the_filesystem_allows_is_refused(
    layout: tuple[WorkspaceHandle, Path], path: str,
) -> None:
    handle, _ = layout
    (handle.root / "d").mkdir()
    for operation in (handle.read, lambda p: handle.write(p, b"x"), handle.listdir):
        with pytest.raises(WorkspaceEscape, match="longer than the filesystem allows"):
            operation(path)


def test_deep_trees_are_listed_and_discarded_without_recursion(tmp_path: Path) -> None:
    # About 2000 levels: as deep as a 4096-byte path allows, past the recursion limit.
    depth = 2000
    deep = "/".join(["a"] * depth) + "/f.txt"
    handle = WorkspaceHandle(tmp_path / "ws", owned=True)
    handle.write(deep, b"x")
    listing = handle.listdir(recursive=True, limit=5000)
    assert len(listing.entries) == depth + 1 and listing.entries[-1].path == deep
    handle.discard()
    assert not (tmp_path / "ws").exists()


def test_a_fifo_is_not_a_directory_to_list(layout: tuple[WorkspaceHandle, Path]) -> None:
    handle, _ = layout
    os.mkfifo(handle.root / "pipe")
    with pytest.raises(WorkspaceEscape, match="not a regular file"):
        handle.listdir("pipe")


def test_an_edit_that_restores_size_and_mtime_still_loses_provenance(
    layout: tuple[WorkspaceHandle, Path],
) -> None:
    handle, _ = layout
    handle.write("a.md", b"mine")
    path = handle.root / "a.md"
    before = path.stat()
    path.write_bytes(b"evil")  # same size
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # same mtime
    assert handle.provenance("a.md") is Provenance.UNKNOWN  # ctime moved


# ------------------------------------------------------------------ reliability (issue 10)


def _longest_prefix(name: str, limit: int) -> str:
    """The longest prefix of ``name`` whose UTF-8 form fits in ``limit`` bytes."""
    out = ""
    for character in name:
        if len((out + character).encode("utf-8")) > limit:
            break
        out += character
    return out


@pytest.mark.parametrize("name", [
    "漢" * 80,  # 240 bytes: the case
    "漢" * 85,  # 255 bytes: NAME_MAX exactly
    "a" + "漢" * 84,  # 253 bytes: a 200-byte cut falls inside a character
    "é" * 127,  # 254 bytes, two-byte characters
    "😀" * 63 + "abc",  # 255 bytes, four-byte characters
], ids=["cjk-240", "cjk-255", "cut-inside", "two-byte", "four-byte"])
def test_a_legal_multibyte_name_is_written_and_its_temp_name_fits(
    layout: tuple[WorkspaceHandle, Path], monkeypatch: pytest.MonkeyPatch, name: str,
) -> None:
    """Defect 1: the temp name is bounded in bytes, never splitting a character."""
    handle, _ = layout
    assert len(name.encode("utf-8")) <= 255
    temps: list[str] = []
    real_open = os.open

    def spy(path: str, flags: int, mode: int = 0o777, **kw: int | None) -> int:
        if flags & os.O_CREAT:
            temps.append(path)
        return real_open(path, flags, mode, **kw)

    monkeypatch.setattr(os, "open", spy)
    result = handle.write(name, b"text")
    monkeypatch.undo()
    assert (result.path, result.byte_count, result.created) == (name, 4, True)
    assert handle.read(name) == b"text"
    [temp] = temps
    assert len(temp.encode("utf-8")) <= 255
    assert temp.startswith("." + _longest_prefix(name, 200) + ".")
    assert sorted(os.listdir(handle.root)) == sorted(["inside.txt", name])


def test_a_hard_link_to_a_file_outside_the_root_is_not_read(
    layout: tuple[WorkspaceHandle, Path],
) -> None:
    handle, base = layout
    os.link(base / "secret", handle.root / "linked.txt")
    with pytest.raises(WorkspaceEscape, match=r"^file has other hard links$"):
        handle.read("linked.txt")
    with pytest.raises(WorkspaceEscape, match=r"^file has other hard links$"):
        list(handle.read_chunks("linked.txt"))
    # A write replaces the name inside the root; the file outside is untouched.
    handle.write("linked.txt", b"mine")
    assert (base / "secret").read_bytes() == SECRET
    assert handle.read("linked.txt") == b"mine"


def _fail_on(monkeypatch: pytest.MonkeyPatch, name: str, code: int,
             when: object = lambda *a, **k: True) -> None:
    real = getattr(os, name)

    def failing(*args: object, **kwargs: object) -> object:
        if when(*args, **kwargs):  # type: ignore[operator]
            raise OSError(code, os.strerror(code))
        return real(*args, **kwargs)

    monkeypatch.setattr(os, name, failing)


def _creating(path: object, flags: int, *a: object, **k: object) -> bool:
    return bool(flags & os.O_CREAT)


@pytest.mark.parametrize(("where", "code", "error", "message"), [
    ("write", errno.ENOSPC, WorkspaceUnavailable, "no space is left for the workspace"),
    ("write", errno.EDQUOT, WorkspaceUnavailable, "no space is left for the workspace"),
    ("fsync", errno.EIO, WorkspaceUnavailable, "the workspace could not be used (EIO)"),
    ("open", errno.EMFILE, WorkspaceUnavailable, "too many files are open"),
    ("open", errno.ENFILE, WorkspaceUnavailable, "too many files are open"),
    ("open", errno.ENOSPC, WorkspaceUnavailable, "no space is left for the workspace"),
    ("open", errno.EACCES, WorkspaceEscape, "a directory on the path is not writable"),
    ("open", errno.EROFS, WorkspaceUnavailable, "the workspace is on a read-only filesystem"),
    ("mkdir", errno.ENOSPC, WorkspaceUnavailable, "no space is left for the workspace"),
    ("mkdir", errno.EACCES, WorkspaceEscape, "a directory on the path is not writable"),
    ("rename", errno.ENOSPC, WorkspaceUnavailable, "no space is left for the workspace"),
])
def test_a_write_that_fails_leaves_nothing_and_says_why(
    layout: tuple[WorkspaceHandle, Path], monkeypatch: pytest.MonkeyPatch,
    where: str, code: int, error: type[Exception], message: str,
) -> None:
    """EACCES, ENOSPC, EMFILE and the like: a workspace exception with one static reason, and
    no directory or temp file left behind. ``a`` exists already; ``a/b/c`` is created."""
    handle, base = layout
    (handle.root / "a").mkdir()
    before = snapshot(base)
    inside = sorted(p.name for p in handle.root.rglob("*"))
    if where == "mkdir":  # the second directory the write creates
        _fail_on(monkeypatch, "mkdir", code, lambda name, *a, **k: name == "c")
    elif where == "open":
        _fail_on(monkeypatch, "open", code, _creating)
    else:
        _fail_on(monkeypatch, where, code)
    with pytest.raises(error) as info:
        handle.write("a/b/c/d.txt", b"data")
    monkeypatch.undo()
    assert info.value.args == (message,)
    assert sorted(p.name for p in handle.root.rglob("*")) == inside  # b and c removed
    assert snapshot(base) == before
    # The handle still works afterwards.
    handle.write("a/b/c/d.txt", b"data")
    assert handle.read("a/b/c/d.txt") == b"data"


def test_a_write_into_a_directory_it_may_not_write_is_refused_for_real(
    layout: tuple[WorkspaceHandle, Path],
) -> None:
    """A real EACCES (as nobody: root writes anywhere) is the workspace's refusal, not an
    unexpected failure, and nothing is created."""
    handle, _ = layout
    (handle.root / "locked").mkdir()
    (handle.root / "locked").chmod(0o755)
    if os.geteuid() != 0:
        pytest.skip("needs root to drop to nobody")
    for path in ("locked/x.txt", "locked/new/x.txt"):
        assert _in_child_as_nobody(lambda p=path: handle.write(p, b"x")) == 0
    assert os.listdir(handle.root / "locked") == []


def test_a_read_that_runs_out_of_file_handles_is_unavailable(
    layout: tuple[WorkspaceHandle, Path], monkeypatch: pytest.MonkeyPatch,
) -> None:
    handle, _ = layout
    _fail_on(monkeypatch, "open", errno.EMFILE, lambda name, *a, **k: name == "inside.txt")
    with pytest.raises(WorkspaceUnavailable, match=r"^too many files are open$"):
        handle.read("inside.txt")
    monkeypatch.undo()
    _fail_on(monkeypatch, "read", errno.EIO)
    with pytest.raises(WorkspaceUnavailable, match=r"^the workspace could not be used \(EIO\)$"):
        handle.read("inside.txt")


def test_an_owned_workspace_that_cannot_be_created_is_unavailable(tmp_path: Path) -> None:
    (tmp_path / "file").write_bytes(b"")
    handle = WorkspaceHandle(tmp_path / "file" / "ws", owned=True)
    with pytest.raises(WorkspaceUnavailable,
                       match=r"^the workspace directory cannot be created \(ENOTDIR\)$"):
        handle.write("a.txt", b"x")


def test_a_read_only_file_is_not_replaced(layout: tuple[WorkspaceHandle, Path]) -> None:
    handle, _ = layout
    target = handle.root / "ro.txt"
    target.write_bytes(b"keep me")
    target.chmod(0o444)
    with pytest.raises(WorkspaceEscape, match=r"^file is read-only$"):
        handle.write("ro.txt", b"replaced")
    assert target.read_bytes() == b"keep me"
    assert stat.S_IMODE(target.stat().st_mode) == 0o444
    assert sorted(os.listdir(handle.root)) == ["inside.txt", "ro.txt"]  # no temp left


@pytest.mark.parametrize("mode", [0o600, 0o755, 0o640])
def test_a_replaced_file_keeps_its_mode(layout: tuple[WorkspaceHandle, Path], mode: int) -> None:
    handle, _ = layout
    target = handle.root / "script.sh"
    target.write_bytes(b"old")
    target.chmod(mode)
    handle.write("script.sh", b"new")
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(target.stat().st_mode) == mode


def test_a_killed_writes_temp_file_is_listed(layout: tuple[WorkspaceHandle, Path]) -> None:
    """A process killed between writing the temp file and renaming it leaves the temp file:
    no write holds it any more, so it is a file like any other and is listed (a listing
    hides a temp name only while a write is in flight: test_workspace_listing_bounds)."""
    handle, _ = layout
    handle.write("d/kept.txt", b"kept")
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child, "killed" just before its rename
        os.rename = lambda *a, **k: os._exit(0)
        try:
            handle.write("d/notes.md", b"half")
        finally:
            os._exit(1)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    left = [n for n in os.listdir(handle.root / "d") if n.endswith(".tmp")]
    assert len(left) == 1 and left[0].startswith(".notes.md.")  # the stale temp is there
    listing = handle.listdir(recursive=True)
    assert [e.path for e in listing.entries] == ["d", f"d/{left[0]}", "d/kept.txt", "inside.txt"]
    assert [e.path for e in handle.listdir("d").entries] == [f"d/{left[0]}", "d/kept.txt"]
    # A file of the user's that merely ends in .tmp is listed.
    handle.write("d/.cache.tmp", b"x")
    assert [e.path for e in handle.listdir("d").entries] == [
        "d/.cache.tmp", f"d/{left[0]}", "d/kept.txt"]


def test_a_close_during_a_walk_does_not_close_the_fd_under_it(tmp_path: Path) -> None:
    # A sync tool abandoned at its deadline can still be walking when its run ends. Were the
    # root fd closed under it, the kernel could hand that number to an unrelated open and the
    # walk would continue relative to another directory.
    (tmp_path / "root").mkdir()
    handle = WorkspaceHandle(tmp_path / "root", owned=True)
    handle.write("a/b.txt", b"x")
    with handle._parent(["a", "b.txt"]) as parent, handle._root_fd() as root:
        handle.close()  # the run ended while the walk holds the root
        os.fstat(root)  # still this walk's fd, still open
        assert os.path.samestat(os.fstat(root), os.stat(tmp_path / "root"))
        assert os.listdir(parent) == ["b.txt"]
    # The last user out closed the detached fd.
    with pytest.raises(OSError):
        os.fstat(root)
    # A later operation gets a fresh root.
    assert handle.read("a/b.txt") == b"x"
    handle.discard()


# ----------------------------------------------------------------- sandbox_root


def test_sandbox_root_yields_an_fd_of_the_root_only_for_the_block(
    layout: tuple[WorkspaceHandle, Path],
) -> None:
    handle, base = layout
    with handle.sandbox_root() as fd:
        assert os.path.samestat(os.fstat(fd), os.stat(base / "root"))
        kept = fd
    with pytest.raises(OSError) as info:
        os.fstat(kept)
    assert info.value.errno == errno.EBADF


def test_sandbox_root_stamps_every_created_or_changed_file(
    layout: tuple[WorkspaceHandle, Path],
) -> None:
    handle, base = layout
    root = base / "root"
    handle.write("kept.md", b"tool")
    handle.write("replaced.md", b"tool")
    handle.write("renamed.md", b"tool")
    with handle.sandbox_root() as fd:
        # What a sandboxed command does, through the bound directory.
        os.makedirs(root / "d" / "e")
        (root / "d" / "e" / "new.txt").write_bytes(b"new")
        with open(root / "replaced.md", "r+b") as f:  # in place: same inode and size
            f.write(b"TOOL")
        os.rename(root / "renamed.md", root / "moved.md")
        os.symlink("/etc/passwd", root / "link")
        os.mkfifo(root / "fifo")
        os.link(root / "kept.md", root / "d" / "hard")
        assert fd >= 0
    assert handle.provenance("d/e/new.txt") is Provenance.SANDBOX_WRITTEN
    assert handle.provenance("replaced.md") is Provenance.SANDBOX_WRITTEN
    assert handle.provenance("moved.md") is Provenance.SANDBOX_WRITTEN
    assert handle.provenance("renamed.md") is Provenance.UNKNOWN  # gone
    # A new hard link changes the inode's ctime: both names are the sandbox's now.
    assert handle.provenance("kept.md") is Provenance.SANDBOX_WRITTEN
    assert handle.provenance("d/hard") is Provenance.SANDBOX_WRITTEN
    for planted in ("link", "fifo"):
        assert handle.provenance(planted) is Provenance.UNKNOWN
    with pytest.raises(WorkspaceEscape):
        handle.read("link")
    # A file the block left alone keeps a TOOL_WRITTEN stamp; so does a later tool write.
    handle.write("after.md", b"tool")
    with handle.sandbox_root():
        pass
    assert handle.provenance("after.md") is Provenance.TOOL_WRITTEN
    assert handle.provenance("d/e/new.txt") is Provenance.SANDBOX_WRITTEN


def test_sandbox_root_clears_set_id_bits(layout: tuple[WorkspaceHandle, Path]) -> None:
    handle, base = layout
    target = base / "root" / "tool"
    with handle.sandbox_root():
        target.write_bytes(b"#!/bin/sh\n")
        os.chmod(target, 0o6755)
    assert stat.S_IMODE(target.stat().st_mode) == 0o755
    assert handle.provenance("tool") is Provenance.SANDBOX_WRITTEN  # stamped after the chmod


def test_sandbox_root_stamps_even_when_the_block_raises(
    layout: tuple[WorkspaceHandle, Path],
) -> None:
    handle, base = layout
    with pytest.raises(RuntimeError), handle.sandbox_root():
        (base / "root" / "half.txt").write_bytes(b"x")
        raise RuntimeError("the sandbox failed midway")
    assert handle.provenance("half.txt") is Provenance.SANDBOX_WRITTEN


def test_a_run_without_a_workspace_refuses_sandbox_root() -> None:
    from toolhost._model.workspace import NO_WORKSPACE

    with pytest.raises(WorkspaceEscape):
        NO_WORKSPACE.sandbox_root()
    with pytest.raises(WorkspaceEscape):
        NO_WORKSPACE.usage(max_bytes=1, max_entries=1, max_depth=1)


# ----------------------------------------------------------------- usage

_NO_LIMIT = {"max_bytes": 2**62, "max_entries": 2**62, "max_depth": 2**62}


def test_usage_counts_disk_blocks_once_per_inode(layout: tuple[WorkspaceHandle, Path]) -> None:
    handle, base = layout
    root = base / "root"
    (root / "d").mkdir()
    (root / "d" / "f").write_bytes(b"x" * 65536)
    for i in range(3):
        os.link(root / "d" / "f", root / f"link{i}")
    with open(root / "sparse", "wb") as sparse:
        sparse.truncate(4 * 1024**3)  # 4 GiB long, no blocks: it costs what it stores
    usage = handle.usage(**_NO_LIMIT)
    names = ("inside.txt", "d", "d/f", "sparse")  # the links' inode once; not the root itself
    blocks = sum(os.lstat(root / name).st_blocks for name in names) * 512
    assert usage == WorkspaceUsage(disk_bytes=blocks, entries=7, depth=1, complete=True)
    assert usage.disk_bytes < 1024**2


def test_usage_reports_the_deepest_level(layout: tuple[WorkspaceHandle, Path]) -> None:
    handle, base = layout
    (base / "root" / "a" / "b" / "c").mkdir(parents=True)
    usage = handle.usage(**_NO_LIMIT)
    # Levels below the root entered: a, a/b, a/b/c (empty, entered all the same).
    assert (usage.entries, usage.depth, usage.complete) == (4, 3, True)
    (base / "root" / "a" / "b" / "c" / "f").write_bytes(b"x")
    assert handle.usage(**_NO_LIMIT).depth == 3
    (base / "root" / "a" / "b" / "c" / "d").mkdir()
    assert handle.usage(**_NO_LIMIT).depth == 4


@pytest.mark.parametrize("limit", ["max_bytes", "max_entries", "max_depth"])
def test_usage_stops_once_a_limit_is_passed(
    layout: tuple[WorkspaceHandle, Path], limit: str,
) -> None:
    handle, base = layout
    root = base / "root"
    deep = root / "a" / "b" / "c" / "d" / "e"
    deep.mkdir(parents=True)
    for i in range(40):
        (root / f"g{i}").write_bytes(b"x" * 8192)
        (deep / f"f{i}").write_bytes(b"x" * 8192)
    whole = handle.usage(**_NO_LIMIT)
    assert (whole.entries, whole.depth, whole.complete) == (86, 5, True)
    usage = handle.usage(**{**_NO_LIMIT, limit: {"max_bytes": 4 * 8192, "max_entries": 10,
                                                  "max_depth": 2}[limit]})
    assert not usage.complete
    # Passed by the entry (or level) that stopped it, no further.
    if limit == "max_bytes":
        assert 4 * 8192 < usage.disk_bytes <= 5 * 8192 + 4096
    elif limit == "max_entries":
        assert usage.entries == 11
    else:
        assert usage.depth == 3
    assert usage.entries < whole.entries  # it stopped there: the rest was not walked


def test_usage_of_a_tree_moved_under_the_walk_is_incomplete(
    layout: tuple[WorkspaceHandle, Path], monkeypatch: pytest.MonkeyPatch,
) -> None:
    from toolhost._adapters import fs_workspace

    handle, base = layout
    root = base / "root"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "marker").write_bytes(b"x")
    (base / "elsewhere").mkdir()
    visit = fs_workspace._UsageWalk.visit

    def moving(self: fs_workspace._UsageWalk, name: str, dir_fd: int, info: os.stat_result,
               prefix: str | None) -> None:
        # What a command renaming directories beside the walk does, at a known moment: the
        # walk stands in a/b when a leaves the root, so ``..`` of a is not the root any more.
        if name == "marker":
            os.rename(root / "a", base / "elsewhere" / "a")
        visit(self, name, dir_fd, info, prefix)

    monkeypatch.setattr(fs_workspace._UsageWalk, "visit", moving)
    usage = handle.usage(**_NO_LIMIT)
    assert usage.complete is False
    # inside.txt, a, b, marker: what it counted before the move stands.
    assert (usage.entries, usage.depth) == (4, 2)


def test_usage_goes_on_past_a_directory_swapped_since_it_was_listed(
    layout: tuple[WorkspaceHandle, Path], monkeypatch: pytest.MonkeyPatch,
) -> None:
    from toolhost._adapters import fs_workspace

    handle, base = layout
    root = base / "root"
    (root / "a").mkdir()
    (root / "z").mkdir()
    # The walk descends first into the directory listed last: that one is swapped (an empty
    # one, replaced in place by rename), so the other is walked only if the walk goes on.
    first = [name for name in os.listdir(root) if name in ("a", "z")][-1]
    other = "z" if first == "a" else "a"
    for i in range(5):
        (root / other / f"f{i}").write_bytes(b"x")
    (base / "fresh").mkdir()
    visit = fs_workspace._UsageWalk.visit

    def swapping(self: fs_workspace._UsageWalk, name: str, dir_fd: int, info: os.stat_result,
                 prefix: str | None) -> None:
        if name == first and (base / "fresh").exists():  # listed, then swapped before opened
            os.rename(base / "fresh", root / first)
        visit(self, name, dir_fd, info, prefix)

    monkeypatch.setattr(fs_workspace._UsageWalk, "visit", swapping)
    usage = handle.usage(**_NO_LIMIT)
    # Incomplete, yet the other directory was measured: one swapped directory hides nothing.
    assert (usage.entries, usage.complete) == (8, False)


def test_usage_runs_from_another_thread_during_a_sandbox_block(
    layout: tuple[WorkspaceHandle, Path],
) -> None:
    handle, base = layout
    found: list[WorkspaceUsage] = []
    with handle.sandbox_root():
        (base / "root" / "new").write_bytes(b"x")
        measuring = threading.Thread(target=lambda: found.append(handle.usage(**_NO_LIMIT)))
        measuring.start()
        measuring.join()
    assert [(u.entries, u.complete) for u in found] == [(2, True)]
    assert handle.provenance("new") is Provenance.SANDBOX_WRITTEN


def _set_id_files(root: Path) -> list[bytes]:
    """Regular files with a set-id bit under ``root``, by bytes path (any name)."""
    found = []
    for top, _, files in os.walk(os.fsencode(root)):
        for name in files:
            info = os.lstat(os.path.join(top, name))
            if stat.S_ISREG(info.st_mode) and info.st_mode & (stat.S_ISUID | stat.S_ISGID):
                found.append(os.path.join(top, name))
    return found


def test_sandbox_root_clears_set_id_bits_whatever_the_name(
    layout: tuple[WorkspaceHandle, Path],
) -> None:
    # No tool can name b"e\xff", yet a set-uid file by that name is one on the host.
    handle, base = layout
    root = os.fsencode(base / "root")
    with handle.sandbox_root():
        for path in (b"e\xff", b"d\xff/sh", b"d\xff/ok/sh"):
            os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
            with open(os.path.join(root, path), "wb") as f:
                f.write(b"#!/bin/sh\n")
            os.chmod(os.path.join(root, path), 0o6755)
    assert _set_id_files(base / "root") == []
    assert stat.S_IMODE(os.stat(os.path.join(root, b"d\xff/ok/sh")).st_mode) == 0o755


@contextlib.contextmanager
def _few_fds() -> Iterator[int]:
    """This process's soft open-file limit lowered for the block to 64 more than it has open
    (a whole test session holds more than 64 at times)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit = min(len(os.listdir("/proc/self/fd")) + 64, soft)
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
    try:
        yield limit
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _deep(root: Path, depth: int) -> Iterator[int]:
    """Make ``depth`` nested directories ``a`` under ``root``, holding two fds at most;
    yields the deepest directory's fd for the block."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("a", dir_fd=fd)
            child = os.open("a", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def test_sandbox_root_walks_a_tree_deeper_than_the_fd_limit(
    layout: tuple[WorkspaceHandle, Path],
) -> None:
    handle, base = layout
    handle.write("kept.md", b"tool")
    try:
        _walk_deeper_than_the_fd_limit(handle, base)
    finally:
        # Deeper than shutil.rmtree recurses: pytest's cleanup of old temp dirs would crash.
        remove_tree(base / "root" / "a")


def _walk_deeper_than_the_fd_limit(handle: WorkspaceHandle, base: Path) -> None:
    with _few_fds() as limit:
        depth = limit + 100
        with handle.sandbox_root():
            for bottom in _deep(base / "root", depth):
                fd = os.open("sh", os.O_WRONLY | os.O_CREAT, 0o755, dir_fd=bottom)
                os.fchmod(fd, 0o4755)
                os.close(fd)
    fd = os.open(base / "root", os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        child = os.open("a", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child
    try:
        assert stat.S_IMODE(os.stat("sh", dir_fd=fd).st_mode) == 0o755
    finally:
        os.close(fd)
    # The walk finished: the deep file is stamped, and the untouched one keeps its stamp.
    assert handle.provenance("a/" * depth + "sh") is Provenance.SANDBOX_WRITTEN
    assert handle.provenance("kept.md") is Provenance.TOOL_WRITTEN


@pytest.mark.parametrize(("cap", "value"), [("_SANDBOX_WALK_ENTRIES", 10),
                                            ("_SANDBOX_WALK_DEPTH", 3)])
def test_a_sandbox_walk_past_its_caps_fails_safe(
    layout: tuple[WorkspaceHandle, Path], monkeypatch: pytest.MonkeyPatch, cap: str, value: int,
) -> None:
    from toolhost._adapters import fs_workspace

    handle, base = layout
    root = base / "root"
    os.chmod(root, 0o755)
    handle.write("kept.md", b"tool")
    monkeypatch.setattr(fs_workspace, cap, value)
    with handle.sandbox_root():
        (root / "a" / "b" / "c" / "d" / "e").mkdir(parents=True)
        for i in range(20):
            (root / "a" / "b" / "c" / "d" / "e" / f"f{i}").write_bytes(b"x")
            (root / f"g{i}").write_bytes(b"x")
    # Every record dropped: nothing reads as the run's, nor as anything but UNKNOWN.
    assert handle.provenance("kept.md") is Provenance.UNKNOWN
    assert handle.provenance("g0") is Provenance.UNKNOWN
    # And no other user can reach what the walk did not see.
    assert stat.S_IMODE(root.stat().st_mode) == 0o700


def test_sandbox_records_are_pruned_and_capped(
    layout: tuple[WorkspaceHandle, Path], monkeypatch: pytest.MonkeyPatch,
) -> None:
    from toolhost._adapters import fs_workspace

    handle, base = layout
    root = base / "root"
    monkeypatch.setattr(fs_workspace, "_STAMPS_LIMIT", 2)
    with handle.sandbox_root():
        for name in ("a", "b", "c"):
            (root / name).write_bytes(b"x")
    stamped = [n for n in "abc" if handle.provenance(n) is Provenance.SANDBOX_WRITTEN]
    assert len(stamped) == 2  # the third is past the cap: UNKNOWN
    # A complete walk drops the records of paths that are gone, which makes room again.
    with handle.sandbox_root():
        for name in "abc":
            (root / name).unlink()
        (root / "d").write_bytes(b"x")
        (root / "e").write_bytes(b"x")
    assert handle.provenance("d") is Provenance.SANDBOX_WRITTEN
    assert handle.provenance("e") is Provenance.SANDBOX_WRITTEN


def test_the_hosts_workspaces_are_reachable_by_their_owner_only(tmp_path: Path) -> None:
    from toolhost._composition import Host

    data = tmp_path / "data"
    (data / "workspaces").mkdir(parents=True, mode=0o755)  # as an older version left it
    os.chmod(data / "workspaces", 0o755)
    with Host.from_plugins({}, data_dir=data) as host:
        handle = host.fresh_workspace("run-1")
        handle.write("a.txt", b"x")
        assert stat.S_IMODE((data / "workspaces").stat().st_mode) == 0o700
        handle.discard()


# ----------------------------------------------------------------------- whose bytes a read got


def test_a_read_says_whose_bytes_it_read(layout: tuple[WorkspaceHandle, Path]) -> None:
    from toolhost import ProvenancedChunks

    handle, base = layout
    root = base / "root"
    handle.write("d/a.md", b"the run's")
    chunks = handle.read_chunks("d/a.md", 4)
    assert isinstance(chunks, ProvenancedChunks)
    assert chunks.provenance() is Provenance.UNKNOWN  # nothing read yet
    assert b"".join(chunks) == b"the run's"
    assert chunks.provenance() is Provenance.TOOL_WRITTEN
    (root / "outsider.md").write_bytes(b"theirs")
    outsider = handle.read_chunks("outsider.md")
    assert b"".join(outsider) == b"theirs" and outsider.provenance() is Provenance.UNKNOWN


def test_a_directory_swapped_in_for_the_read_is_not_the_runs_file(
        layout: tuple[WorkspaceHandle, Path]) -> None:
    handle, base = layout
    root = base / "root"
    handle.write("d/a.md", b"the run's")
    (root / "theirs").mkdir()
    (root / "theirs" / "a.md").write_bytes(b"outsider")

    def swap() -> None:
        os.rename(root / "d", root / "swap")
        os.rename(root / "theirs", root / "d")
        os.rename(root / "swap", root / "theirs")

    swap()
    chunks = handle.read_chunks("d/a.md")
    assert b"".join(chunks) == b"outsider"
    swap()
    # The path looks like the run's file again; the bytes read were not.
    assert handle.provenance("d/a.md") is Provenance.TOOL_WRITTEN
    assert chunks.provenance() is Provenance.UNKNOWN


def test_a_file_changed_while_it_is_read_is_not_the_runs(
        layout: tuple[WorkspaceHandle, Path]) -> None:
    handle, base = layout
    root = base / "root"
    handle.write("a.md", b"0123456789")
    chunks = handle.read_chunks("a.md", 4)
    assert next(chunks) == b"0123"
    with open(root / "a.md", "r+b") as f:  # the same inode, changed in place
        f.seek(4)
        f.write(b"XXXX")
    assert b"".join(chunks) == b"XXXX89"
    assert chunks.provenance() is Provenance.UNKNOWN


def test_bytes_another_process_writes_into_the_temp_file_are_not_stamped_ours(
    layout: tuple[WorkspaceHandle, Path], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The write's temp file has a name until its rename: a sandbox command of the same run
    opened it during the fsync and appended, and the stamp taken after the rename made its
    text INTERNAL_TOOL (the sandbox review). Here another opener appends at the same point."""
    import time

    import toolhost._adapters.fs_workspace as fs_workspace

    handle, _ = layout
    real_fsync = os.fsync
    injected: list[str] = []

    def fsync_after_a_stranger_wrote(fd: int) -> None:
        name = os.readlink(f"/proc/self/fd/{fd}")
        if not injected and os.path.basename(name).startswith(".notes.md."):
            time.sleep(0.02)  # past the clock tick of the write's own bytes
            with open(name, "ab") as stranger:
                stranger.write(b"INJECTED\n")
            injected.append(name)
        real_fsync(fd)

    monkeypatch.setattr(fs_workspace.os, "fsync", fsync_after_a_stranger_wrote)
    handle.write("notes.md", b"benign notes\n")
    monkeypatch.undo()
    assert injected, "the temp file was never seen"
    assert (handle.root / "notes.md").read_bytes() == b"benign notes\nINJECTED\n"
    assert handle.provenance("notes.md") is Provenance.UNKNOWN
    # A write nobody touches is still stamped.
    handle.write("notes.md", b"benign notes\n")
    assert handle.provenance("notes.md") is Provenance.TOOL_WRITTEN


def test_a_write_that_fails_after_close_removes_its_directories_in_the_workspace_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run ended while an abandoned tool's write was failing: the directories the write
    made are removed through the workspace's own root fd, never through its number reused by
    another open once the handle let it go (a review's repro removed another directory)."""
    (tmp_path / "ws").mkdir()
    (tmp_path / "victim" / "newdir").mkdir(parents=True)
    handle = WorkspaceHandle(tmp_path / "ws")
    with handle._root_fd() as root_fd:
        pass
    failing, closed = threading.Event(), threading.Event()
    real_fsync, real_close = os.fsync, os.close
    reused: list[int] = []

    def fsync(fd: int) -> None:
        if fd != root_fd and not failing.is_set():
            failing.set()
            closed.wait(10)
            raise OSError(errno.EIO, "the disk failed")
        real_fsync(fd)

    def close(fd: int) -> None:
        real_close(fd)
        if fd == root_fd and threading.current_thread() is not threading.main_thread():
            # Another thread's open lands in the gap, as the kernel hands out the lowest number.
            reused.append(os.open(tmp_path / "victim", os.O_RDONLY | os.O_DIRECTORY))

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "close", close)
    errors: list[BaseException] = []

    def write() -> None:
        try:
            handle.write("newdir/f.txt", b"x")
        except BaseException as exc:
            errors.append(exc)

    writer = threading.Thread(target=write)
    writer.start()
    assert failing.wait(10)
    handle.close()
    closed.set()
    writer.join(10)
    monkeypatch.undo()
    for fd in reused:
        os.close(fd)
    assert errors and isinstance(errors[0], (OSError, WorkspaceUnavailable))
    assert (tmp_path / "victim" / "newdir").is_dir()
    assert not (tmp_path / "ws" / "newdir").exists()
