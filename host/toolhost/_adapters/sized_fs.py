"""A workspace as a filesystem of its own, sized to the workspace quota (D265, D267).

Polling a workspace's usage lets parallel writers pass the quota before the poll sees them
(issue #26: 120 ``fallocate`` put 7 GiB past a 1 GiB quota). A filesystem holds the bound for
every writer at once: each generation the host makes is an ext4 filesystem, loop-mounted
``nosuid,nodev`` on the generation's directory, backed by a sparse image of exactly the
quota beside it. A write past it fails with ENOSPC, whoever makes it. The data directory's
filesystem holds at most the image's size for it (plus the image's own extent index there, a
few KiB), and only what has been written: ext4's metadata (about 3% of the quota, mostly
inode tables) is taken from the quota, so a workspace holds somewhat less than the quota.

Cheap to make and release (D267): no process is spawned per generation. ``mkfs.ext4`` runs
once per workspaces directory and quota, making an empty filesystem (the template,
``.sized-v2-<quota>-<uid>-<gid>.ext4``, made under a lock and renamed into place); a generation's
image is a sparse copy of it (a reflink where the filesystem has them, else its ~80 KiB of
allocated extents) given a UUID and directory-hash seed of its own in the superblock, bound
to a free loop device (``LOOP_CONFIGURE``, autoclear: the device goes with the last unmount)
and mounted with mount(2); released with umount2(``MNT_DETACH``).

Only where the host may mount: CAP_SYS_ADMIN, ``mkfs.ext4`` and loop devices. Elsewhere (an
unprivileged user, a container without loop devices or that capability, a template or
workspaces directory another user could write) ``problem`` says why and a generation is a
plain directory, whose quota only a tool's own check bounds. A make that fails for a reason
of the moment (ENOSPC copying the image, no free loop device, EMFILE, ENOMEM...) leaves that
one generation a plain directory; the next make tries again (D265).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import shutil
import stat
import struct
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

__all__ = ["IMAGE_SUFFIX", "SizedFilesystems", "is_mounted", "template_name"]

#: The image's name beside its generation's directory: ``<gen>.img``.
IMAGE_SUFFIX = ".img"
#: Bytes of the filesystem per inode: the default 1 GiB holds 131 072 files and directories.
#: An inode costs 256 bytes of the quota whether used or not (1/32 of it at this ratio).
_BYTES_PER_INODE = 8192
#: The template's format: bumped whenever the ``mkfs.ext4`` options change, so an old
#: template is never copied for a new generation.
_TEMPLATE_VERSION = 2
#: Where the tools are looked for (a service's PATH may lack the sbin directories).
_TOOL_PATH = "/usr/sbin:/sbin:/usr/bin:/bin"
_CAP_SYS_ADMIN = 21
_TOOL_TIMEOUT_S = 60
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)

# <linux/loop.h>, <linux/fs.h>, <sys/mount.h>
_LOOP_SET_FD = 0x4C00
_LOOP_CLR_FD = 0x4C01
_LOOP_SET_STATUS64 = 0x4C04
_LOOP_CONFIGURE = 0x4C0A
_LOOP_CTL_GET_FREE = 0x4C82
_LO_FLAGS_AUTOCLEAR = 4
_LO_NAME_SIZE = 64
#: struct loop_info64: five __u64, four __u32, lo_file_name[64], lo_crypt_name[64],
#: lo_encrypt_key[32], lo_init[2] (__u64): 232 bytes. struct loop_config: fd, block_size,
#: the loop_info64, __reserved[8] (__u64): 304 bytes.
_LOOP_INFO64 = struct.Struct("=5Q4I64s64s32s2Q")
_LOOP_CONFIG = struct.Struct(f"=II{_LOOP_INFO64.size}s64x")
_FICLONE = 0x40049409
_MS_NOSUID = 2
_MS_NODEV = 4
_MS_PRIVATE = 1 << 18
_MNT_DETACH = 2
_UMOUNT_NOFOLLOW = 8
#: Free loop devices tried before giving up: each EBUSY is another thread or process that
#: was given the same free device and bound it first, so a retry is progress.
_LOOP_ATTEMPTS = 64
#: errno opening a loop device or /dev/loop-control that no retry changes.
_NO_DEVICE = (errno.ENOENT, errno.ENODEV, errno.ENXIO, errno.EPERM, errno.EACCES)

# The ext4 superblock: 1024 bytes at byte 1024.
_SB_OFFSET = 1024
_SB_SIZE = 1024
_SB_MAGIC = 0xEF53
_SB_MAGIC_AT = 0x38
_SB_INCOMPAT_AT = 0x60
_SB_RO_COMPAT_AT = 0x64
_SB_UUID_AT = 0x68
_SB_HASH_SEED_AT = 0xEC
_SB_CHECKSUM_AT = 0x3FC
_RO_COMPAT_GDT_CSUM = 0x10
_RO_COMPAT_METADATA_CSUM = 0x400
_INCOMPAT_CSUM_SEED = 0x2000


def is_mounted(path: Path) -> bool:
    """Whether a filesystem is mounted on ``path`` (never follows a symlink there)."""
    return os.path.ismount(path) and not path.is_symlink()


def template_name(quota_bytes: int) -> str:
    """The template's file name in its directory, for this quota and this process's user."""
    return f".sized-v{_TEMPLATE_VERSION}-{quota_bytes}-{os.getuid()}-{os.getgid()}.ext4"


def _may_mount() -> bool:
    """Whether the effective capabilities include CAP_SYS_ADMIN: root in a container that
    dropped it (Docker's default) cannot mount either."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) >> _CAP_SYS_ADMIN & 1)
    except (OSError, ValueError):
        pass
    return os.geteuid() == 0  # no /proc: as before, root is taken to be able to


def _run(argv: list[str]) -> None:
    """Run one of the tools; its first line of stderr is the error.

    :raises OSError: it could not start, or failed.
    """
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, env={"PATH": _TOOL_PATH, "LC_ALL": "C"},
                              timeout=_TOOL_TIMEOUT_S, check=False)
    except (FileNotFoundError, PermissionError) as exc:  # no such tool here: for good
        raise _Structural(exc.errno, f"{Path(argv[0]).name} could not run ({exc})") from None
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise OSError(f"{Path(argv[0]).name} could not run ({exc})") from None
    if done.returncode != 0:
        lines = done.stderr.decode("utf-8", errors="replace").strip().splitlines()
        raise OSError(f"{Path(argv[0]).name} failed: "
                      f"{lines[-1] if lines else f'status {done.returncode}'}")


# ---------------------------------------------------------------------- the syscalls

_libc: ctypes.CDLL | None = None


def _c() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                               ctypes.c_ulong, ctypes.c_char_p]
        libc.mount.restype = ctypes.c_int
        libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
        libc.umount2.restype = ctypes.c_int
        _libc = libc
    return _libc


def _raise_errno(what: str, path: object, structural: tuple[int, ...] = ()) -> None:
    code = ctypes.get_errno()
    kind = _Structural if code in structural else OSError
    raise kind(code, f"{what}: {os.strerror(code)}", str(path))


#: errno of mount(2) that no retry changes: not permitted here, or no ext4 in the kernel.
_MOUNT_STRUCTURAL = (errno.EPERM, errno.EACCES, errno.ENODEV)


def mount_ext4(device: str, target: Path) -> None:
    """mount(2) ``device`` (ext4) on ``target``, ``nosuid,nodev``, and
    ``noinit_itable,nobarrier,errors=continue``, then make it private.

    ``errors=continue``: an error on a workspace's filesystem (the data disk full under the
    image, so the loop device fails a write) is the writer's EIO, never the machine's
    ``mke2fs.conf`` choice (``errors=panic`` would panic the kernel).

    ``nobarrier``: no cache flush reaches the loop device, which would fsync the image on
    the data directory's disk (at mount and unmount, and at every fsync in the workspace):
    a generation is a cache a crash discards, and an fsync waits for the host's disk under
    load (measured: unmount 7.8 ms median and 170 ms at worst with a writer beside it, 1.9
    and 15 ms without the flushes).
    """
    if _c().mount(device.encode(), os.fsencode(target), b"ext4", _MS_NOSUID | _MS_NODEV,
                  b"noinit_itable,nobarrier,errors=continue") != 0:
        _raise_errno("mount", target, structural=_MOUNT_STRUCTURAL)
    try:
        make_private(target)
    except OSError:
        with contextlib.suppress(OSError):
            unmount(target)
        raise


def make_private(target: Path) -> None:
    """mount(2) ``MS_PRIVATE`` on the mount at ``target``: under a shared parent (``/`` is,
    where systemd runs) a new mount is shared with the parent's peers; private, no mount
    made on or under it later (the sandbox's) propagates to another namespace's copy, nor
    one from there to it, and no later copy of it is kept there (D265)."""
    if _c().mount(None, os.fsencode(target), None, _MS_PRIVATE, None) != 0:
        _raise_errno("mount private", target, structural=_MOUNT_STRUCTURAL)


def unmount(target: Path) -> None:
    """umount2(2) ``target`` lazily (``MNT_DETACH``), never following a symlink there."""
    if _c().umount2(os.fsencode(target), _MNT_DETACH | _UMOUNT_NOFOLLOW) != 0:
        _raise_errno("umount", target)


#: False once the kernel refused LOOP_CONFIGURE (before 5.8): LOOP_SET_FD and
#: LOOP_SET_STATUS64 from then on.
_loop_configure = True


def _bind(device_fd: int, backing_fd: int, name: bytes) -> None:
    """Bind the loop device to the image, autoclear: unbound when its last opener (the
    mount, once it is made) lets go. EBUSY: it was bound by someone else first."""
    global _loop_configure
    info = _LOOP_INFO64.pack(0, 0, 0, 0, 0, 0, 0, 0, _LO_FLAGS_AUTOCLEAR,
                             name[:_LO_NAME_SIZE - 1], b"", b"", 0, 0)
    if _loop_configure:
        try:
            fcntl.ioctl(device_fd, _LOOP_CONFIGURE, _LOOP_CONFIG.pack(backing_fd, 0, info))
            return
        except OSError as exc:
            if exc.errno in (errno.EPERM, errno.EACCES):
                raise _Structural(exc.errno, exc.strerror) from None
            if exc.errno not in (errno.EINVAL, errno.ENOTTY):
                raise
            _loop_configure = False
    try:
        fcntl.ioctl(device_fd, _LOOP_SET_FD, backing_fd)
    except OSError as exc:
        if exc.errno in (errno.ENOTTY, errno.EPERM, errno.EACCES):
            raise _Structural(exc.errno, exc.strerror) from None  # no loop driver for us
        raise
    try:
        fcntl.ioctl(device_fd, _LOOP_SET_STATUS64, info)
    except OSError:
        with contextlib.suppress(OSError):
            fcntl.ioctl(device_fd, _LOOP_CLR_FD, 0)
        raise


def _free_loop(control: int) -> int:
    """The number of a loop device bound to nothing (made if need be): another thread or
    process may be given the same one until one of them binds it."""
    try:
        return fcntl.ioctl(control, _LOOP_CTL_GET_FREE)
    except OSError as exc:
        if exc.errno in (errno.EINVAL, errno.ENOTTY):  # a kernel without the ioctl
            raise _Structural(exc.errno, f"LOOP_CTL_GET_FREE: {exc.strerror}") from None
        raise


def attach_loop(image: Path) -> tuple[int, str]:
    """A free loop device bound to ``image`` (autoclear), and a descriptor of it that holds
    it bound until closed: mount it, then close the descriptor.

    :raises OSError: no loop device could be bound.
    """
    backing = os.open(image, os.O_RDWR | _O_CLOEXEC | os.O_NOFOLLOW)
    try:
        try:
            control = os.open("/dev/loop-control", os.O_RDWR | _O_CLOEXEC)
        except OSError as exc:
            if exc.errno in _NO_DEVICE:
                raise _Structural(exc.errno, exc.strerror, exc.filename) from None
            raise
        try:
            for _ in range(_LOOP_ATTEMPTS):
                device = f"/dev/loop{_free_loop(control)}"
                try:
                    fd = os.open(device, os.O_RDWR | _O_CLOEXEC)
                except OSError as exc:
                    if exc.errno in _NO_DEVICE:  # no device node for it (a container)
                        raise _Structural(exc.errno, exc.strerror, exc.filename) from None
                    raise
                try:
                    _bind(fd, backing, os.fsencode(image))
                except OSError as exc:
                    os.close(fd)
                    if exc.errno == errno.EBUSY:  # another one took it first: the next
                        continue
                    kind = _Structural if isinstance(exc, _Structural) else OSError
                    raise kind(exc.errno, f"{device} could not be bound to the image: "
                               f"{exc.strerror}") from None
                return fd, device
            raise OSError(errno.EBUSY, f"no free loop device after {_LOOP_ATTEMPTS} tries")
        finally:
            os.close(control)
    finally:
        os.close(backing)


# ---------------------------------------------------------------------- the image

def _extents(fd: int, size: int) -> Iterator[tuple[int, int]]:
    """The allocated ranges of a sparse file: (offset, length)."""
    offset = 0
    while offset < size:
        try:
            start = os.lseek(fd, offset, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # only a hole from here
                return
            raise
        end = os.lseek(fd, start, os.SEEK_HOLE)
        yield start, end - start
        offset = end


def _copy_range(source: int, target: int, offset: int, length: int) -> None:
    end = offset + length
    with contextlib.suppress(OSError):  # not between these filesystems: by hand below
        while offset < end:
            copied = os.copy_file_range(source, target, end - offset, offset, offset)
            if copied <= 0:
                break
            offset += copied
    while offset < end:
        chunk = os.pread(source, min(end - offset, 1 << 20), offset)
        if not chunk:
            raise OSError(errno.EIO, "the template ended early")
        offset += os.pwrite(target, chunk, offset)


def copy_sparse(source: int, target: int, size: int) -> None:
    """Make ``target`` (a new, empty file) the same as ``source``, holes and all: a reflink
    where the filesystem has them (XFS, Btrfs), else a copy of the allocated extents only."""
    try:
        fcntl.ioctl(target, _FICLONE, source)
        return
    except OSError:
        pass  # EOPNOTSUPP (ext4), EXDEV, EINVAL...: copied
    os.ftruncate(target, size)
    for offset, length in _extents(source, size):
        _copy_range(source, target, offset, length)


#: CRC-32C (Castagnoli, reflected) by byte; made on first use, whole, then published.
_CRC32C_TABLE: tuple[int, ...] = ()


def _crc32c(data: bytes, crc: int = 0xFFFFFFFF) -> int:
    """CRC-32C as ext4 keeps it: seeded with ~0, not inverted at the end."""
    global _CRC32C_TABLE
    table = _CRC32C_TABLE
    if not table:
        made = []
        for i in range(256):
            c = i
            for _ in range(8):
                c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
            made.append(c)
        table = _CRC32C_TABLE = tuple(made)
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc


def _own_identity(fd: int) -> None:
    """Give a copy of the template a UUID and a directory-hash seed of its own, as if
    ``mkfs.ext4`` had made it: in the primary superblock, whose checksum is recomputed. Only
    where nothing else is keyed by the UUID (``metadata_csum_seed``, or no checksums at all);
    elsewhere the copy keeps the template's, which the kernel allows (D267)."""
    sb = bytearray(os.pread(fd, _SB_SIZE, _SB_OFFSET))
    if len(sb) != _SB_SIZE or struct.unpack_from("<H", sb, _SB_MAGIC_AT)[0] != _SB_MAGIC:
        raise _Damaged(errno.EINVAL, "the template is not an ext4 filesystem")
    incompat, ro_compat = struct.unpack_from("<II", sb, _SB_INCOMPAT_AT)
    seeded = bool(incompat & _INCOMPAT_CSUM_SEED)
    if (ro_compat & _RO_COMPAT_METADATA_CSUM and not seeded) or ro_compat & _RO_COMPAT_GDT_CSUM:
        return  # the group descriptors' checksums are seeded by the UUID
    from toolhost._adapters.system_clock import new_id  # the one place ids are made

    sb[_SB_UUID_AT:_SB_UUID_AT + 16] = bytes.fromhex(new_id())  # a UUID4's bytes
    sb[_SB_HASH_SEED_AT:_SB_HASH_SEED_AT + 16] = bytes.fromhex(new_id())
    if ro_compat & _RO_COMPAT_METADATA_CSUM:
        struct.pack_into("<I", sb, _SB_CHECKSUM_AT, _crc32c(bytes(sb[:_SB_CHECKSUM_AT])))
    os.pwrite(fd, bytes(sb), _SB_OFFSET)


# ---------------------------------------------------------------------- once a process

_warned = threading.Lock()


def _warn(reason: str, *, structural: bool) -> None:
    """A failed make, logged: for a structural reason the first time in a process (its
    workspaces are plain directories from then on), else each time (that one is)."""
    if structural and not _warned.acquire(blocking=False):
        return
    detail = ("a workspace filesystem could not be made: this process's workspaces are "
              "plain directories, whose quota only the tools' own checks bound (D265)"
              if structural else
              "a workspace filesystem could not be made this time: this workspace is a plain "
              "directory, whose quota only the tools' own checks bound; the next one is "
              "tried again (D265)")
    try:
        from toolhost._pipeline.log import get_logger

        get_logger().warning("workspace_quota_not_held", reason=reason, detail=detail)
    except Exception:  # a log that fails never fails the workspace
        pass


class SizedFilesystems:
    """Makes and releases the filesystems of one quota. ``problem`` is asked once a process
    (and set by a make that failed for a structural reason), so a host that cannot mount
    pays nothing per generation past the first."""

    def __init__(self, quota_bytes: int) -> None:
        self.quota_bytes = quota_bytes
        self._lock = threading.Lock()
        self._problem: str | None = None
        self._checked = False
        self._mkfs: str | None = None

    def problem(self) -> str | None:
        """Why no filesystem can be made here (one line for the operator), or None. Cheap:
        privileges and tools, not a trial mount; the first ``make`` is the trial."""
        with self._lock:
            if not self._checked:
                self._problem = self._find_problem()
                self._checked = True
            return self._problem

    def _find_problem(self) -> str | None:
        if not _may_mount():
            return "the host runs without CAP_SYS_ADMIN, so it cannot mount"
        mkfs = shutil.which("mkfs.ext4", path=_TOOL_PATH)
        if mkfs is None:
            return f"mkfs.ext4 not found in {_TOOL_PATH}"
        if not os.path.exists("/dev/loop-control"):
            return "no loop devices (/dev/loop-control is missing)"
        self._mkfs = mkfs
        return None

    def make(self, directory: Path, image: Path, templates: Path | None = None) -> str | None:
        """Mount a fresh filesystem of the quota on ``directory`` (an existing, empty
        directory), backed by ``image`` (which must not exist), a copy of the quota's
        template in ``templates`` (default: ``image``'s directory; made there if missing);
        None when done, else why not (``directory`` is then left a plain directory and no
        image is left behind)."""
        problem = self.problem()
        if problem is not None or self._mkfs is None:
            return problem or "not checked"
        place = image.parent if templates is None else templates
        try:
            try:
                self._mount_copy(directory, image, place, fresh=False)
            except _Damaged:
                # A template that is not a filesystem the kernel mounts (damaged on disk, or
                # made by an mkfs.ext4 this kernel cannot read): made again, once.
                with contextlib.suppress(OSError):
                    (place / template_name(self.quota_bytes)).unlink()
                self._mount_copy(directory, image, place, fresh=True)
        except OSError as exc:
            reason = exc.strerror or str(exc)
            structural = isinstance(exc, _Structural)
            if structural:  # no retry would change it: never again in this process
                with self._lock:
                    self._problem = reason
            _warn(reason, structural=structural)  # else this one only: the next tries again
            return reason
        try:
            os.rmdir(directory / "lost+found")  # the workspace starts empty
            directory.chmod(0o700)
        except OSError as exc:
            self.release(directory, image)
            return f"the new filesystem could not be prepared ({exc.strerror})"
        return None

    def _mount_copy(self, directory: Path, image: Path, place: Path, *, fresh: bool) -> None:
        """The image, copied from the template, mounted on ``directory``; nothing of it left
        when it fails.

        :raises _Damaged: the kernel would not mount the copy of a template found there (one
            made now is not retried).
        :raises OSError: anything else, its ``strerror`` the line for the operator.
        """
        try:
            template, made = self._template(place)
        except OSError as exc:
            raise _failed("the filesystem's template could not be made", exc) from None
        try:
            fd = os.open(image, os.O_RDWR | os.O_CREAT | os.O_EXCL | _O_CLOEXEC, 0o600)
            try:
                copy_sparse(template, fd, self.quota_bytes)
                _own_identity(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                image.unlink()
            if isinstance(exc, _Damaged) and not (fresh or made):
                raise
            raise _failed("the image could not be copied from the template", exc) from None
        finally:
            os.close(template)
        try:
            device_fd, device = attach_loop(image)
            try:
                mount_ext4(device, directory)
            finally:
                os.close(device_fd)  # the mount holds the device now; else it is unbound
        except OSError as exc:
            with contextlib.suppress(OSError):
                image.unlink()
            if exc.errno in (errno.EINVAL, errno.EUCLEAN, errno.EBADMSG) and not (fresh or made):
                raise _Damaged(exc.errno, _failed("", exc).strerror) from None
            raise _failed("the image could not be mounted", exc) from None

    def _template(self, place: Path) -> tuple[int, bool]:
        """A descriptor of the quota's empty filesystem in ``place``, made (under a lock,
        renamed into place whole) if it is not there; and whether it was made now."""
        _check_owned(os.stat(place), place, "the workspaces directory")
        path = place / template_name(self.quota_bytes)
        found = self._open_template(path)
        if found is not None:
            return found, False
        lock = os.open(place / ".sized.lock", os.O_RDWR | os.O_CREAT | _O_CLOEXEC, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            found = self._open_template(path)  # made meanwhile by another
            if found is not None:
                return found, False
            # A maker that died left its temp file; an older version, its templates.
            older = [old for old in place.glob(".sized-v*.ext4")
                     if not old.name.startswith(f".sized-v{_TEMPLATE_VERSION}-")]
            for stale in [*place.glob(f".{path.name}.*.tmp"), *older]:
                with contextlib.suppress(OSError):
                    stale.unlink()
            from toolhost._adapters.system_clock import new_id

            temp = place / f".{path.name}.{os.getpid()}-{new_id()}.tmp"
            try:
                self._mkfs_image(temp)
                os.replace(temp, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    temp.unlink()
                raise
            found = self._open_template(path)
            if found is None:
                raise OSError(errno.ENOENT, "the template made is not there", str(path))
            return found, True
        finally:
            os.close(lock)

    def _open_template(self, path: Path) -> int | None:
        try:
            fd = os.open(path, os.O_RDONLY | _O_CLOEXEC | os.O_NOFOLLOW)
        except FileNotFoundError:
            return None
        try:
            info = os.fstat(fd)
            if stat.S_ISREG(info.st_mode):
                _check_owned(info, path, "the template")  # else another user's image
        except BaseException:
            os.close(fd)
            raise
        if stat.S_ISREG(info.st_mode) and info.st_size == self.quota_bytes:
            return fd
        os.close(fd)
        path.unlink()  # not one this module made: made again
        return None

    def _mkfs_image(self, image: Path) -> None:
        fd = os.open(image, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_CLOEXEC, 0o600)
        try:
            os.ftruncate(fd, self.quota_bytes)  # sparse: blocks only as they are written
        finally:
            os.close(fd)
        # No journal (a cache: a crash discards the generation), nothing reserved for root
        # (the sandbox's files are root's when the host is), 256-byte inodes (nanosecond
        # times: provenance stamps compare them), inode tables initialised as used, and the
        # checksums' seed kept apart from the UUID (each copy gets a UUID of its own; an
        # mkfs.ext4 before 1.43 has no such feature: its copies share the template's UUID);
        # errors=continue whatever the machine's mke2fs.conf says (errors=panic there would
        # panic the kernel on a workspace's I/O error).
        for features in ("^has_journal,^resize_inode,metadata_csum_seed",
                         "^has_journal,^resize_inode"):
            try:
                _run([str(self._mkfs), "-q", "-F", "-e", "continue", "-b", "4096", "-I", "256",
                      "-i", str(_BYTES_PER_INODE), "-m", "0", "-O", features, "-E",
                      f"nodiscard,lazy_itable_init=1,root_owner={os.getuid()}:{os.getgid()}",
                      str(image)])
                break
            except OSError:
                if "metadata_csum_seed" not in features:
                    raise
        fd = os.open(image, os.O_RDONLY | _O_CLOEXEC)
        try:
            os.fsync(fd)  # whole on disk before its name is: a crash leaves none or all
        finally:
            os.close(fd)

    def release(self, directory: Path, image: Path) -> bool:
        """Unmount ``directory`` if a filesystem is mounted there and remove ``image``; True
        when ``directory`` is a plain directory now (safe to remove), False when it is
        still mounted (nothing may delete under it; a later release tries again).

        Lazily (``MNT_DETACH``): a process still holding a file there (a sync tool abandoned
        at its deadline) keeps the detached filesystem until it lets go, never this path;
        the loop device goes with it (autoclear).
        """
        if is_mounted(directory):
            with contextlib.suppress(OSError):
                unmount(directory)
            if is_mounted(directory):
                return False
        with contextlib.suppress(FileNotFoundError):
            image.unlink()
        return True


class _Damaged(OSError):
    """The kernel would not mount a copy of the template."""


class _Structural(OSError):
    """A failure no retry in this process changes (not permitted, no such device, tool or
    ioctl, a template or directory another user could write): the quota is not held here.
    Any other failure (ENOSPC, no free loop device, EMFILE, ENOMEM...) fails one make."""


def _check_owned(info: os.stat_result, path: Path, what: str) -> None:
    """Refuse a file or directory the host did not make for itself: another user's, or one
    another user may write (who could swap in a crafted ext4 image that root would mount).

    :raises _Structural: it is not the host's alone.
    """
    if info.st_uid != os.geteuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise _Structural(errno.EPERM, f"{what} is not the host's alone (owner {info.st_uid}, "
                          f"mode {stat.S_IMODE(info.st_mode):o}): refused", str(path))


def _failed(what: str, exc: OSError) -> OSError:
    """``exc`` as one line for the operator: what failed, and the system's reason (a
    structural failure stays one)."""
    why = exc.strerror or str(exc)
    if exc.filename is not None and str(exc.filename) not in why:
        why = f"{why} ({exc.filename})"
    kind = _Structural if isinstance(exc, _Structural) else OSError
    return kind(exc.errno, f"{what}: {why}" if what else why)
