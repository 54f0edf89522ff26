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

import os
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from sandbox_support import ALLOW, BOUND_S, NAME, structured
from toolhost import Settings, ToolFailureKind
from toolhost.testing import Harness, Run
from toolhost_sandbox import cgroups
from toolhost_sandbox.limits import MEMORY_BYTES, PROCESSES, Cgroup, limits_for_call
from toolhost_sandbox.readiness import isolation_report
from toolhost_sandbox.sandbox_user import DEFAULT_UIDS, UIDS_SETTING, lease, uid_range

CODE = "tool.upstream_unavailable.isolation_unavailable"
FIRST_UID = int(DEFAULT_UIDS.split("-")[0])
#: Each test that looks for its sandbox's processes or mount on the host runs under a uid of
#: its own (the default range's last ones), so another test process here cannot confuse it.
LEASED, BOMB, TAKEN, REPORTED = (FIRST_UID + 63 - i for i in range(4))

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the uid fallback is root's only")


def _pause(seconds: float) -> None:
    threading.Event().wait(seconds)


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
        for _ in range(int(BOUND_S / 0.05)):
            if (root / "ready").exists():
                break
            _pause(0.05)
        assert (root / "ready").exists()
        assert _running_as(LEASED)  # bwrap and the command: real uid the sandbox's
        # The workspace's idmapped mount, while it exists, is reachable by no other local user:
        # mountinfo shows its path to anyone, so its directory is the sandbox uid's alone.
        (point,) = _own_mounts()
        call_dir = os.stat(Path(point).parent)
        assert (call_dir.st_uid, call_dir.st_mode & 0o777) == (LEASED, 0o700)
        assert os.stat(Path(point).parent.parent).st_mode & 0o777 == 0o711
    finally:
        run.cancellation.cancel()
        worker.join(BOUND_S)
    assert not worker.is_alive()
    _pause(0.5)
    assert _running_as(LEASED) == []


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
    _pause(0.5)
    assert _running_as(BOMB) == []


def test_the_workspace_round_trip_under_the_sandbox_uid(
        no_cgroup: None, toolhost_host: Harness, run: Run, root: Path) -> None:
    # The host's tools write as root (atomic writes: mode 0600 files); the command reads and
    # changes them and adds its own; the host reads all of it, and every owner on disk is
    # still the host's. A file the command did not touch keeps its provenance: no owner or
    # ctime was changed to let the sandbox in.
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


@pytest.fixture
def one_uid_taken() -> Iterator[int]:
    held = lease(range(TAKEN, TAKEN + 1))
    yield TAKEN
    held.release()


@pytest.mark.parametrize("toolhost_settings", [{UIDS_SETTING: str(TAKEN)}], indirect=True)
def test_no_free_sandbox_uid_fails_closed_in_one_line(
        no_cgroup: None, one_uid_taken: int, toolhost_host: Harness, run: Run,
        root: Path) -> None:
    outcome = toolhost_host.call(NAME, {"command": "touch ran", "timeout_s": 10}, run=run)
    assert outcome.failure is not None
    assert (outcome.failure.reason_code, outcome.failure.kind) == (
        CODE, ToolFailureKind.UPSTREAM_UNAVAILABLE)
    assert not (root / "ran").exists()
    detail = toolhost_host.record(outcome.invocation_id).failure_detail  # type: ignore[arg-type]
    assert detail == {"problem": (
        "running as root, where RLIMIT_NPROC is not enforced, with no writable pids cgroup "
        "(v1, or a v2 subtree with pids) to limit processes and no sandbox uid to run under "
        f"(all 1 sandbox uids ({UIDS_SETTING}) are in use by other calls); give the host a "
        "pids cgroup, or run it as an unprivileged user")}


@pytest.mark.parametrize("value", ["0", "nobody", "5-3", "4294967295"])
def test_a_bad_uid_setting_fails_closed(no_cgroup: None, value: str) -> None:
    report = isolation_report(Settings(env={UIDS_SETTING: value}))
    assert report.problem is not None and report.problem.startswith(
        "running as root, where RLIMIT_NPROC is not enforced")
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
    limits = limits_for_call(Settings())
    assert limits.cgroup is not None and limits.user is None
    path = limits.cgroup.path
    assert (limits.cgroup.version, path.parent) == (2, mount / "service")
    assert path.name.startswith(f"toolhost-sandbox-{os.getpid()}-")
    assert (path / "pids.max").read_text() == str(PROCESSES)
    assert (path / "memory.max").read_text() == str(MEMORY_BYTES)
    assert limits.mechanism == f"a cgroup v2 pids.max of {PROCESSES} ({path})"
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
