"""The sandbox's own unprivileged uid, for a host that runs as root with no pids cgroup.

RLIMIT_NPROC is not enforced for root (see ``limits``), so there the launcher, once its
limits are set, drops to a dedicated uid and gid (``drop_argv``: setgroups([]), setresgid,
setresuid) and execs bwrap, which builds its sandbox with an unprivileged user namespace in
which RLIMIT_NPROC counts.

Each call leases a uid of its own from ``UIDS_SETTING``'s range, so one call's processes never
eat another's budget. The lease is an abstract Unix socket bound to a name per uid: another
host process on this machine (same network namespace) sees it taken, and the kernel frees it
when the process dies.

The workspace stays the host's on disk: the command gets an idmapped mount of it in which the
host's uid and gid read as the sandbox's, so it reads and writes every file the host's tools
wrote, and what it writes lands owned by the host. No owner or ctime changes (the host's
provenance keys on ctime). bwrap binds the workspace by path, so the idmapped mount is
attached, for the call only, at ``mount_base()/<pid>-<random>/w``: the base is root's and
traversable, the call's directory the sandbox uid's alone (mode 0700), so no other local user
reaches the workspace through it even though /proc/self/mountinfo shows the path
(docs/decisions.md D264).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field

from toolhost import Settings

__all__ = ["DEFAULT_UIDS", "UIDS_SETTING", "SandboxUser", "UserUnavailable", "drop_argv", "lease",
           "uid_range"]

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
_MNT_DETACH = 2
#: Drops to argv[1] (uid and gid) with no supplementary groups, then execs argv[2:]; the fds
#: the launcher was given stay open (inheritable), nothing else is done between.
_DROP = ("import os, sys\n"
         "i = int(sys.argv[1]); os.setgroups([]); os.setresgid(i, i, i); os.setresuid(i, i, i)\n"
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


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


_libc = ctypes.CDLL(None, use_errno=True)
#: One user namespace per sandbox uid (host uid -> sandbox uid), made once, kept open.
_namespaces: dict[int, int] = {}
_namespaces_lock = threading.Lock()


def uid_range(settings: Settings) -> range:
    """The uids ``UIDS_SETTING`` names (``DEFAULT_UIDS`` unset).

    :raises UserUnavailable: the setting is not a range of ordinary uids.
    """
    text = (settings.get(UIDS_SETTING) or DEFAULT_UIDS).strip()
    first, _, last = text.partition("-")
    try:
        low, high = int(first), int(last or first)
    except ValueError:
        raise UserUnavailable(f"{UIDS_SETTING} must be FIRST-LAST or one uid ({text!r})") from None
    if not 0 < low <= high < 2**32 - 1:
        raise UserUnavailable(f"{UIDS_SETTING} must name uids from 1 to 4294967294 ({text!r})")
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
        helper = subprocess.Popen([sys.executable, "-I", "-S", "-c", _USERNS_HELPER],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, env={})
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


def _detach(call_dir: str) -> None:
    point = os.path.join(call_dir, "w")
    _libc.umount2(point.encode(), _MNT_DETACH)
    for path in (point, call_dir):
        with contextlib.suppress(OSError):
            os.rmdir(path)


def _detach_stale(base: str) -> None:
    """Detach what a host process that died mid-call left attached (its pid leads the name)."""
    for name in os.listdir(base):
        pid = name.partition("-")[0]
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            _detach(os.path.join(base, name))


def _processes_of(uid: int) -> list[int]:
    """Live (not zombie) host processes whose real uid is ``uid``."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status", "rb") as status:
                text = status.read(1024)  # State and Uid are in the first dozen lines
        except OSError:
            continue  # gone meanwhile
        real = text.partition(b"\nUid:\t")[2].split(b"\t", 1)[0]
        if real == str(uid).encode() and b"\nState:\tZ" not in text:
            found.append(int(name))
    return found


@dataclass
class SandboxUser:
    """One call's lease of a sandbox uid (gid the same number), and its workspace mount."""

    uid: int
    _lease: socket.socket
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
            attr = _MountAttr(_MOUNT_ATTR_IDMAP, 0, 0, _userns(self.uid))
            _syscall(_SYS_MOUNT_SETATTR, tree, b"", _AT_EMPTY_PATH, ctypes.byref(attr),
                     ctypes.sizeof(attr))
            base = mount_base()
            _detach_stale(base)
            call_dir = tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=base)
            try:
                os.chown(call_dir, self.uid, self.gid)
                os.mkdir(os.path.join(call_dir, "w"), 0o700)
                _syscall(_SYS_MOVE_MOUNT, tree, b"", -100, f"{call_dir}/w".encode(),
                         _MOVE_MOUNT_F_EMPTY_PATH)
            except OSError:
                _detach(call_dir)
                raise
        finally:
            os.close(tree)
        try:
            fd = os.open(f"{call_dir}/w", _O_DIR)
        except OSError:
            _detach(call_dir)
            raise
        self._mounted.append((call_dir, fd))
        return fd

    def release(self, *, wait_s: float = 5.0) -> None:
        """End every process left under the uid (the uid is this call's alone: a second net
        under the namespace kill, as a cgroup's is, and waited for like a cgroup's removal),
        detach the workspace mount and free the uid. Idempotent."""
        pause = threading.Event()
        for _ in range(max(1, int(wait_s / 0.01))):
            if self._lease.fileno() < 0:
                break  # released already
            left = _processes_of(self.uid)
            if not left:
                break
            for pid in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            pause.wait(0.01)
        while self._mounted:
            call_dir, fd = self._mounted.pop()
            os.close(fd)
            _detach(call_dir)
        self._lease.close()


def drop_argv(user: SandboxUser, argv: list[str]) -> list[str]:
    """``argv`` run as ``user``: this interpreter, isolated (``-I -S``), drops and execs it."""
    return [sys.executable, "-I", "-S", "-c", _DROP, str(user.uid), *argv]


def lease(uids: range) -> SandboxUser:
    """The first uid of ``uids`` no call (of any host process here) holds now.

    :raises UserUnavailable: every one is taken.
    """
    for uid in uids:
        held = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            held.bind(f"\0toolhost-sandbox-uid-{uid}")
        except OSError:
            held.close()
            continue
        return SandboxUser(uid, held)
    raise UserUnavailable(f"all {len(uids)} sandbox uids ({UIDS_SETTING}) are in use by other "
                          "calls")
