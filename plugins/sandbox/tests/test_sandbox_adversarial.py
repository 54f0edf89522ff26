"""Hostile commands, against real bubblewrap: each ends bounded and contained.

The bounds are loose ("did not hang": ``BOUND_S``), never timings. Every check of
containment is made from the host's side (the listener saw nothing, the host file does not
exist, the marker never appeared), not only from what the command printed.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox_support import BOUND_S, NAME, Call, pause, structured, wait_for
from toolhost import Outcome, ToolFailureKind, WorkspaceEscape
from toolhost.testing import Harness, Run


def _processes_running(marker: str) -> list[int]:
    """The live processes whose command line names ``marker``."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(name))
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


def _our_cgroups() -> list[Path]:
    prefix = f"toolhost-sandbox-{os.getpid()}-"
    return [p for base in (Path("/sys/fs/cgroup/pids"), Path("/sys/fs/cgroup/memory"))
            if base.is_dir() for p in base.rglob(f"{prefix}*")]


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.setblocking(False)
    yield server
    server.close()


def test_a_host_loopback_port_cannot_be_reached(call: Call, listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    outcome = call("python3 -c 'import socket; "
                   f"socket.create_connection((\"127.0.0.1\", {port}), timeout=3)'")
    result = structured(outcome)
    # The sandbox's own loopback has nothing listening; the host's listener saw nothing.
    assert result["exit_code"] == 1 and "ConnectionRefusedError" in result["stderr"]
    with pytest.raises(BlockingIOError):
        listener.accept()


def test_no_network_but_its_own_loopback(call: Call) -> None:
    out = structured(call("cat /proc/net/dev"))["stdout"]
    interfaces = [line.split(":")[0].strip() for line in out.splitlines()[2:]]
    assert interfaces == ["lo"]


def test_host_secrets_and_the_hosts_tmp_cannot_be_read(call: Call, tmp_path: Path) -> None:
    marker = tmp_path / "host-marker"
    marker.write_text("host secret 7f3a")
    assert str(marker).startswith("/tmp/")
    result = structured(call(f"cat /etc/shadow; cat {marker}; ls /root /home; ls -A /tmp"))
    assert result["stdout"] == ""  # and ls -A shows a private, empty /tmp
    assert "host secret" not in result["stderr"]
    for path in ("/etc/shadow", str(marker)):
        assert f"cat: {path}: No such file or directory" in result["stderr"]
    for path in ("/root", "/home"):
        assert f"ls: cannot access '{path}': No such file or directory" in result["stderr"]


def test_the_hosts_kernel_settings_cannot_be_changed(call: Call) -> None:
    # A security review: on a root host with a cgroup the command ran as host root (bwrap
    # maps its uid to this process's), and bwrap left /proc/sys writable; the kernel lets
    # the host's root uid write sysctls whatever its capabilities: 765 were writable, among
    # them kernel/core_pattern (a helper run as root outside every namespace).
    setting = Path("/proc/sys/fs/lease-break-time")
    before = setting.read_text()
    changed = str(int(before) + 1)
    try:
        result = structured(call(
            f"echo {changed} > /proc/sys/fs/lease-break-time; echo h > /proc/sysrq-trigger; "
            "find /proc/sys -type f -writable 2>/dev/null | wc -l; id -u; true"))
        assert setting.read_text() == before
    finally:
        if setting.read_text() != before:  # the machine's own setting back, whatever failed
            setting.write_text(before)
    writable, uid = result["stdout"].split()
    assert writable == "0"
    if os.geteuid() == 0:  # never the host's root: a sandbox uid of its own
        assert uid == "65534"
        assert "Read-only file system" in result["stderr"] or "Permission denied" in (
            result["stderr"])


def test_nothing_outside_the_workspace_can_be_written(call: Call, root: Path) -> None:
    name = f"toolhost-sandbox-escape-{os.getpid()}"
    targets = [f"/usr/{name}", f"/{name}", f"/etc/{name}", f"/tmp/{name}", f"../{name}",
               f"/proc/{name}", f"/dev/{name}"]
    command = "; ".join(f"echo x > {t}" for t in targets) + f"; ln /etc/passwd {name}; true"
    structured(call(command))
    for path in [Path(t) for t in targets if t.startswith("/")] + [root.parent / name]:
        assert not path.exists(), path
    assert not (root / name).exists()  # no hard link to a host file (another mount)


def test_a_fork_bomb_ends_and_leaves_nothing(call: Call) -> None:
    # Its processes by their command line: counting every process of the machine failed
    # when the other CI streams, running beside this one, started a few of their own.
    marker = f"bomb_{os.getpid()}"
    assert _processes_running(marker) == []
    outcome = call(f"{marker}() {{ {marker} | {marker} & }}; {marker}; sleep 3", 3)
    assert outcome.failure is None
    assert _our_cgroups() == []
    pause(0.5)
    assert _processes_running(marker) == []


def test_a_memory_bomb_ends(call: Call) -> None:
    result = structured(call("python3 -c 'x = []\nwhile True: x.append(bytearray(1 << 24))'",
                             60))
    assert result["exit_code"] != 0 and "MemoryError" in result["stderr"]


def test_an_output_flood_is_cut_and_killed(call: Call) -> None:
    outcome = call("while :; do cat /usr/bin/sh; done", 60)
    assert outcome.content.startswith("Output reached 1048576 bytes;")


def test_a_setsid_child_dies_with_the_timeout(call: Call, root: Path) -> None:
    outcome = call("setsid sh -c 'sleep 2; echo late > /workspace/marker' & sleep 100", 1)
    assert structured(outcome)["timed_out"] is True
    pause(4)
    assert not (root / "marker").exists()


def test_run_cancellation_kills_sleep_1000(
    toolhost_host: Harness, run: Run, root: Path, isolation: None,
) -> None:
    results: list[Outcome] = []
    command = ("touch started; (setsid sh -c 'sleep 2; touch late' &); sleep 1000")
    worker = threading.Thread(target=lambda: results.append(
        toolhost_host.call(NAME, {"command": command, "timeout_s": 280}, run=run)))
    worker.start()
    assert wait_for(root / "started")
    run.cancellation.cancel()
    worker.join(BOUND_S)
    assert not worker.is_alive()
    (outcome,) = results
    assert outcome.failure is not None
    assert outcome.failure.kind is ToolFailureKind.CANCELLED
    pause(4)
    assert not (root / "late").exists()
    assert _our_cgroups() == []


def test_a_planted_symlink_is_refused_by_the_workspace(call: Call, run: Run) -> None:
    structured(call("ln -s /etc/passwd p; mkdir d; ln -s /etc d/etc"))
    for path in ("p", "d/etc/passwd"):
        with pytest.raises(WorkspaceEscape):
            run.workspace.read(path)


def test_the_process_limit_holds(call: Call) -> None:
    # 300 background sleeps asked for; the sandbox's own /proc counts what it got.
    # A failed fork ends the loop's subshell, not the outer shell; counting is a glob (no
    # fork, which the limit would refuse while the sleeps hold every slot).
    result = structured(call("(i=0; while [ $i -lt 300 ]; do sleep 5 & i=$((i+1)); done) "
                             "2>/dev/null; set -- /proc/[0-9]*; echo $#", 20))
    running = int(result["stdout"].split()[-1])
    assert 10 < running <= 128
