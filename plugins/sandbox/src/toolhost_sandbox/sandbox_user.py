"""The sandbox's own unprivileged uid, for a host that runs as root with no pids cgroup.

RLIMIT_NPROC is not enforced for root (see ``limits``), so there the launcher, once its limits
are set, drops to a dedicated uid and gid (``drop_argv``: util-linux's ``setpriv`` where the
system has one, else Python: setgroups([]), setresgid, setresuid) and execs bwrap, which builds
its sandbox with an unprivileged user namespace in which RLIMIT_NPROC counts.

Each call leases a uid of its own from ``UIDS_SETTING``'s range, so one call's processes never
eat another's budget. The lease is an exclusive ``flock`` on ``mount_base()/leases/<uid>`` (a
directory root's alone, 0700): every host process on this machine sees it taken, whatever its
network namespace, no other user can take it, and the kernel frees it when the process dies.
A uid that already owns processes is not leased, and a uid whose processes outlive the end of
a call stays leased until this process ends. The range must hold no account's uid and no
group's gid: such a user could enter a running sandbox (setns) and reach the workspace.

The workspace stays the host's on disk: the command gets an idmapped mount of it in which the
host's uid and gid read as the sandbox's, so it reads and writes every file the host's tools
wrote, and what it writes lands owned by the host. No owner or ctime changes (the host's
provenance keys on ctime). bwrap binds the workspace by path, so the idmapped mount is
attached, for the call only, at ``mount_base()/<pid>-<random>/w``: the base is root's and
traversable, the call's directory root's with the sandbox gid as group (mode 0710: bwrap, as
that gid, can traverse it), so no other local user reaches the workspace through it even
though /proc/self/mountinfo shows the path (docs/decisions.md D264).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import functools
import grp
import logging
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

from toolhost import Settings

__all__ = ["DEFAULT_UIDS", "UIDS_SETTING", "SandboxUser", "UidsInUse", "UserUnavailable",
           "drop_argv", "lease", "uid_range"]

#: The range of uids (and equal gids) the sandbox may run under, ``FIRST-LAST`` or one number.
UIDS_SETTING = "TOOLHOST_SANDBOX_UIDS"
#: 64 uids from 0x70000000: past the ranges systemd hands to users, DynamicUser= services and
#: containers (1879048192 starts the range it leaves unused), and the usual /etc/subuid ones.
DEFAULT_UIDS = "1879048192-1879048255"

_CLONE_NEWUSER = 0x10000000
_SYS_OPEN_TREE = {"x86_64": 428, "aarch64": 428}
_SYS_MOVE_MOUNT = {"x86_64": 429, "aarch64": 429}
_SYS_MOUNT_SETATTR = {"x86_64": 442, "aarch64": 442}
_OPEN_TREE_CLONE = 1
_AT_EMPTY_PATH = 0x1000
_MOVE_MOUNT_F_EMPTY_PATH = 0x4
_MOUNT_ATTR_IDMAP = 0x00100000
_MS_PRIVATE = 1 << 18
_MNT_DETACH = 2
_UMOUNT_NOFOLLOW = 0x8
_AT_FDCWD = -100
#: The most uids a range may name: each is checked for an account and a group at every call.
_MOST_UIDS = 1024
#: Ending a call's processes: pauses double from the first to the longest, and /proc is
#: scanned at most ``_MOST_SCANS`` times, however long a scan takes.
_FIRST_PAUSE_S = 0.01
_LONGEST_PAUSE_S = 0.1
_MOST_SCANS = 100
#: Drops to argv[1] (uid and gid) with no supplementary groups, then execs argv[2:]; the fds
#: the launcher was given stay open (inheritable), nothing else is done between.
_DROP = ("import os, signal, sys\n"
         "i = int(sys.argv[1]); os.setgroups([]); os.setresgid(i, i, i); os.setresuid(i, i, i)\n"
         # Python starts with these two ignored, and an exec keeps what is ignored: the
         # command gets them as any process does (as setpriv and the unprivileged path leave).
         "signal.signal(signal.SIGPIPE, signal.SIG_DFL)\n"
         "signal.signal(signal.SIGXFSZ, signal.SIG_DFL)\n"
         "os.execv(sys.argv[2], sys.argv[2:])\n")
_O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: The helper that holds a fresh user namespace open while its id maps are written.
_USERNS_HELPER = ("import ctypes, sys\n"
                  f"ok = ctypes.CDLL(None, use_errno=True).unshare({_CLONE_NEWUSER}) == 0\n"
                  "sys.stdout.write('1' if ok else '0'); sys.stdout.flush(); sys.stdin.read()\n")


class UserUnavailable(Exception):
    """No sandbox uid can be used here; ``reason`` is one line for the operator."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class UidsInUse(UserUnavailable):
    """Every uid of the range is leased by another call or runs something: for now."""


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


_libc = ctypes.CDLL(None, use_errno=True)
#: One user namespace per sandbox uid (host uid -> sandbox uid), made once, kept open.
_namespaces: dict[int, int] = {}
_namespaces_lock = threading.Lock()
#: The lease fds of uids whose processes outlived their call: held (the uid out of use) until
#: this process ends.
_kept: list[int] = []
_log = logging.getLogger(__name__)


def uid_range(settings: Settings) -> range:
    """The uids ``UIDS_SETTING`` names (``DEFAULT_UIDS`` unset).

    :raises UserUnavailable: the setting is not a range of ordinary uids, or names more than
        ``_MOST_UIDS``, or one of them is an account's uid or a group's gid.
    """
    return _checked_range((settings.get(UIDS_SETTING) or DEFAULT_UIDS).strip())


@functools.lru_cache(maxsize=8)
def _checked_range(text: str) -> range:
    """``uid_range`` of the setting's text, checked once a process: the account lookups take
    ~9 ms for the default 64 uids, and every sandboxed call asks (a bad text is not cached:
    it raises, and fails closed each time)."""
    first, _, last = text.partition("-")
    try:
        low, high = int(first), int(last or first)
    except ValueError:
        raise UserUnavailable(f"{UIDS_SETTING} must be FIRST-LAST or one uid ({text!r})") from None
    if not 0 < low <= high < 2**32 - 1:
        raise UserUnavailable(f"{UIDS_SETTING} must name uids from 1 to 4294967294 ({text!r})")
    if high - low >= _MOST_UIDS:
        raise UserUnavailable(f"{UIDS_SETTING} must name at most {_MOST_UIDS} uids ({text!r})")
    for uid in range(low, high + 1):
        for kind, lookup in (("an account's uid", pwd.getpwuid), ("a group's gid", grp.getgrgid)):
            try:
                lookup(uid)
            except KeyError:
                continue
            raise UserUnavailable(
                f"{UIDS_SETTING} must name no uid or gid in use: {uid} is {kind}, whose "
                f"processes could enter a running sandbox ({text!r})")
    return range(low, high + 1)


def _syscall(numbers: dict[str, int], *args: object) -> int:
    number = numbers.get(os.uname().machine)
    if number is None:
        raise OSError(0, f"no system call number for {os.uname().machine}")
    result = int(_libc.syscall(number, *args))
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return result


def _userns(uid: int) -> int:
    """An fd of a user namespace mapping the host's uid and gid to ``uid`` (cached)."""
    with _namespaces_lock:
        if uid in _namespaces:
            return _namespaces[uid]
        helper = subprocess.Popen(_userns_helper(), stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, env={})
        assert helper.stdin is not None and helper.stdout is not None
        try:
            if helper.stdout.read(1) != b"1":
                raise OSError(0, "a user namespace could not be created")
            proc = f"/proc/{helper.pid}"
            for name, text in (("uid_map", f"{os.geteuid()} {uid} 1\n"),
                               ("setgroups", "deny\n"),
                               ("gid_map", f"{os.getegid()} {uid} 1\n")):
                with open(f"{proc}/{name}", "w") as file:
                    file.write(text)
            fd = os.open(f"{proc}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
        finally:
            helper.stdin.close()
            helper.stdout.close()
            helper.wait()
        _namespaces[uid] = fd
        return fd


def _userns_helper() -> list[str]:
    """What holds a fresh user namespace open while its id maps are written, having written
    ``1`` once it is in it: util-linux's ``unshare`` running a shell (~2 ms to start) where
    the system has one, else this interpreter (~15-20 ms: the one start every process's first
    sandbox call, ``toolhost check``'s probe among them, pays for each uid; D322)."""
    unshare = _util_linux("unshare")
    if unshare is not None:
        return [unshare, "--user", "--", "/bin/sh", "-c", "echo 1; read _"]
    return [sys.executable, "-I", "-S", "-c", _USERNS_HELPER]


def mount_base() -> str:
    """The root-owned directory (0711) the idmapped workspaces are attached under: in /run
    (never aged by a temp cleaner) where it is writable, else the temp directory.

    :raises OSError: it exists and is not this user's alone.
    """
    parent = "/run" if os.access("/run", os.W_OK | os.X_OK) else tempfile.gettempdir()
    base = os.path.join(parent, "toolhost-sandbox")
    with contextlib.suppress(FileExistsError):
        os.mkdir(base, 0o711)
    info = os.lstat(base)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        raise OSError(0, f"{base} is not a directory of this user's alone")
    os.chmod(base, 0o711)
    return base


def _private_dir(path: str) -> None:
    """Make ``path`` a directory (0700) this user's alone, or check it is one.

    :raises OSError: it exists and is not.
    """
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
        raise OSError(0, f"{path} is not a directory of this user's alone")


def _detach(call_dir: str) -> None:
    point = os.path.join(call_dir, "w")
    _libc.umount2(point.encode(), _MNT_DETACH | _UMOUNT_NOFOLLOW)
    for path in (point, call_dir):
        with contextlib.suppress(OSError):
            os.rmdir(path)


def _detach_stale(base: str) -> None:
    """Detach what a host process that died mid-call left attached (its pid leads the name)."""
    for name in os.listdir(base):
        pid = name.partition("-")[0]
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            _detach(os.path.join(base, name))


def _processes(uids: range) -> Iterator[tuple[int, int, bool]]:
    """Every host process whose real uid is in ``uids``: its pid, that uid, and whether it
    still runs (a zombie does not: it is gone only with one thread left; a process whose main
    thread called pthread_exit shows Z while its other threads run)."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status", "rb") as status:
                text = status.read()
        except OSError:
            continue  # gone meanwhile
        real = text.partition(b"\nUid:\t")[2].split(b"\t", 1)[0]
        if not real.isdigit() or int(real) not in uids:
            continue
        threads = text.partition(b"\nThreads:\t")[2].split(b"\n", 1)[0]
        yield int(name), int(real), b"\nState:\tZ" not in text or threads != b"1"


def _processes_of(uid: int) -> tuple[list[int], bool]:
    """Host processes whose real uid is ``uid`` (zombies too), and whether any still runs."""
    found, running = [], False
    for pid, _, runs in _processes(range(uid, uid + 1)):
        found.append(pid)
        running = running or runs
    return found, running


def _owners(uids: range) -> dict[int, bool]:
    """The uids of ``uids`` that own a host process, each with whether one of them still
    runs: one scan of /proc for the whole range."""
    owners: dict[int, bool] = {}
    for _, real, runs in _processes(uids):
        owners[real] = owners.get(real, False) or runs
    return owners


@dataclass
class SandboxUser:
    """One call's lease of a sandbox uid (gid the same number), and its workspace mount."""

    uid: int
    _lease: int
    _mounted: list[tuple[str, int]] = field(default_factory=list)

    @property
    def gid(self) -> int:
        return self.uid

    def bind_workspace(self, workspace_fd: int) -> int:
        """An fd of an idmapped mount of the workspace (``workspace_fd``) that bwrap, running
        as this uid, can bind; detached again by ``release``.

        :raises OSError: the kernel, the filesystem or this process cannot make one.
        """
        tree = _syscall(_SYS_OPEN_TREE, workspace_fd, b"",
                        _OPEN_TREE_CLONE | _AT_EMPTY_PATH | os.O_CLOEXEC)
        try:
            # Private: the clone joins no peer group of the workspace's mount.
            attr = _MountAttr(_MOUNT_ATTR_IDMAP, 0, _MS_PRIVATE, _userns(self.uid))
            _syscall(_SYS_MOUNT_SETATTR, tree, b"", _AT_EMPTY_PATH, ctypes.byref(attr),
                     ctypes.sizeof(attr))
            base = mount_base()
            _detach_stale(base)
            call_dir = tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=base)
            try:
                dir_fd = os.open(call_dir, _O_DIR)
                try:
                    os.fchown(dir_fd, 0, self.gid)
                    os.fchmod(dir_fd, 0o710)
                    os.mkdir("w", 0o700, dir_fd=dir_fd)
                    _syscall(_SYS_MOVE_MOUNT, tree, b"", dir_fd, b"w", _MOVE_MOUNT_F_EMPTY_PATH)
                    fd = os.open("w", _O_DIR, dir_fd=dir_fd)
                finally:
                    os.close(dir_fd)
            except OSError:
                _detach(call_dir)
                raise
        finally:
            os.close(tree)
        self._mounted.append((call_dir, fd))
        return fd

    def release(self, *, wait_s: float = 5.0) -> None:
        """End every process left under the uid (the uid is this call's alone: a second net
        under the namespace kill, as a cgroup's is, and waited for like a cgroup's removal),
        detach the workspace mount and free the uid. A uid with processes still running after
        ``wait_s`` of pauses (or ``_MOST_SCANS`` scans of /proc) is not freed: it stays leased
        until this process ends, and this is logged. Idempotent."""
        if self._lease < 0:
            return  # released already
        pause, slept, pause_s, scans = threading.Event(), 0.0, _FIRST_PAUSE_S, 1
        left, running = _processes_of(self.uid)
        while running and slept < wait_s and scans < _MOST_SCANS:
            for pid in left:  # zombies too: harmless
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            pause.wait(pause_s)
            slept, pause_s = slept + pause_s, min(pause_s * 2, _LONGEST_PAUSE_S)
            left, running = _processes_of(self.uid)
            scans += 1
        while self._mounted:
            call_dir, fd = self._mounted.pop()
            os.close(fd)
            _detach(call_dir)
        lease_fd, self._lease = self._lease, -1
        if running:
            _kept.append(lease_fd)
            _log.error("sandbox uid %d kept out of use until this process ends: its processes "
                       "%s outlived the call", self.uid, left)
        else:
            os.close(lease_fd)


def drop_argv(user: SandboxUser, argv: list[str]) -> list[str]:
    """``argv`` run as ``user``: util-linux's ``setpriv`` drops and execs it where the system
    has one root's alone (~2 ms), else this interpreter, isolated (``-I -S``: ~12 ms a call,
    D322). Either way: no supplementary groups, real, effective and saved ids the sandbox's."""
    setpriv = _setpriv()
    if setpriv is not None and not _names_an_account(user.uid):
        return [setpriv, f"--reuid={user.uid}", f"--regid={user.gid}", "--clear-groups", "--",
                *argv]
    return [sys.executable, "-I", "-S", "-c", _DROP, str(user.uid), *argv]


def _names_an_account(number: int) -> bool:
    """Whether a user or a group is *named* ``number``: setpriv takes ``--reuid``/``--regid``
    as a name first, so it would drop to that account's id (root's, for a line
    ``1879048232:x:0:0``) instead of the number's (a review found it)."""
    for lookup in (pwd.getpwnam, grp.getgrnam):
        try:
            lookup(str(number))
        except KeyError:
            continue
        return True
    return False


#: Where ``setpriv`` is looked for: the system's own directories, never the host's PATH (it
#: runs as root).
_SYSTEM_BIN = "/usr/bin:/bin:/usr/sbin:/sbin"


def _setpriv() -> str | None:
    """The system's ``setpriv`` (``_util_linux``); None: the Python dropper."""
    return _util_linux("setpriv")


@functools.cache
def _util_linux(name: str) -> str | None:
    """The system's util-linux ``name``, if it is util-linux's (BusyBox's applets of the same
    names lack options used here) and a regular file root owns and nobody else may write, as
    is every directory above it; None otherwise (the Python way then). Run as root: never
    looked for on the host's PATH."""
    found = shutil.which(name, path=_SYSTEM_BIN)
    if found is None:
        return None
    try:
        real = os.path.realpath(found)
        for place in (real, *_parents(real), *_parents(found)):
            info = os.stat(place)
            if info.st_uid != 0 or info.st_mode & 0o022:
                return None
        if not stat.S_ISREG(os.stat(real).st_mode):
            return None
        # The path found, not the real one: a multi-call binary tells its applets by argv[0].
        version = subprocess.run([found, "--version"], capture_output=True, env={}, timeout=10,
                                 check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return found if version.returncode == 0 and b"util-linux" in version.stdout else None


def _parents(path: str) -> list[str]:
    parents = []
    while (parent := os.path.dirname(path)) != path:
        parents.append(parent)
        path = parent
    return parents


def lease(uids: range) -> SandboxUser:
    """The first uid of ``uids`` no call (of any host process here) holds now and that owns
    no process; else the first that owns only zombies.

    A zombie is gone but for its parent's reaping, which a loaded machine delays: a call's
    processes are reaped after its uid was freed. Each still counts against the next call's
    cap of PROCESSES under that uid, so a uid owning none is tried first. One scan of /proc
    orders the uids before any is locked (a lock held while looking further would turn away
    a concurrent lease that needed it).

    :raises UserUnavailable: every one is taken, or the lease directory is not usable.
    """
    try:
        leases = os.path.join(mount_base(), "leases")
        _private_dir(leases)
        dir_fd = os.open(leases, _O_DIR)
    except OSError as exc:
        raise UserUnavailable(f"no lease directory for the sandbox uids ({exc.strerror})") from None
    owners = _owners(uids)
    # Not one that runs something: not a call's (a call's uid is locked), so not ours to kill.
    candidates = sorted((uid for uid in uids if not owners.get(uid, False)),
                        key=lambda uid: uid in owners)  # stable: in order, zombies' last
    try:
        for uid in candidates:
            try:
                held = os.open(str(uid), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                               0o600, dir_fd=dir_fd)
            except OSError as exc:
                raise UserUnavailable(
                    f"no lease file for the sandbox uid {uid} ({exc.strerror})") from None
            try:
                fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(held)
                continue  # another call's
            return SandboxUser(uid, held)
    finally:
        os.close(dir_fd)
    raise UidsInUse(f"all {len(uids)} sandbox uids ({UIDS_SETTING}) are in use by other calls")
