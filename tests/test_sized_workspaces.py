"""Issue #26 item 3 (D265): where the host can mount, each workspace generation it makes is a
filesystem of the quota's size, unmounted before anything removes it, whoever ends it.

Real mounts (root and loop devices); where the machine cannot mount, the tests that need one
skip with that reason and ``test_an_unprivileged_host_keeps_plain_directories`` runs instead.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import structlog
from conftest import make_plugin, make_spec, make_tool
from mount_support import mounts_under

from toolhost import Settings, ToolOutput, WorkspaceUnavailable
from toolhost._adapters import sized_fs
from toolhost._adapters.fs_workspace import remove_tree
from toolhost._adapters.run_workspaces import RunWorkspaces
from toolhost._adapters.sized_fs import SizedFilesystems, is_mounted
from toolhost._model.settings import SettingError
from toolhost.testing import Harness

MiB = 1024 * 1024
QUOTA = 16 * MiB
#: The host's own answer (CAP_SYS_ADMIN, mkfs.ext4, loop devices).
_CANNOT_MOUNT = SizedFilesystems(QUOTA).problem()
needs_mount = pytest.mark.skipif(_CANNOT_MOUNT is not None, reason=f"the host cannot mount "
                                 f"here ({_CANNOT_MOUNT}): generations stay directories")


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "workspaces"
    subprocess.run(["umount", "-R", "-l", str(tmp_path)], check=False, capture_output=True)


@needs_mount
def test_a_generation_is_a_filesystem_of_the_quota_and_its_end_removes_it(root: Path) -> None:
    registry = RunWorkspaces(root, SizedFilesystems(QUOTA))
    workspace = registry.start("run-1")[0]
    workspace.write("a.txt", b"x")
    path = workspace.root
    assert is_mounted(path) and os.listdir(path) == ["a.txt"]  # no lost+found
    image = path.with_name(path.name + ".img")
    assert os.stat(image).st_size == QUOTA
    info = os.statvfs(path)
    assert info.f_blocks * info.f_frsize <= QUOTA
    # Every writer meets the bound, the workspace tools too.
    with pytest.raises(WorkspaceUnavailable):
        workspace.write("big", b"\0" * QUOTA)
    workspace.end()
    assert not mounts_under(root) and not image.exists() and not (root / "run-1").exists()


@needs_mount
def test_a_pause_keeps_a_generation_another_process_holds_mounted_until_it_lets_go(
        root: Path) -> None:
    ours = RunWorkspaces(root, SizedFilesystems(QUOTA)).start("run-1")[0]
    ours.write("a.txt", b"x")
    theirs = RunWorkspaces(root, SizedFilesystems(QUOTA)).for_approval("run-1")
    assert theirs.read("a.txt") == b"x"
    ours.discard()  # a pause: the generation is no longer the run's, but they hold it
    assert theirs.read("a.txt") == b"x"
    theirs.write("b.txt", b"still works")
    assert len(mounts_under(root)) == 1
    theirs.close()  # the last holder unmounts and removes it
    assert not mounts_under(root)
    assert not list((root / "run-1").glob("g*"))
    ours.end()


_CRASH = """
import os, sys
from pathlib import Path
from toolhost._adapters.run_workspaces import RunWorkspaces
from toolhost._adapters.sized_fs import SizedFilesystems
workspace = RunWorkspaces(Path(sys.argv[1]), SizedFilesystems(int(sys.argv[2]))).start("run-1")[0]
workspace.write("left.txt", b"by a process that died")
os._exit(0)  # killed: nothing let go, nothing unmounted
"""


@needs_mount
def test_a_stale_generation_of_a_crashed_process_is_unmounted_before_it_is_removed(
        root: Path) -> None:
    subprocess.run([sys.executable, "-c", _CRASH, str(root), str(QUOTA)], check=True)
    (stale,) = mounts_under(root)
    assert os.listdir(stale) == ["left.txt"]
    assert RunWorkspaces(root, SizedFilesystems(QUOTA)).end("run-1")
    assert not mounts_under(root) and not (root / "run-1").exists()


@needs_mount
def test_an_approved_calls_own_workspace_is_sized_and_released(root: Path) -> None:
    alone = RunWorkspaces(root, SizedFilesystems(QUOTA)).for_approval("gone-run")
    alone.write("out.txt", b"x")
    path = alone.root
    assert is_mounted(path)
    alone.close()
    assert not path.exists() and not mounts_under(root)
    assert not list(root.rglob("*.img"))


@needs_mount
def test_remove_tree_never_removes_under_a_mounted_filesystem(root: Path) -> None:
    registry = RunWorkspaces(root, SizedFilesystems(QUOTA))
    workspace = registry.start("run-1")[0]
    workspace.write("keep.txt", b"x")
    path = workspace.root
    with pytest.raises(OSError) as raised:
        remove_tree(root)
    assert raised.value.errno == errno.EBUSY
    assert (path / "keep.txt").read_bytes() == b"x"
    workspace.end()


def _touches_nothing(arguments: object, context: object) -> ToolOutput:
    return ToolOutput(structured={"echo": "done"}, content="done")


@needs_mount
def test_a_call_that_never_touches_the_workspace_makes_no_filesystem(tmp_path: Path) -> None:
    plugin = make_plugin(tools=[make_tool(make_spec(), call=_touches_nothing)])
    with Harness.over({"fx-plugin": plugin}, data_dir=tmp_path / "data") as harness:
        run = harness.start_run()
        assert harness.call("fx.echo", {"x": "a"}, run=run).failure is None
        assert not mounts_under(tmp_path)
        assert not list((tmp_path / "data").rglob("*.img"))
        harness.end_run(run)


@needs_mount
def test_the_cost_of_a_generation(root: Path) -> None:
    """Made on first use only; measured, and bounded loosely (a slow CI machine)."""
    sized, plain = RunWorkspaces(root, SizedFilesystems(QUOTA)), RunWorkspaces(root)
    costs = {}
    for name, registry in (("sized", sized), ("plain", plain)):
        started = time.perf_counter()
        for i in range(10):
            workspace = registry.start(f"{name}-{i}")[0]
            workspace.write("a", b"x")
            workspace.end()
        costs[name] = (time.perf_counter() - started) / 10
    print(f"per generation: sized {costs['sized'] * 1000:.1f} ms, "
          f"plain {costs['plain'] * 1000:.1f} ms")
    assert costs["sized"] < 1.0
    assert not mounts_under(root)


def _loop_devices_of(image: Path) -> list[str]:
    """The loop devices bound to ``image`` (also once it is deleted: `` (deleted)``)."""
    found = []
    for backing in Path("/sys/block").glob("loop*/loop/backing_file"):
        with contextlib.suppress(OSError):
            if backing.read_text().strip().removesuffix(" (deleted)") == str(image):
                found.append(backing.parent.parent.name)
    return found


def _until(condition: Callable[[], bool], seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _made(place: Path, name: str, filesystems: SizedFilesystems) -> tuple[Path, Path]:
    directory, image = place / name, place / f"{name}.img"
    directory.mkdir(parents=True)
    assert filesystems.make(directory, image, templates=place) is None
    return directory, image


@needs_mount
def test_generations_made_in_parallel_threads_each_get_a_loop_device_of_their_own(
        root: Path) -> None:
    filesystems = SizedFilesystems(QUOTA)
    count = 24
    start = threading.Barrier(count)
    made: list[tuple[Path, Path]] = []
    errors: list[BaseException] = []

    def make(i: int) -> None:
        try:
            directory, image = root / f"g{i}", root / f"g{i}.img"
            directory.mkdir(parents=True, exist_ok=True)
            start.wait()
            assert filesystems.make(directory, image, templates=root) is None
            (directory / "whose").write_text(str(i))
            made.append((directory, image))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=make, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and len(made) == count
    devices = [_loop_devices_of(image) for _, image in made]
    assert all(len(bound) == 1 for bound in devices), devices
    assert len({bound[0] for bound in devices}) == count  # no two share a device
    for i, (directory, _) in enumerate(sorted(made, key=lambda m: int(m[0].name[1:]))):
        assert is_mounted(directory) and os.listdir(directory) == ["whose"]
        assert (directory / "whose").read_text() == str(i)
    # One template for them all, made once, and no temp file of its making left.
    assert sorted(p.name for p in root.iterdir() if p.name.startswith((".sized", "..sized"))
                  ) == [sized_fs.template_name(QUOTA), ".sized.lock"]
    for directory, image in made:
        assert filesystems.release(directory, image)
    assert not mounts_under(root)
    assert _until(lambda: not any(_loop_devices_of(image) for _, image in made))


@needs_mount
def test_a_loop_device_another_took_first_is_passed_over(root: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The race: two makers given the same free device; the one that binds it second gets
    EBUSY and goes on to the next."""
    filesystems = SizedFilesystems(QUOTA)
    theirs, their_image = _made(root, "theirs", filesystems)
    (taken,) = _loop_devices_of(their_image)
    real = sized_fs._free_loop
    asked: list[int] = []

    def same_one_first(control: int) -> int:
        asked.append(1)
        return int(taken.removeprefix("loop")) if len(asked) == 1 else real(control)

    monkeypatch.setattr(sized_fs, "_free_loop", same_one_first)
    ours, our_image = _made(root, "ours", filesystems)
    assert len(asked) == 2
    assert _loop_devices_of(our_image) not in ([], [taken])
    assert _loop_devices_of(their_image) == [taken]  # theirs untouched
    for directory, image in ((theirs, their_image), (ours, our_image)):
        assert filesystems.release(directory, image)


@needs_mount
@pytest.mark.parametrize("configure", [True, False], ids=["LOOP_CONFIGURE", "LOOP_SET_FD"])
def test_after_release_no_loop_device_stays_bound_to_the_deleted_image(
        root: Path, monkeypatch: pytest.MonkeyPatch, configure: bool) -> None:
    # LOOP_SET_FD + LOOP_SET_STATUS64: what a kernel before 5.8 gets.
    monkeypatch.setattr(sized_fs, "_loop_configure", configure)
    filesystems = SizedFilesystems(QUOTA)
    directory, image = _made(root, "g", filesystems)
    (device,) = _loop_devices_of(image)
    assert Path(f"/sys/block/{device}/loop/autoclear").read_text().strip() == "1"
    assert filesystems.release(directory, image)
    assert not image.exists() and not is_mounted(directory)
    assert _until(lambda: not _loop_devices_of(image))


@needs_mount
def test_a_file_still_open_keeps_the_detached_filesystem_until_it_is_closed(root: Path) -> None:
    filesystems = SizedFilesystems(QUOTA)
    directory, image = _made(root, "g", filesystems)
    with open(directory / "held.txt", "w+b") as held:
        assert filesystems.release(directory, image)  # lazily: the path is free at once
        assert not is_mounted(directory) and not image.exists()
        held.write(b"still works")
        held.seek(0)
        assert held.read() == b"still works"
        (device,) = _loop_devices_of(image)  # the image, deleted, stays bound meanwhile
        assert Path(f"/sys/block/{device}/loop/backing_file").read_text().strip() == (
            f"{image} (deleted)")
    assert _until(lambda: not _loop_devices_of(image))


@needs_mount
@pytest.mark.parametrize("own_identity", [True, False], ids=["own-uuid", "template-uuid"])
def test_copies_of_one_template_mounted_at_once_each_hold_their_own_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, own_identity: bool) -> None:
    """D267: each copy gets a UUID of its own; ext4 would mount copies that share the
    template's as well (mount(2) is by path), and each stays its own filesystem."""
    if not own_identity:
        monkeypatch.setattr(sized_fs, "_own_identity", lambda fd: None)
    filesystems = SizedFilesystems(QUOTA)
    made = [_made(tmp_path, f"g{i}", filesystems) for i in range(3)]
    for i, (directory, _) in enumerate(made):
        many = directory / "many"
        many.mkdir()
        for j in range(600):  # past one block of entries: a hashed (htree) directory
            (many / f"file-{i}-{j:04d}").write_bytes(b"x" * 100)
        (directory / "big").write_bytes(bytes([i]) * (2 * MiB))
    uuids, fsids = set(), set()
    for i, (directory, image) in enumerate(made):
        assert sorted(os.listdir(directory / "many"))[0] == f"file-{i}-0000"
        assert len(os.listdir(directory / "many")) == 600
        assert (directory / "big").read_bytes() == bytes([i]) * (2 * MiB)
        uuids.add(os.pread(os.open(image, os.O_RDONLY | os.O_CLOEXEC), 16, 1024 + 0x68))
        fsids.add(os.statvfs(directory).f_fsid)
    assert len(uuids) == len(fsids) == (3 if own_identity else 1)
    # Each one checks clean once unmounted, a copy given its own UUID as well.
    for directory, image in made:
        sized_fs.unmount(directory)
        assert _until(lambda image=image: not _loop_devices_of(image))
        checked = subprocess.run(["e2fsck", "-f", "-n", str(image)], capture_output=True,
                                 text=True, env={"PATH": "/usr/sbin:/sbin:/usr/bin:/bin"})
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert filesystems.release(directory, image)


@needs_mount
def test_a_generation_is_mounted_nosuid_nodev_and_without_flushes(root: Path) -> None:
    filesystems = SizedFilesystems(QUOTA)
    directory, image = _made(root, "g", filesystems)
    (line,) = [line.split() for line in Path("/proc/self/mountinfo").read_text().splitlines()
               if line.split()[4] == str(directory)]
    options, (fstype, source, super_options) = line[5].split(","), line[-3:]
    assert {"rw", "nosuid", "nodev"} <= set(options) and fstype == "ext4"
    assert source.startswith("/dev/loop")
    assert {"nobarrier", "noinit_itable"} <= set(super_options.split(","))
    assert "errors=continue" in Path(f"/proc/fs/ext4/{Path(source).name}/options").read_text()
    assert filesystems.release(directory, image)


def test_the_superblock_checksum_is_ext4s_crc32c() -> None:
    # CRC-32C's check value, and ext4's form of it: seeded with ~0, not inverted.
    assert sized_fs._crc32c(b"123456789") ^ 0xFFFFFFFF == 0xE3069283
    assert sized_fs._crc32c(b"") == 0xFFFFFFFF


@needs_mount
def test_a_damaged_template_is_made_again(root: Path) -> None:
    root.mkdir(parents=True)
    template = root / sized_fs.template_name(QUOTA)
    with open(template, "wb") as f:
        f.truncate(QUOTA)  # the right size, but zeros: not a filesystem
    filesystems = SizedFilesystems(QUOTA)
    directory, image = _made(root, "g", filesystems)
    assert is_mounted(directory)
    with open(template, "rb") as f:
        f.seek(1024 + 0x38)
        assert f.read(2) == b"\x53\xef"  # an ext4 superblock now
    assert filesystems.release(directory, image)


_STRUCTURAL_DETAIL = ("a workspace filesystem could not be made: this process's workspaces "
                      "are plain directories, whose quota only the tools' own checks bound "
                      "(D265)")
_TRANSIENT_DETAIL = ("a workspace filesystem could not be made this time: this workspace is a "
                     "plain directory, whose quota only the tools' own checks bound; the next "
                     "one is tried again (D265)")


@needs_mount
def test_a_structural_failure_leaves_plain_directories_and_warns_once_a_process(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not permitted to mount (as in a user namespace): no retry changes it."""
    monkeypatch.setattr(sized_fs, "_warned", threading.Lock())  # as in a fresh process
    root.mkdir(parents=True)
    libc = sized_fs._c()
    real_mount = libc.mount

    def refused(*args: object) -> int:
        ctypes.set_errno(errno.EPERM)
        return -1

    monkeypatch.setattr(libc, "mount", refused)
    reason = ("the image could not be mounted: mount: Operation not permitted "
              f"({root / 'g0'})")
    try:
        with structlog.testing.capture_logs() as logs:
            for i in range(2):
                filesystems = SizedFilesystems(QUOTA)
                (root / f"g{i}").mkdir()
                got = filesystems.make(root / f"g{i}", root / f"g{i}.img", templates=root)
                assert got == reason.replace("g0", f"g{i}")
                assert filesystems.problem() == got  # not tried again in this process
                assert filesystems.make(root / f"g{i}", root / f"g{i}.img") == got
                assert not (root / f"g{i}.img").exists() and not mounts_under(root)
    finally:
        monkeypatch.setattr(libc, "mount", real_mount)
    assert logs == [{"event": "workspace_quota_not_held", "log_level": "warning",
                     "reason": reason, "detail": _STRUCTURAL_DETAIL}]


@needs_mount
def test_a_transient_failure_fails_that_make_only_and_the_next_tries_again(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """F3: ENOSPC copying the image on a nearly full disk (or no free loop device, EMFILE,
    a file where the directory should be...) never turns the quota off for the process."""
    monkeypatch.setattr(sized_fs, "_warned", threading.Lock())
    root.mkdir(parents=True)
    filesystems = SizedFilesystems(QUOTA)
    real_copy = sized_fs.copy_sparse
    failures = [OSError(errno.ENOSPC, "No space left on device")]

    def copy_once_full(source: int, target: int, size: int) -> None:
        if failures:
            raise failures.pop()
        real_copy(source, target, size)

    monkeypatch.setattr(sized_fs, "copy_sparse", copy_once_full)
    with structlog.testing.capture_logs() as logs:
        (root / "g0").mkdir()
        reason = filesystems.make(root / "g0", root / "g0.img", templates=root)
        assert reason == "the image could not be copied from the template: No space left on device"
        assert filesystems.problem() is None
        assert not is_mounted(root / "g0") and not (root / "g0.img").exists()
        (root / "g1").write_bytes(b"")  # a file where the directory should be: mount refuses
        again = filesystems.make(root / "g1", root / "g1.img", templates=root)
        assert again == f"the image could not be mounted: mount: Not a directory ({root / 'g1'})"
        assert filesystems.problem() is None and not (root / "g1.img").exists()
        directory, image = _made(root, "g2", filesystems)  # the next one is held again
    assert is_mounted(directory)
    assert logs == [{"event": "workspace_quota_not_held", "log_level": "warning",
                     "reason": reason, "detail": _TRANSIENT_DETAIL},
                    {"event": "workspace_quota_not_held", "log_level": "warning",
                     "reason": again, "detail": _TRANSIENT_DETAIL}]
    assert filesystems.release(directory, image)


@needs_mount
@pytest.mark.parametrize("whose", ["template-g+w", "template-o+w", "template-other-uid",
                                   "directory-g+w", "directory-other-uid"])
def test_a_template_or_directory_another_user_could_write_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, whose: str) -> None:
    """F7: another user who could write the template (or swap it, through the directory)
    could have root mount a crafted ext4 image: refused, for good, with one warning."""
    monkeypatch.setattr(sized_fs, "_warned", threading.Lock())
    place = tmp_path / "workspaces"
    filesystems = SizedFilesystems(QUOTA)
    first, first_image = _made(place, "g0", filesystems)  # the template made, ours
    assert filesystems.release(first, first_image)
    template = place / sized_fs.template_name(QUOTA)
    target = template if whose.startswith("template") else place
    if whose.endswith("g+w"):
        target.chmod(target.stat().st_mode | 0o020)
    elif whose.endswith("o+w"):
        target.chmod(target.stat().st_mode | 0o002)
    else:
        os.chown(target, 65534, 65534)
    (place / "g1").mkdir()
    with structlog.testing.capture_logs() as logs:
        reason = filesystems.make(place / "g1", place / "g1.img", templates=place)
    assert reason is not None and "is not the host's alone" in reason, reason
    assert filesystems.problem() == reason
    assert not is_mounted(place / "g1") and not (place / "g1.img").exists()
    assert template.exists()  # refused, not replaced
    assert [entry["detail"] for entry in logs] == [_STRUCTURAL_DETAIL]


def _propagation(directory: Path) -> list[str]:
    """The optional fields of the mount at ``directory`` in mountinfo (``shared:N``...)."""
    (line,) = [line.split() for line in Path("/proc/self/mountinfo").read_text().splitlines()
               if line.split()[4] == str(directory)]
    return line[6:line.index("-")]


@needs_mount
def test_a_generation_is_a_private_mount_even_under_a_shared_parent(tmp_path: Path) -> None:
    """F4: under a shared parent (``/`` where systemd runs) a new mount is shared with the
    parent's peers; the generation's is made private."""
    parent = tmp_path / "shared"
    parent.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m,mode=0755", "parent", str(parent)],
                   check=True)
    try:
        subprocess.run(["mount", "--make-shared", str(parent)], check=True)
        assert [f for f in _propagation(parent) if f.startswith("shared:")]
        filesystems = SizedFilesystems(QUOTA)
        directory, image = _made(parent, "g", filesystems)
        assert _propagation(directory) == []  # private: no shared:, master: or unbindable
        assert filesystems.release(directory, image)
    finally:
        subprocess.run(["umount", "-R", "-l", str(parent)], check=False)


def _s_errors(image: Path) -> int:
    with open(image, "rb") as f:
        f.seek(1024 + 0x3C)
        return int.from_bytes(f.read(2), "little")


@needs_mount
def test_errors_continue_whatever_the_machines_mke2fs_conf_says(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """F8: a machine whose mke2fs.conf says errors=panic would panic on a workspace's I/O
    error; the template is made errors=continue, and mounted so."""
    conf = tmp_path / "mke2fs.conf"
    conf.write_text(Path("/etc/mke2fs.conf").read_text().replace(
        "[defaults]", "[defaults]\n\terrors = panic", 1))
    tools = tmp_path / "tools"
    tools.mkdir()
    real = sized_fs.shutil.which("mkfs.ext4", path=sized_fs._TOOL_PATH)
    wrapper = tools / "mkfs.ext4"
    wrapper.write_text(f'#!/bin/sh\nMKE2FS_CONFIG={conf} exec {real} "$@"\n')
    wrapper.chmod(0o755)
    probe = tmp_path / "probe.img"
    subprocess.run([str(wrapper), "-q", "-F", str(probe), "8M"], check=True)
    assert _s_errors(probe) == 3  # the machine's panic, as a plain mkfs.ext4 makes it
    monkeypatch.setattr(sized_fs, "_TOOL_PATH", f"{tools}:{sized_fs._TOOL_PATH}")
    filesystems = SizedFilesystems(QUOTA)
    assert filesystems.problem() is None and filesystems._mkfs == str(wrapper)
    directory, image = _made(root, "g", filesystems)
    assert _s_errors(root / sized_fs.template_name(QUOTA)) == _s_errors(image) == 1
    (line,) = [line.split() for line in Path("/proc/self/mountinfo").read_text().splitlines()
               if line.split()[4] == str(directory)]
    device = Path(line[-2]).name
    options = Path(f"/proc/fs/ext4/{device}/options").read_text().split()
    assert "errors=continue" in options
    assert filesystems.release(directory, image)


_UNPRIVILEGED = """
import importlib.util, sys
from pathlib import Path
spec = importlib.util.spec_from_file_location("sized_fs", sys.argv[2])
sized_fs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sized_fs)  # the module alone: the venv is root's, unreadable here
filesystems = sized_fs.SizedFilesystems(16 * 1024 * 1024)
directory = Path(sys.argv[1])
print(filesystems.problem())
print(filesystems.make(directory, directory.with_name("g.img")))
print(directory.with_name("g.img").exists())
"""


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists("/usr/bin/python3"),
                    reason="needs root (to become another user) and a system python3")
def test_an_unprivileged_host_keeps_plain_directories() -> None:
    place = Path(tempfile.mkdtemp(prefix="toolhost-unprivileged-"))
    try:
        directory = place / "g"
        directory.mkdir()
        os.chown(place, 65534, 65534)
        os.chown(directory, 65534, 65534)
        done = subprocess.run(
            ["/usr/bin/python3", "-c", _UNPRIVILEGED, str(directory), sized_fs.__file__],
            user=65534, group=65534, extra_groups=[], capture_output=True, text=True,
            check=True, env={"PATH": "/usr/bin:/bin"})
        reason = "the host runs without CAP_SYS_ADMIN, so it cannot mount"
        assert done.stdout.splitlines() == [reason, reason, "False"]
        assert not is_mounted(directory)
    finally:
        remove_tree(place)


@pytest.mark.parametrize("value", ["1", "16777215", "1e9", "1_000_000_000", "-5", "2000000000000"])
def test_a_quota_setting_out_of_bounds_is_refused(value: str) -> None:
    with pytest.raises(SettingError) as raised:
        Settings(env={"TOOLHOST_WORKSPACE_QUOTA_BYTES": value}).workspace_quota_bytes  # noqa: B018
    assert str(raised.value) == (
        f"TOOLHOST_WORKSPACE_QUOTA_BYTES is {value!r}, not a quota: set it to a whole number "
        "of bytes from 16777216 (16 MiB) to 1099511627776 (1 TiB), or leave it unset for "
        "1073741824 (1 GiB)")


def test_the_quota_setting_defaults_to_1_gib() -> None:
    assert Settings(env={}).workspace_quota_bytes == 1024 * MiB
    assert Settings(env={"TOOLHOST_WORKSPACE_QUOTA_BYTES": " 67108864 "}
                    ).workspace_quota_bytes == 64 * MiB

