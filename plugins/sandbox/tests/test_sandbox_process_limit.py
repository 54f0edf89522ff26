"""How the sandbox's processes are limited where no v1 pids cgroup exists (issue #26): a
delegated cgroup v2 subtree, else (as root) a sandbox uid of the call's own, under which
RLIMIT_NPROC holds; else it fails closed.

The cgroups are hidden from the sandbox by pointing ``cgroups.MOUNTINFO`` (where it looks for
the hierarchies) at an empty file: the kernel is not mocked, the code finds nothing. This
machine's cgroup v2 hierarchy has no pids controller (it is bound to v1), so the v2 path is
shown on a directory laid out like a delegated subtree: which cgroup is chosen and what is
written there, not the kernel's enforcement of it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from sandbox_support import ALLOW, BOUND_S, NAME, pause, structured, wait_for
from toolhost import Settings, ToolFailureKind
from toolhost.testing import Harness, Run
from toolhost_sandbox import cgroups, limits, sandbox_user
from toolhost_sandbox.limits import MEMORY_BYTES, PROCESSES, Cgroup, limits_for_call
from toolhost_sandbox.messages import MESSAGES, SANDBOX_BUSY
from toolhost_sandbox.readiness import isolation_report
from toolhost_sandbox.sandbox_user import (
    DEFAULT_UIDS,
    UIDS_SETTING,
    UserUnavailable,
    lease,
    mount_base,
    uid_range,
)

CODE = "tool.upstream_unavailable.isolation_unavailable"
FIRST_UID = int(DEFAULT_UIDS.split("-")[0])
#: Each test that looks for its sandbox's processes or mount on the host runs under a uid of
#: its own (the default range's last ones), so another test process here cannot confuse it.
LEASED, BOMB, TAKEN, REPORTED, DROPPED = (FIRST_UID + 63 - i for i in range(5))
#: A group no account has, given to the host for a moment.
HOST_GROUP = 4242
SQUATTED, NETNS, THREADED, BUSY, SURVIVOR, SHARED = (FIRST_UID + 50 + i for i in range(6))

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the uid fallback is root's only")


@pytest.fixture
def no_cgroup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No cgroup hierarchy to be found: the mount table the module reads is empty."""
    empty = tmp_path / "mountinfo"
    empty.write_text("")
    monkeypatch.setattr(cgroups, "MOUNTINFO", empty)


@pytest.fixture
def only_this_machines_v2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine's mount table without its v1 hierarchies: its cgroup2 mount stays."""
    lines = [line for line in Path("/proc/self/mountinfo").read_text().splitlines()
             if " - cgroup2 " in line]
    assert lines, "this machine has no cgroup2 mount"
    table = tmp_path / "mountinfo"
    table.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(cgroups, "MOUNTINFO", table)


@pytest.fixture
def toolhost_settings(request: pytest.FixtureRequest) -> Mapping[str, str]:
    """ALLOW, plus what a test parametrizes (``indirect``)."""
    extra = getattr(request, "param", {})
    return {**ALLOW, **extra}


def _own_mounts() -> list[str]:
    """The mount points of this process's idmapped workspaces (``<base>/<pid>-*/w``)."""
    return [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()
            if f"/toolhost-sandbox/{os.getpid()}-" in line.split()[4]]


def _running_as(uid: int) -> list[int]:
    """Host pids whose real uid is ``uid`` (from the host's /proc), zombies left out: the
    sandbox's killed init waits there for the host's pid 1 to reap it."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                status = Path(f"/proc/{name}/status").read_text()
            except OSError:
                continue
            fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
            if int(fields["Uid"].split()[0]) == uid and not fields["State"].strip().startswith("Z"):
                found.append(int(name))
    return found


# ------------------------------------------------------------- root without any pids cgroup

def test_root_without_a_pids_cgroup_runs_under_a_sandbox_uid(
        no_cgroup: None, toolhost_host: Harness, run: Run, root: Path) -> None:
    # Before issue #26 this failed closed ("running as root, where RLIMIT_NPROC is not
    # enforced, and no writable pids cgroup ...").
    outcome = toolhost_host.call(NAME, {"command": "id -u; echo ran > ran", "timeout_s": 10},
                                 run=run)
    result = structured(outcome)
    assert (result["exit_code"], result["stdout"]) == (0, "65534\n")
    assert (root / "ran").read_text() == "ran\n"
    assert os.stat(root / "ran").st_uid == 0  # the host's on disk, not the sandbox uid's


@pytest.mark.parametrize("toolhost_settings", [{UIDS_SETTING: str(LEASED)}], indirect=True)
def test_the_sandbox_runs_as_the_leased_uid_on_the_host(
        no_cgroup: None, toolhost_host: Harness, run: Run, root: Path) -> None:
    results = []
    worker = threading.Thread(target=lambda: results.append(toolhost_host.call(
        NAME, {"command": "touch ready; sleep 30", "timeout_s": 30}, run=run)))
    worker.start()
    try:
        assert wait_for(root / "ready")
        assert _running_as(LEASED)  # bwrap and the command: real uid the sandbox's
        # The workspace's idmapped mount, while it exists, is reachable by no other local user:
        # mountinfo shows its path to anyone, so its directory is the sandbox uid's alone.
        # Root's, group the sandbox gid, 0710: bwrap (as that gid) traverses it, nobody else.
        (point,) = _own_mounts()
        call_dir = os.stat(Path(point).parent)
        assert (call_dir.st_uid, call_dir.st_gid, call_dir.st_mode & 0o777) == (0, LEASED, 0o710)
        assert os.stat(Path(point).parent.parent).st_mode & 0o777 == 0o711
    finally:
        run.cancellation.cancel()
        worker.join(BOUND_S)
    assert not worker.is_alive()
    pause(0.5)
    assert _running_as(LEASED) == []


@pytest.mark.parametrize("toolhost_settings", [{UIDS_SETTING: str(DROPPED)}], indirect=True)
@pytest.mark.parametrize("dropper", ["setpriv", "python"])
def test_the_sandbox_keeps_no_id_group_or_capability_of_the_host(
        no_cgroup: None, toolhost_host: Harness, run: Run, root: Path, dropper: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # D322: util-linux's setpriv drops where the system has one, else Python does: either
    # way, seen from the host, every id is the sandbox's and nothing of root's is left.
    if dropper == "python":
        monkeypatch.setattr(sandbox_user, "_setpriv", lambda: None)
    elif sandbox_user._setpriv() is None:
        pytest.fail("no root-owned setpriv on this machine (util-linux): the fast path is "
                    "untested")
    # A supplementary group of the host's, for the sandbox not to keep (root here has none).
    groups = os.getgroups()
    os.setgroups([*groups, HOST_GROUP])
    worker = threading.Thread(target=lambda: toolhost_host.call(
        NAME, {"command": "touch ready; sleep 30", "timeout_s": 30}, run=run))
    worker.start()
    try:
        assert wait_for(root / "ready")
        os.setgroups(groups)
        running = _running_as(DROPPED)
        assert running
        for pid in running:
            status = _status(pid)
            assert status["Uid"].split() == [str(DROPPED)] * 4
            assert status["Gid"].split() == [str(DROPPED)] * 4
            assert status["Groups"] == ""
            assert int(status["CapEff"], 16) == int(status["CapPrm"], 16) == 0
            assert int(status["CapAmb"], 16) == int(status["CapInh"], 16) == 0
            # Python starts with SIGPIPE and SIGXFSZ ignored and an exec keeps that: the
            # command gets them as any process does (a review found the Python dropper's).
            assert int(status["SigIgn"], 16) & _IGNORED_BY_PYTHON == 0
    finally:
        os.setgroups(groups)
        run.cancellation.cancel()
        worker.join(BOUND_S)
    assert not worker.is_alive()


_IGNORED_BY_PYTHON = 1 << (signal.SIGPIPE - 1) | 1 << (signal.SIGXFSZ - 1)
#: Run by the test below as root in a private mount namespace whose /etc/passwd and /etc/group
#: name an account and a group ``NUMBER`` (uid and gid 0): the ids the dropped process has.
_DROPPED_IDS = (
    "import subprocess, sys\n"
    "from toolhost_sandbox import sandbox_user\n"
    "user = sandbox_user.lease(range(int(sys.argv[1]), int(sys.argv[1]) + 1))\n"
    "argv = sandbox_user.drop_argv(\n"
    "    user, ['/bin/sh', '-c', 'grep -E \"^(Uid|Gid):\" /proc/self/status'])\n"
    "print(argv[0].rsplit('/', 1)[-1]); sys.stdout.flush()\n"
    "subprocess.run(argv, check=True)\n"
    "user.release()\n")


@pytest.mark.parametrize("dropper", ["setpriv", "python"])
def test_a_user_named_like_the_sandbox_uid_is_not_whose_ids_it_gets(
        tmp_path: Path, dropper: str) -> None:
    # A review: setpriv reads --reuid=N as a user name first, so an account named N (numeric
    # logins from a directory service) had the command run as that account's uid: root's.
    if shutil.which("unshare") is None:
        pytest.fail("no unshare(1) (util-linux) to make a private mount namespace")
    passwd, group = tmp_path / "passwd", tmp_path / "group"
    passwd.write_text(Path("/etc/passwd").read_text() + f"{DROPPED}:x:0:0::/root:/bin/sh\n")
    group.write_text(Path("/etc/group").read_text() + f"{DROPPED}:x:0:\n")
    script = _DROPPED_IDS if dropper == "setpriv" else _DROPPED_IDS.replace(
        "from toolhost_sandbox import sandbox_user\n",
        "from toolhost_sandbox import sandbox_user\nsandbox_user._setpriv = lambda: None\n")
    done = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c",
         'mount --bind "$1" /etc/passwd && mount --bind "$2" /etc/group && shift 2 && exec "$@"',
         "sh", str(passwd), str(group), sys.executable, "-c", script, str(DROPPED)],
        capture_output=True, text=True, timeout=BOUND_S, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    # The name resolves, so even where setpriv exists the Python dropper is used.
    assert lines[0].startswith("python")
    assert [line.split()[1:] for line in lines[1:]] == [[str(DROPPED)] * 4] * 2


def test_a_setpriv_that_is_not_util_linuxs_is_not_used(tmp_path: Path) -> None:
    # BusyBox's setpriv applet has no --reuid: every call would fail where Python works.
    if shutil.which("unshare") is None:
        pytest.fail("no unshare(1) (util-linux) to make a private mount namespace")
    fake = tmp_path / "setpriv"
    fake.write_text("#!/bin/sh\necho 'BusyBox v1.36.1 multi-call binary.'\n")
    fake.chmod(0o755)
    done = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c",
         'mount --bind "$1" /usr/bin/setpriv && shift && exec "$@"', "sh", str(fake),
         sys.executable, "-c", "from toolhost_sandbox import sandbox_user\n"
                               "print(sandbox_user._setpriv())\n"],
        capture_output=True, text=True, timeout=BOUND_S, check=False)
    assert (done.returncode, done.stdout) == (0, "None\n"), done.stderr


def test_the_process_limit_holds_under_the_sandbox_uid(
        no_cgroup: None, toolhost_host: Harness, run: Run) -> None:
    # As in test_sandbox_adversarial: 300 background sleeps asked for, the sandbox's own
    # /proc counts what it got (a glob: no fork, which the limit would refuse).
    outcome = toolhost_host.call(NAME, {
        "command": "(i=0; while [ $i -lt 300 ]; do sleep 5 & i=$((i+1)); done) 2>/dev/null; "
                   "set -- /proc/[0-9]*; echo $#", "timeout_s": 20}, run=run)
    running = int(structured(outcome)["stdout"].split()[-1])
    assert 10 < running <= PROCESSES


@pytest.mark.parametrize("toolhost_settings", [{UIDS_SETTING: str(BOMB)}], indirect=True)
def test_a_fork_bomb_under_the_sandbox_uid_ends_and_leaves_nothing(
        no_cgroup: None, toolhost_host: Harness, run: Run) -> None:
    outcome = toolhost_host.call(
        NAME, {"command": "bomb() { bomb | bomb & }; bomb; sleep 3", "timeout_s": 3}, run=run)
    assert outcome.failure is None
    pause(0.5)
    assert _running_as(BOMB) == []


@pytest.mark.parametrize("helper", ["unshare", "python"])
def test_the_workspace_round_trip_under_the_sandbox_uid(
        no_cgroup: None, toolhost_host: Harness, run: Run, root: Path, helper: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The host's tools write as root (atomic writes: mode 0600 files); the command reads and
    # changes them and adds its own; the host reads all of it, and every owner on disk is
    # still the host's. A file the command did not touch keeps its provenance: no owner or
    # ctime was changed to let the sandbox in. The idmapped mount's user namespace made by
    # util-linux's unshare, or by Python where the system has none (D322).
    monkeypatch.setattr(sandbox_user, "_namespaces", {})  # made again, by this helper
    if helper == "python":
        monkeypatch.setattr(sandbox_user, "_util_linux", lambda name: None)
    made_by = sandbox_user._userns_helper()[0]
    assert made_by == sys.executable if helper == "python" else made_by.endswith("/unshare")
    run.workspace.write("notes/in.txt", b"from the host\n")
    run.workspace.write("kept.txt", b"untouched\n")
    kept = os.stat(root / "kept.txt")
    provenance = run.workspace.provenance("kept.txt")
    outcome = toolhost_host.call(NAME, {
        "command": "cat notes/in.txt; echo appended >> notes/in.txt; mkdir out; "
                   "echo made > out/new.txt; ls -ln notes | tail -n 1 | cut -c1-20",
        "timeout_s": 10}, run=run)
    result = structured(outcome)
    assert result["exit_code"] == 0, result
    assert result["stdout"].splitlines()[0] == "from the host"
    assert run.workspace.read("notes/in.txt") == b"from the host\nappended\n"
    assert run.workspace.read("out/new.txt") == b"made\n"
    for path in ("notes", "notes/in.txt", "out", "out/new.txt", "kept.txt", "."):
        info = os.stat(root / path)
        assert (info.st_uid, info.st_gid) == (0, 0), path
    assert os.stat(root / "kept.txt").st_ctime_ns == kept.st_ctime_ns
    assert run.workspace.provenance("kept.txt") == provenance
    assert str(run.workspace.provenance("out/new.txt")).endswith("SANDBOX_WRITTEN")


def test_no_workspace_mount_is_left_after_the_call(
        no_cgroup: None, toolhost_host: Harness, run: Run) -> None:
    structured(toolhost_host.call(NAME, {"command": "true", "timeout_s": 10}, run=run))
    assert _own_mounts() == []


def test_concurrent_calls_take_uids_of_their_own() -> None:
    assert uid_range(Settings()) == range(FIRST_UID, FIRST_UID + 64)
    uids = uid_range(Settings(env={UIDS_SETTING: f"{FIRST_UID + 40}-{FIRST_UID + 41}"}))
    first = lease(uids)
    second = lease(uids)
    try:
        assert (first.uid, second.uid) == (FIRST_UID + 40, FIRST_UID + 41)
    finally:
        first.release()
        second.release()
    again = lease(uids)
    assert again.uid == FIRST_UID + 40  # freed by release
    again.release()


@pytest.mark.parametrize("toolhost_settings", [{UIDS_SETTING: str(TAKEN)}], indirect=True)
def test_every_sandbox_uid_in_use_is_a_retryable_busy_host(
        no_cgroup: None, toolhost_host: Harness, run: Run, root: Path) -> None:
    # Was isolation_unavailable ("Retrying will not help"): wrong for a moment's shortage.
    held = lease(range(TAKEN, TAKEN + 1))
    try:
        outcome = toolhost_host.call(NAME, {"command": "touch ran", "timeout_s": 10}, run=run)
        assert outcome.failure is not None
        assert (outcome.failure.reason_code, outcome.failure.kind) == (
            SANDBOX_BUSY, ToolFailureKind.UPSTREAM_UNAVAILABLE)
        assert outcome.failure.retryable is True
        assert outcome.content == MESSAGES[SANDBOX_BUSY]
        assert not (root / "ran").exists()
        record = toolhost_host.record(outcome.invocation_id)  # type: ignore[arg-type]
        assert record.failure_detail == {
            "problem": f"all 1 sandbox uids ({UIDS_SETTING}) are in use by other calls"}
        # The host is ready, only full: its readiness probe does not call it broken.
        report = isolation_report(Settings(env={UIDS_SETTING: str(TAKEN)}))
        assert report.problem is None
        assert report.processes == "a sandbox uid of its own (all in use by calls now: not probed)"
    finally:
        held.release()
    # The uid free again, the retry runs.
    again = toolhost_host.call(NAME, {"command": "touch ran", "timeout_s": 10}, run=run)
    assert again.failure is None and (root / "ran").exists()


def test_a_uid_whose_zombies_are_not_reaped_yet_is_taken_last() -> None:
    # A finished call's processes are reaped after its uid is freed when the machine is
    # loaded, and each counted against the next call's cap under that uid: a writer test of
    # 120 processes could not fork. A free uid owning none is taken first.
    zombie_uid = FIRST_UID + 44
    uids = range(zombie_uid, zombie_uid + 2)
    child = os.fork()
    if child == 0:  # pragma: no cover - the child: becomes the uid's zombie at once
        os.setgid(zombie_uid)
        os.setuid(zombie_uid)
        os._exit(0)
    try:
        deadline = time.monotonic() + 30
        # Until it has exited (a zombie: not reaped here yet).
        while b"State:\tZ" not in Path(f"/proc/{child}/status").read_bytes():
            assert time.monotonic() < deadline, "the child never exited"
            time.sleep(0.01)
        first = lease(uids)
        try:
            assert first.uid == zombie_uid + 1
            # With no other uid free, the zombie's is taken rather than none.
            second = lease(uids)
            assert second.uid == zombie_uid
            second.release()
        finally:
            first.release()
    finally:
        os.waitpid(child, 0)
    again = lease(uids)
    assert again.uid == zombie_uid  # reaped: first again
    again.release()


# ------------------------------------------------------------------ the lease, and the end

def test_a_squatted_socket_name_does_not_take_the_uid() -> None:
    # The lease was an abstract socket any local user could bind, for every uid of the range.
    squatter = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    squatter.bind(f"\0toolhost-sandbox-uid-{SQUATTED}")
    try:
        held = lease(range(SQUATTED, SQUATTED + 1))
    finally:
        squatter.close()
    try:
        leases = os.stat(Path(mount_base()) / "leases")
        assert (leases.st_uid, leases.st_mode & 0o777) == (0, 0o700)
        with pytest.raises(UserUnavailable):
            lease(range(SQUATTED, SQUATTED + 1))  # a lease of this process's own counts
    finally:
        held.release()


_LEASE_ONE = ("import sys\n"
              "from toolhost_sandbox.sandbox_user import UserUnavailable, lease\n"
              "try:\n    lease(range(int(sys.argv[1]), int(sys.argv[1]) + 1))\n"
              "except UserUnavailable:\n    print('taken')\nelse:\n    print('leased')\n")


def test_a_lease_holds_across_network_namespaces() -> None:
    held = lease(range(NETNS, NETNS + 1))
    try:
        other = subprocess.run(["unshare", "--net", sys.executable, "-c", _LEASE_ONE, str(NETNS)],
                               capture_output=True, text=True, timeout=BOUND_S, check=True)
        assert other.stdout == "taken\n"
    finally:
        held.release()


def _run_as(uid: int, code: str) -> subprocess.Popen[bytes]:
    """Python running ``code`` with real uid ``uid`` (it starts as root: it reaches the
    interpreter, then drops), once it has dropped."""
    process = subprocess.Popen([sys.executable, "-c", (
        "import ctypes, os, sys, threading, time\n"
        f"os.setgroups([]); os.setresgid({uid}, {uid}, {uid}); os.setresuid({uid}, {uid}, {uid})\n"
        "sys.stdout.write('1'); sys.stdout.flush()\n" + code)], stdout=subprocess.PIPE)
    assert process.stdout is not None and process.stdout.read(1) == b"1"
    return process


def _end(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert process.stdout is not None
    process.stdout.close()


def _status(pid: int) -> dict[str, str]:
    text = Path(f"/proc/{pid}/status").read_text()
    return {k: v.strip() for k, v in (line.split(":", 1) for line in text.splitlines())}


def test_a_process_whose_main_thread_exited_is_ended_by_release() -> None:
    # Its main thread called pthread_exit: /proc shows it a zombie while its thread runs.
    user = lease(range(THREADED, THREADED + 1))
    process = _run_as(THREADED, "threading.Thread(target=time.sleep, args=(60,)).start()\n"
                                "ctypes.CDLL(None).pthread_exit(None)\n")
    try:
        for _ in range(int(BOUND_S / 0.05)):
            if _status(process.pid)["State"].startswith("Z"):
                break
            pause(0.05)
        assert _status(process.pid)["State"].startswith("Z")
        assert _status(process.pid)["Threads"] == "2"
        user.release()
        assert _status(process.pid)["Threads"] == "1"  # ended: only its pid is left, to reap
    finally:
        _end(process)
        user.release()


def test_a_uid_that_owns_processes_is_not_leased() -> None:
    process = _run_as(BUSY, "time.sleep(60)\n")
    try:
        user = lease(range(BUSY, BUSY + 2))
        assert user.uid == BUSY + 1
        user.release()
    finally:
        _end(process)


def test_a_uid_whose_processes_outlive_the_call_stays_leased(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    # Its process cannot be ended (os.kill does nothing here): the uid is not freed.
    user = lease(range(SURVIVOR, SURVIVOR + 1))
    process = _run_as(SURVIVOR, "time.sleep(60)\n")
    try:
        with monkeypatch.context() as patched:
            patched.setattr(os, "kill", lambda pid, sig: None)
            with caplog.at_level(logging.ERROR, logger=sandbox_user.__name__):
                user.release(wait_s=0.1)
        assert f"sandbox uid {SURVIVOR} kept out of use" in caplog.text
        _end(process)
        with pytest.raises(UserUnavailable):
            lease(range(SURVIVOR, SURVIVOR + 1))
    finally:
        _end(process)
        while sandbox_user._kept:  # this test's alone: free it for the next run's
            os.close(sandbox_user._kept.pop())


def test_a_range_with_an_account_uid_fails_closed(no_cgroup: None) -> None:
    # uid 1 (daemon, on this machine) could setns into a sandbox running as it.
    report = isolation_report(Settings(env={UIDS_SETTING: "1-3"}))
    assert report.problem == (
        "running as root, where the sandbox must run under a uid of its own (as this "
        "process's, its commands could change the host's kernel settings), with no sandbox "
        f"uid to run under ({UIDS_SETTING} must name no uid or gid in use: 1 is an account's "
        "uid, whose processes could enter a running sandbox ('1-3')); set "
        f"{UIDS_SETTING} to a free range, or run the host as an unprivileged user")


@pytest.fixture
def a_mount(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs mounted (shared) at a directory of the test's."""
    point = tmp_path / "mounted"
    point.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(point)], check=True)
    subprocess.run(["mount", "--make-shared", str(point)], check=True)
    yield point
    subprocess.run(["umount", "-l", str(point)], check=False)  # gone if the test failed


def _mountinfo(point: Path) -> list[str]:
    return [line for line in Path("/proc/self/mountinfo").read_text().splitlines()
            if line.split()[4] == str(point)]


def test_detaching_a_call_does_not_follow_a_symlink(tmp_path: Path, a_mount: Path) -> None:
    call_dir = tmp_path / "call"
    call_dir.mkdir()
    (call_dir / "w").symlink_to(a_mount)
    sandbox_user._detach(str(call_dir))
    assert _mountinfo(a_mount)  # still mounted


def test_the_workspace_mount_is_private(a_mount: Path) -> None:
    # The workspace's mount is shared: its idmapped clone joins no peer group of it.
    assert "shared:" in _mountinfo(a_mount)[0]
    user = lease(range(SHARED, SHARED + 1))
    workspace = os.open(a_mount, os.O_RDONLY | os.O_DIRECTORY)
    try:
        user.bind_workspace(workspace)
        (point,) = _own_mounts()
        (line,) = _mountinfo(Path(point))
        assert " - " in line and "shared:" not in line.split(" - ")[0]
    finally:
        os.close(workspace)
        user.release()


@pytest.mark.parametrize("value", ["0", "nobody", "5-3", "4294967295", "1-1025"])
def test_a_bad_uid_setting_fails_closed(no_cgroup: None, value: str) -> None:
    report = isolation_report(Settings(env={UIDS_SETTING: value}))
    assert report.problem is not None and report.problem.startswith(
        "running as root, where the sandbox must run under a uid of its own")
    assert f"({UIDS_SETTING} must " in report.problem and "\n" not in report.problem


def test_check_names_the_sandbox_uid(no_cgroup: None) -> None:
    report = isolation_report(Settings(env={UIDS_SETTING: str(REPORTED)}))
    assert report.problem is None
    assert report.processes == f"RLIMIT_NPROC {PROCESSES} under the sandbox uid {REPORTED}"


def test_check_names_the_v1_pids_cgroup_where_there_is_one() -> None:
    report = isolation_report(Settings())
    assert report.problem is None and report.processes is not None
    assert report.processes.startswith(f"a cgroup v1 pids.max of {PROCESSES} (/sys/fs/cgroup/pids/")


# ------------------------------------------------------------------------------ cgroup v2

def test_a_v2_hierarchy_without_pids_is_not_used(only_this_machines_v2: None) -> None:
    # This machine's real cgroup2 mount offers no pids (bound to v1): no v2 cgroup is made,
    # and root falls back to the sandbox uid.
    assert Cgroup.create(PROCESSES, MEMORY_BYTES) is None
    limits = limits_for_call(Settings())
    try:
        assert limits.cgroup is None and limits.user is not None
    finally:
        limits.release()


def _delegated_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, own: str,
                    enabled: str) -> Path:
    """A directory laid out as a cgroup2 mount (at an unusual place) whose ``/service`` has
    ``enabled`` in its subtree_control and this process in ``own``."""
    mount = tmp_path / "cgroup v2"
    for path, controllers, subtree in ((mount, "pids memory", "pids memory"),
                                       (mount / "service", "pids memory", enabled),
                                       (mount / "service" / "main", enabled, "")):
        path.mkdir(parents=True, exist_ok=True)
        (path / "cgroup.procs").write_text("")
        (path / "cgroup.controllers").write_text(controllers)
        (path / "cgroup.subtree_control").write_text(subtree)
    table = tmp_path / "mountinfo"
    escaped = str(mount).replace(" ", "\\040")
    table.write_text(f"41 31 0:38 / {escaped} rw,relatime - cgroup2 cgroup2 rw\n")
    mine = tmp_path / "cgroup"
    mine.write_text(f"0::{own}\n")
    monkeypatch.setattr(cgroups, "MOUNTINFO", table)
    monkeypatch.setattr(cgroups, "OWN_CGROUPS", mine)
    return mount


def test_a_delegated_v2_subtree_with_pids_is_used(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The host sits in the leaf service/main; service (its parent) has +pids +memory in its
    # subtree_control: the call's cgroup is made beside the host, in service.
    mount = _delegated_tree(tmp_path, monkeypatch, own="/service/main", enabled="pids memory")
    os.setxattr(mount / "service", "trusted.delegate", b"1")  # systemd's Delegate=yes mark
    limits = limits_for_call(Settings())
    assert limits.cgroup is not None
    # As root with a cgroup too, a sandbox uid of its own (D320): never the host's root.
    assert (limits.user is not None) == (os.geteuid() == 0)
    path = limits.cgroup.path
    assert (limits.cgroup.version, path.parent) == (2, mount / "service")
    assert path.name.startswith(f"toolhost-sandbox-{os.getpid()}-")
    assert (path / "pids.max").read_text() == str(PROCESSES)
    assert (path / "memory.max").read_text() == str(MEMORY_BYTES)
    group = f"a cgroup v2 pids.max of {PROCESSES} ({path})"
    assert limits.mechanism == (group if limits.user is None
                                else f"{group}, under the sandbox uid {limits.user.uid}")
    assert (mount / "service" / "main" / "cgroup.procs").read_text() == ""  # host not moved
    limits.release()


def test_a_v2_subtree_without_pids_enabled_is_not_used(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # service offers pids but has not enabled it, and the kernel refuses to enable it here
    # (a directory in place of the file stands for the kernel's EBUSY): the uid fallback.
    mount = _delegated_tree(tmp_path, monkeypatch, own="/service/main", enabled="")
    for path in (mount / "service", mount / "service" / "main"):
        (path / "cgroup.subtree_control").unlink()
        (path / "cgroup.subtree_control").mkdir()
    limits = limits_for_call(Settings())
    try:
        assert limits.cgroup is None and limits.user is not None
    finally:
        limits.release()


@pytest.mark.parametrize("mark", ["user.delegate", None])
def test_a_v2_parent_is_used_only_when_systemd_delegated_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mark: str | None) -> None:
    # A root unit without Delegate=yes sits in a leaf of system.slice, which offers pids: the
    # call's cgroup is made there only if the parent carries systemd's delegation mark.
    mount = _delegated_tree(tmp_path, monkeypatch, own="/service/main", enabled="pids memory")
    if mark is not None:
        os.setxattr(mount / "service", mark, b"1")
    limits = limits_for_call(Settings())
    try:
        if mark is None:
            assert limits.cgroup is None and limits.user is not None
            assert not [p for p in (mount / "service").iterdir() if p.name.startswith("toolhost")]
        else:
            assert limits.cgroup is not None and limits.cgroup.path.parent == mount / "service"
    finally:
        limits.release()


def test_a_hierarchy_found_once_is_found_again_where_it_moved(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Where the cgroups are is looked up once a process; a directory gone since (the
    # hierarchy mounted elsewhere, the same mount table file saying so) is looked up again.
    first = _delegated_tree(tmp_path / "a", monkeypatch, own="/service/main",
                            enabled="pids memory")
    os.setxattr(first / "service", "trusted.delegate", b"1")
    limits = limits_for_call(Settings())
    assert limits.cgroup is not None and limits.cgroup.path.parent == first / "service"
    limits.release()
    second = _delegated_tree(tmp_path / "b", monkeypatch, own="/service/main",
                             enabled="pids memory")
    os.setxattr(second / "service", "trusted.delegate", b"1")
    (tmp_path / "b" / "mountinfo").rename(tmp_path / "a" / "mountinfo")
    monkeypatch.setattr(cgroups, "MOUNTINFO", tmp_path / "a" / "mountinfo")
    shutil.rmtree(first)
    limits = limits_for_call(Settings())
    try:
        assert limits.cgroup is not None and limits.cgroup.path.parent == second / "service"
    finally:
        limits.release()


def test_a_dead_hosts_leftover_cgroups_are_swept_once_a_process(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression (D445): a host killed mid-call left its call's cgroup behind for good; the
    next host's first call in that parent removes those of a pid no process has."""
    mount = _delegated_tree(tmp_path, monkeypatch, own="/service/main", enabled="pids memory")
    service = mount / "service"
    os.setxattr(service, "trusted.delegate", b"1")
    gone = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1  # no process has it
    left = service / f"toolhost-sandbox-{gone}-3"   # a dead host's: removed
    busy = service / f"toolhost-sandbox-{gone}-4"   # a process still in it: the kernel refuses
    young = service / f"toolhost-sandbox-{gone}-5"  # maybe another pid namespace's host's
    alive = service / "toolhost-sandbox-1-0"        # a live host's
    huge = service / f"toolhost-sandbox-{10 ** 30}-0"  # no process could have it: removed
    other = service / "someone-else"                # not a call's cgroup
    for path in (left, busy, young, alive, other, huge):
        path.mkdir()
    (busy / "cgroup.procs").write_text("1\n")  # a plain directory with a file: rmdir fails
    old = time.time() - cgroups.LEFTOVER_AGE_S - 60
    for path in (left, busy, alive, other, huge):
        os.utime(path, (old, old))
    limits = limits_for_call(Settings())
    limits.release()
    assert limits.cgroup is not None and limits.cgroup.path.parent == service
    assert [p.exists() for p in (left, busy, young, alive, other, huge)] == [
        False, True, True, True, True, False]
    left.mkdir()
    os.utime(left, (old, old))
    limits_for_call(Settings()).release()  # once a process: not listed again each call
    assert left.exists()


def test_removing_a_cgroup_kills_what_is_left_in_it() -> None:
    group = Cgroup.create(PROCESSES, MEMORY_BYTES)
    assert group is not None  # this machine has a v1 pids hierarchy
    sleeper = subprocess.Popen(["sleep", "1000"])
    try:
        group.add(sleeper.pid)
        group.remove()
        assert sleeper.wait(BOUND_S) == -signal.SIGKILL
        assert not group.path.exists()
    finally:
        sleeper.kill()
        sleeper.wait()


@pytest.mark.parametrize(("uid_map", "root"), [
    ("         0          0 4294967295\n", True),      # the host's root
    ("         0     100000      65536\n", False),     # a container's root
    ("      1000       1000          1\n", True),      # says nothing of 0: taken as root
    (None, True),                                        # unreadable: taken as root
])
def test_only_the_kernels_root_needs_a_sandbox_uid_beside_a_cgroup(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, uid_map: str | None,
        root: bool) -> None:
    # The review of D320: a container's root (another uid to the kernel) cannot write the
    # host's /proc/sys, and forcing a sandbox uid there failed calls where the uids are not
    # mapped; a cgroup holds its processes.
    path = tmp_path / "uid_map"
    if uid_map is not None:
        path.write_text(uid_map)
    monkeypatch.setattr(limits, "UID_MAP", path)
    assert limits._kernels_root() is root
    mount = _delegated_tree(tmp_path, monkeypatch, own="/service/main", enabled="pids memory")
    os.setxattr(mount / "service", "trusted.delegate", b"1")
    called = limits_for_call(Settings())
    try:
        assert called.cgroup is not None
        assert (called.user is not None) is (root and os.geteuid() == 0)
    finally:
        called.release()
