"""Issue #4's security cases, through each of the three tools and the real pipeline.

The handle owns containment and the host's ``tests/test_workspace_handle.py`` covers it
directly; these tests assert the tools' half: every refused path reaches the model as the pipeline's
ToolValidationError shape (``tool.invalid_arguments.schema``) with one identical message across
all three tools, and nothing outside the root is read or written. Each fails if containment is
loosened, whether in the handle or by a tool that starts resolving paths itself.
"""

from __future__ import annotations

import os
import socket
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from toolhost import Outcome, WorkspaceEscape
from toolhost.testing import Harness, Run
from workspace_support import SECRET, Call

SCHEMA = "tool.invalid_arguments.schema"
MESSAGE = "The arguments do not match the tool's input schema."
TOOLS = ("workspace.read_text", "workspace.write_text", "workspace.list_files")


def arguments(tool: str, path: str) -> dict[str, Any]:
    if tool == "workspace.write_text":
        return {"path": path, "content": "pwned"}
    if tool == "workspace.list_files":
        return {"path": path, "recursive": True}
    return {"path": path}


def snapshot(base: Path) -> dict[str, object]:
    """Everything outside the root (and every link inside it), to assert nothing changed."""
    out: dict[str, object] = {}
    for here, dirs, files in os.walk(base):
        for name in dirs + files:
            p = Path(here) / name
            rel = str(p.relative_to(base))
            if p.is_symlink():
                out[rel] = ("link", os.readlink(p))
            elif rel.split(os.sep)[0] == "root":
                continue
            elif p.is_file():
                out[rel] = p.read_bytes()
            else:
                out[rel] = "dir"
    return out


def assert_refused(outcome: Outcome) -> None:
    assert outcome.failure is not None, outcome.to_json()
    assert outcome.failure.reason_code == SCHEMA
    assert outcome.failure.kind.value == "INVALID_ARGUMENTS"
    assert outcome.failure.retryable is False
    assert outcome.content == outcome.failure.message == MESSAGE
    assert outcome.structured is None
    assert SECRET.decode() not in outcome.content


# Each case prepares the root (the layout fixture already has ../secret and ../root-evil/secret)
# and returns the path argument.
Case = Callable[[Path], str]


def _link_outside(root: Path) -> str:
    os.symlink(root.parent / "secret", root / "out")
    return "out"


def _link_outside_dir(root: Path) -> str:
    os.symlink(root.parent / "root-evil", root / "outdir")
    return "outdir"


def _link_inside(root: Path) -> str:
    (root / "real.txt").write_bytes(b"inside")
    os.symlink("real.txt", root / "alias.txt")
    return "alias.txt"


def _link_inside_dir(root: Path) -> str:
    (root / "realdir").mkdir()
    (root / "realdir" / "f").write_bytes(b"inside")
    os.symlink("realdir", root / "aliasdir")
    return "aliasdir"


def _linked_parent(root: Path) -> str:
    os.symlink(root.parent / "root-evil", root / "parent")
    return "parent/secret"


def _linked_parent_inside(root: Path) -> str:
    (root / "realdir").mkdir()
    (root / "realdir" / "f").write_bytes(b"inside")
    os.symlink("realdir", root / "aliasdir")
    return "aliasdir/f"


def _fixed(path: str) -> Case:
    def case(root: Path) -> str:
        (root / "a").mkdir(exist_ok=True)
        (root / "a" / "b").write_bytes(b"inside")
        return path

    case.__name__ = path
    return case


CASES: dict[str, Case] = {
    "dotdot": _fixed("../secret"),
    "a/../../x": _fixed("a/../../secret"),
    "absolute": _fixed("/etc/passwd"),
    "absolute-secret": lambda root: str(root.parent / "secret"),
    "dot-a": _fixed("./a"),
    "double-slash": _fixed("a//b"),
    "trailing-slash": _fixed("a/"),
    "nul": _fixed("a\x00b"),
    "4097-chars": _fixed("a" * 4097),
    "backslash": _fixed("..\\secret"),
    "prefix-sibling": _fixed("../root-evil/secret"),
    "fullwidth-dots": _fixed("\uff0e\uff0e/secret"),
    "two-dot-leader": _fixed("\u2025/secret"),
    "one-dot-leaders": _fixed("a/\u2024\u2024/b"),
    "newline": _fixed("a\nb"),
    "symlink-outside": _link_outside,
    "symlink-outside-dir": _link_outside_dir,
    "symlink-inside": _link_inside,
    "symlink-inside-dir": _link_inside_dir,
    "symlinked-parent": _linked_parent,
    "symlinked-parent-inside": _linked_parent_inside,
}


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_case_is_refused_with_one_shape(
    call: Call, root: Path, base: Path, tool: str, case: str
) -> None:
    path = CASES[case](root)
    before = snapshot(base)
    assert_refused(call(tool, **arguments(tool, path)))
    assert snapshot(base) == before
    assert (base / "secret").read_bytes() == SECRET


def test_the_message_is_identical_across_the_three_tools(call: Call, root: Path) -> None:
    seen = {
        (o.failure.reason_code, o.content) if o.failure else None
        for tool in TOOLS
        for path in ("../secret", "/etc/passwd", _link_outside(root) if tool == TOOLS[0]
                     else "out", "\u2025/secret")
        for o in [call(tool, **arguments(tool, path))]
    }
    assert seen == {(SCHEMA, MESSAGE)}


@pytest.mark.parametrize("tool", TOOLS)
def test_a_path_swapped_for_a_symlink_between_two_calls(
    call: Call, root: Path, base: Path, tool: str
) -> None:
    if tool == "workspace.list_files":
        (root / "d").mkdir()
        (root / "d" / "f").write_bytes(b"inside")
        assert call(tool, path="d").ok
        (root / "d" / "f").unlink()
        (root / "d").rmdir()
        os.symlink(base / "root-evil", root / "d")
        path = "d"
    else:
        assert call("workspace.write_text", path="a.md", content="mine").ok
        assert call("workspace.read_text", path="a.md").ok
        (root / "a.md").unlink()
        os.symlink(base / "secret", root / "a.md")
        path = "a.md"
    before = snapshot(base)
    assert_refused(call(tool, **arguments(tool, path)))
    assert snapshot(base) == before
    assert (base / "secret").read_bytes() == SECRET


@pytest.mark.parametrize("tool", TOOLS)
def test_a_parent_swapped_for_a_symlink_between_two_calls(
    call: Call, root: Path, base: Path, tool: str
) -> None:
    assert call("workspace.write_text", path="sub/a.md", content="mine").ok
    (root / "sub" / "a.md").unlink()
    (root / "sub").rmdir()
    os.symlink(base / "root-evil", root / "sub")
    path = "sub" if tool == "workspace.list_files" else "sub/secret"
    before = snapshot(base)
    assert_refused(call(tool, **arguments(tool, path)))
    assert snapshot(base) == before


def test_a_recursive_listing_never_follows_a_symlink(call: Call, root: Path, base: Path) -> None:
    (root / "d").mkdir()
    (root / "d" / "f").write_bytes(b"x")
    os.symlink(base / "root-evil", root / "d" / "outside")
    os.symlink("../d", root / "d" / "loop")
    os.symlink(base / "secret", root / "secret-link")
    outcome = call("workspace.list_files", recursive=True)
    assert outcome.ok and outcome.structured is not None
    assert [e["path"] for e in outcome.structured["entries"]] == ["d", "d/f"]


# ---------------------------------------------------------------------------- special files


def _fifo(root: Path) -> str:
    os.mkfifo(root / "pipe")
    return "pipe"


def _socket(root: Path) -> str:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(root / "sock"))
    sock.close()
    return "sock"


def _device(root: Path) -> str:
    try:
        os.mknod(root / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("creating a device node needs CAP_MKNOD")
    return "null"


SPECIAL = {"fifo": _fifo, "socket": _socket, "device": _device}


@pytest.mark.parametrize("tool", ["workspace.read_text", "workspace.write_text"])
@pytest.mark.parametrize("kind", sorted(SPECIAL))
def test_a_fifo_socket_or_device_is_refused_and_never_blocks(
    call: Call, root: Path, base: Path, tool: str, kind: str
) -> None:
    path = SPECIAL[kind](root)
    before = snapshot(base)
    result: list[Outcome] = []
    started = time.perf_counter()
    worker = threading.Thread(target=lambda: result.append(call(tool, **arguments(tool, path))),
                              daemon=True)
    worker.start()
    worker.join(timeout=5)
    assert not worker.is_alive(), "the call blocked on a special file"
    assert time.perf_counter() - started < 5
    assert_refused(result[0])
    assert snapshot(base) == before
    assert stat.S_IFMT(os.lstat(root / path).st_mode) != stat.S_IFREG  # not replaced


@pytest.mark.parametrize("kind", sorted(SPECIAL))
def test_listing_a_special_file_is_refused_and_never_blocks(
    call: Call, root: Path, kind: str
) -> None:
    path = SPECIAL[kind](root)
    outcome = call("workspace.list_files", path=path)
    # Not a file or a directory: refused like any other path the workspace cannot hold.
    assert outcome.failure is not None
    assert outcome.failure.reason_code == SCHEMA
    # And a listing of the root never lists it: it is neither a file nor a directory.
    assert call("workspace.list_files").structured == {"path": "", "entries": [],
                                                       "truncated": False}


def test_a_file_that_is_not_readable_is_refused(
    toolhost_host: Harness, call: Call, root: Path, run: Run
) -> None:
    (root / "locked").write_bytes(b"x")
    os.chmod(root / "locked", 0)
    if os.geteuid() != 0:
        assert_refused(call("workspace.read_text", path="locked"))
        return
    # Root reads a mode-000 file anyway: run the tool body as nobody in a forked child, with
    # the workspace's root fd inherited, and expect the WorkspaceEscape step 9 maps.
    body = toolhost_host.tool("workspace.read_text")
    context = toolhost_host.context(run=run)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 3
        try:
            os.setgid(65534)
            os.setuid(65534)
            body({"path": "locked"}, context)
            code = 1
        except WorkspaceEscape:
            code = 0
        except BaseException:
            code = 2
        finally:
            os._exit(code)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("path", ["a\ud800b", "\udfff/x", "d/\ud83d"])
def test_a_lone_surrogate_in_a_path_is_refused_at_step_4(
    call: Call, root: Path, base: Path, tool: str, path: str
) -> None:
    # Not text, so no path: step 4 refuses it before the body or the handle sees it.
    before = snapshot(base)
    assert_refused(call(tool, **arguments(tool, path)))
    assert snapshot(base) == before and os.listdir(root) == []


@pytest.mark.parametrize("tool", TOOLS)
def test_a_component_past_name_max_is_refused_not_an_internal_error(
    call: Call, tool: str
) -> None:
    # 300 bytes is past ext4's NAME_MAX: refused by the handle like every other such path.
    for path in ("n" * 300, "n" * 300 + "/a"):
        assert_refused(call(tool, **arguments(tool, path)))


def test_a_hard_link_to_a_file_outside_is_not_read(call: Call, root: Path, base: Path) -> None:
    os.link(base / "secret", root / "linked.txt")
    outcome = call("workspace.read_text", path="linked.txt")
    assert_refused(outcome)
    assert outcome.failure is not None
    assert outcome.failure.detail == {"workspace": "file has other hard links"}
    assert (base / "secret").read_bytes() == SECRET


def test_writing_to_a_hard_linked_name_leaves_the_file_outside_alone(
    call: Call, root: Path, base: Path
) -> None:
    os.link(base / "secret", root / "linked.txt")
    assert call("workspace.write_text", path="linked.txt", content="mine").ok
    assert (base / "secret").read_bytes() == SECRET
    assert (root / "linked.txt").read_bytes() == b"mine"
