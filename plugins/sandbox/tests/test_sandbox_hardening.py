"""The fixes to the security review (issue #13): no set-id file in the workspace at any time
(the seccomp filter), a read-only root and /dev, and the workspace quota. Checked from the
host's side against real bubblewrap."""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest

from sandbox_support import BOUND_S, NAME, Call, structured, wait_for
from toolhost import ToolFailureKind
from toolhost.testing import Harness, Run
from toolhost_sandbox import quota
from toolhost_sandbox.seccomp import SeccompUnavailable, filter_program

_SET_ID = stat.S_ISUID | stat.S_ISGID

#: Four ways a command may try to leave a set-uid copy of a shell, each appending its exit
#: status to ``status``; then ``ready``.
_SET_ID_ATTEMPTS = (
    "cp /bin/sh a; chmod u+s a; echo chmod=$? >> status; "
    "install -m 4755 /bin/sh b; echo install=$? >> status; "
    "python3 -c 'import os; os.open(\"c\", os.O_CREAT | os.O_WRONLY, 0o4755)' 2>/dev/null; "
    "echo open=$? >> status; "
    "s=$(find /usr/bin -xdev -perm -4000 -type f | head -n 1); "
    "cp -p \"$s\" d 2>/dev/null; echo cp=$? >> status; [ -n \"$s\" ] && echo had-source >> status; "
    "touch ready"
)


def _set_id_files(root: Path) -> list[bytes]:
    found = []
    for top, _, files in os.walk(os.fsencode(root)):
        for name in files:
            info = os.lstat(os.path.join(top, name))
            if stat.S_ISREG(info.st_mode) and info.st_mode & _SET_ID:
                found.append(os.path.join(top, name))
    return found


@pytest.fixture
def sweep(root: Path) -> Iterator[None]:
    """Never leave a set-uid shell behind, even in pytest's directory (a test that fails)."""
    yield
    for path in _set_id_files(root):
        os.unlink(path)


def test_no_set_id_file_exists_during_the_call(
    toolhost_host: Harness, run: Run, root: Path, isolation: None, sweep: None,
) -> None:
    outcomes = []
    worker = threading.Thread(target=lambda: outcomes.append(toolhost_host.call(
        NAME, {"command": f"{_SET_ID_ATTEMPTS}; sleep 60", "timeout_s": 60}, run=run)))
    worker.start()
    try:
        # While the command still runs: every attempt failed, and nothing is set-id.
        assert wait_for(root / "ready")
        assert (root / "status").read_text().split() == [
            "chmod=1", "install=1", "open=1", "cp=1", "had-source"]
        assert _set_id_files(root) == []
        assert all((root / name).is_file() for name in "abd")  # made, without the bits
    finally:
        run.cancellation.cancel()
        worker.join(BOUND_S)
    assert not worker.is_alive()
    assert _set_id_files(root) == []


def test_no_set_id_file_exists_after_the_call(call: Call, root: Path, sweep: None) -> None:
    result = structured(call(_SET_ID_ATTEMPTS))
    assert result["exit_code"] == 0
    assert (root / "status").read_text().split() == [
        "chmod=1", "install=1", "open=1", "cp=1", "had-source"]
    assert _set_id_files(root) == []


def test_the_filter_refuses_what_it_must_and_nothing_else(call: Call, root: Path) -> None:
    script = (
        "import ctypes, errno, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "def errno_of(*args):\n"
        "    return 0 if libc.syscall(*args) >= 0 else errno.errorcode[ctypes.get_errno()]\n"
        "print('openat2', errno_of(437, -100, b'o2', None, 0))\n"
        "print('io_uring_setup', errno_of(425, 1, ctypes.create_string_buffer(120)))\n"
        "for name, act in [\n"
        "    ('mknod', lambda: os.mknod('n', 0o600 | 0o10000)),\n"
        "    ('mkdir-setgid', lambda: os.mkdir('g', 0o2755)),\n"
        "    ('mkdir', lambda: os.mkdir('m', 0o700)),\n"
        "    ('create', lambda: os.close(os.open('f', os.O_CREAT | os.O_WRONLY, 0o600))),\n"
        "    ('chmod', lambda: os.chmod('f', 0o755)),\n"
        "    ('open-no-create', lambda: os.close(os.open('f', os.O_RDONLY, 0o4755))),\n"
        "]:\n"
        "    try:\n"
        "        act(); print(name, 0)\n"
        "    except OSError as exc:\n"
        "        print(name, errno.errorcode[exc.errno])\n"
    )
    (root / "probe.py").write_text(script)
    result = structured(call("python3 probe.py"))
    assert result["stdout"].splitlines() == [
        "openat2 ENOSYS", "io_uring_setup ENOSYS", "mknod EPERM", "mkdir-setgid EPERM",
        "mkdir 0", "create 0", "chmod 0", "open-no-create 0"]
    assert stat.S_IMODE((root / "f").stat().st_mode) == 0o755


def test_a_system_call_of_another_abi_kills_the_process(call: Call) -> None:
    # x32's getpid (0x40000000 | 39) on x86_64: numbers the filter does not look at.
    if os.uname().machine != "x86_64":
        pytest.skip("the x32 ABI exists on x86_64 only")
    result = structured(call("python3 -c 'import ctypes; ctypes.CDLL(None).syscall(0x40000027)'"
                             "; echo $?"))
    assert result["stdout"] == "159\n"  # 128 + SIGSYS


def test_no_filter_for_another_machine_fails_closed(
    toolhost_host: Harness, run: Run, root: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(SeccompUnavailable, match="riscv64"):
        filter_program("riscv64")
    monkeypatch.setattr("platform.machine", lambda: "riscv64")
    outcome = toolhost_host.call(NAME, {"command": "touch ran"}, run=run)
    assert outcome.failure is not None
    assert outcome.failure.kind is ToolFailureKind.UPSTREAM_UNAVAILABLE
    assert not (root / "ran").exists()


def test_the_filter_is_whole_instructions_for_both_machines() -> None:
    for machine in ("x86_64", "aarch64"):
        program = filter_program(machine)
        assert program and len(program) % 8 == 0


def test_the_root_and_dev_are_read_only_and_the_tmpfs_mounts_bounded(call: Call) -> None:
    result = structured(call(
        "for p in / /dev /usr /etc; do touch $p/x 2>/dev/null && echo wrote $p; done; "
        "echo hi > /dev/null && echo null-ok; df -B1 --output=size /tmp /dev/shm | tail -n 2"))
    lines = result["stdout"].splitlines()
    assert lines[0] == "null-ok"
    assert [int(size) for size in lines[1:]] == [64 * 1024 * 1024] * 2


def test_a_tree_deeper_than_the_quota_is_killed(call: Call) -> None:
    script = (f"import os\nfor _ in range({quota.QUOTA_DEPTH + 10}):\n"
              "    os.mkdir('q'); os.chdir('q')\n"
              "import time; time.sleep(60)\n")
    outcome = call(f"python3 -c \"{script}\"", 60)
    result = structured(outcome)
    assert (result["quota_exceeded"], result["exit_code"], result["signal"]) == (
        True, None, "SIGKILL")
    assert outcome.content.startswith("The workspace passed its quota (1024 MiB, 200000 entries, "
                                      "2048 levels deep); every process of the command was killed.")
    structured(call("rm -rf q", 60))


def test_too_many_entries_are_killed(call: Call, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(quota, "QUOTA_ENTRIES", 500)
    result = structured(call("mkdir m; cd m; i=0; while [ $i -lt 600 ]; do : > f$i; "
                             "i=$((i+1)); done; sleep 60", 60))
    assert result["quota_exceeded"] is True and result["timed_out"] is False


def test_a_command_within_the_quota_is_not_killed(call: Call) -> None:
    result = structured(call("head -c 1048576 /dev/zero > f; sleep 1; echo done"))
    assert (result["quota_exceeded"], result["stdout"]) == (False, "done\n")


def test_the_measure_counts_blocks_once_per_inode(
        toolhost_host: Harness, run: Run, root: Path) -> None:
    (root / "d").mkdir()
    (root / "d" / "f").write_bytes(b"x" * 65536)
    for i in range(3):
        os.link(root / "d" / "f", root / f"link{i}")
    with open(root / "sparse", "wb") as sparse:
        sparse.truncate(1024 * 1024 * 1024 * 4)  # 4 GiB long, no blocks
    workspace = cast(quota.Measurable, toolhost_host.context(run=run).workspace)
    usage = quota.measure(workspace)
    blocks = sum(os.lstat(root / name).st_blocks for name in ("d", "d/f", "sparse")) * 512
    assert (usage.disk_bytes, usage.entries, usage.depth, usage.complete) == (blocks, 6, 1, True)
    assert quota.over_quota(usage) is None


@pytest.mark.parametrize(("name", "value", "over"), [
    ("QUOTA_DEPTH", 0, "depth"), ("QUOTA_ENTRIES", 2, "entries"), ("QUOTA_BYTES", 4096, "bytes")])
def test_over_quota_names_the_quota_passed(
        toolhost_host: Harness, run: Run, root: Path, monkeypatch: pytest.MonkeyPatch,
        name: str, value: int, over: str) -> None:
    (root / "a" / "b").mkdir(parents=True)
    (root / "f").write_bytes(b"x" * 8192)
    workspace = cast(quota.Measurable, toolhost_host.context(run=run).workspace)
    assert quota.over_quota(quota.measure(workspace)) is None
    monkeypatch.setattr(quota, name, value)
    assert quota.over_quota(quota.measure(workspace)) == over
