"""What a sized workspace generation costs to make and to release (D265, D267).

Standalone, as root on a machine with loop devices: ``python bench/bench_sized_workspace.py
[--rounds 31] [--quota 1073741824] [--dir /var/tmp]`` from the repository root. The data
directory's stand-in is a fresh temporary directory under ``--dir`` (default: the system's
temp directory), removed at the end.

Medians over ``--rounds`` rounds, every variant once a round, interleaved (the machine's
noise hits all alike), make and release timed apart:

- plain: a generation as a directory (``mkdir``, ``rmdir``): what a host that cannot mount
  pays.
- sized: ``SizedFilesystems.make`` / ``release`` as the host runs them (the template is
  made before the first round; its one ``mkfs.ext4`` is timed apart), plus the directory's
  mkdir/rmdir.
- before (D265's way, in this run): a fresh ``mkfs.ext4`` per generation, ``mount -o loop``
  and ``umount -l`` as subprocesses.
- bare syscalls (the floor of the loop mount): an image already copied, bound to a loop
  device (``LOOP_CTL_GET_FREE`` + ``LOOP_CONFIGURE``) and mount(2)ed; umount2 and unlink.
  Beside it, the copy of the template alone.
- the run's cycle: ``RunWorkspaces.start``, one write, ``end``, sized and plain.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if not any((Path(p) / "toolhost").is_dir() for p in sys.path if p):
    sys.path.insert(0, str(ROOT / "host"))

from toolhost._adapters import sized_fs  # noqa: E402
from toolhost._adapters.run_workspaces import RunWorkspaces  # noqa: E402
from toolhost._adapters.sized_fs import SizedFilesystems  # noqa: E402

MKFS_OPTIONS = ["-q", "-F", "-b", "4096", "-I", "256", "-i", "8192", "-m", "0",
                "-O", "^has_journal,^resize_inode"]


class Before(SizedFilesystems):
    """D265's way, kept here as the reference: a fresh ``mkfs.ext4`` per generation, then
    ``mount -o loop`` and ``umount -l``, each a subprocess."""

    def make(self, directory: Path, image: Path, templates: Path | None = None) -> str | None:
        with open(image, "wb") as f:
            f.truncate(self.quota_bytes)
        subprocess.run(["mkfs.ext4", *MKFS_OPTIONS, "-E",
                        f"nodiscard,lazy_itable_init=1,root_owner={os.getuid()}:{os.getgid()}",
                        str(image)], check=True, capture_output=True)
        subprocess.run(["mount", "-t", "ext4", "-o", "loop,nosuid,nodev,noinit_itable",
                        str(image), str(directory)], check=True, capture_output=True)
        os.rmdir(directory / "lost+found")
        directory.chmod(0o700)
        return None

    def release(self, directory: Path, image: Path) -> bool:
        if sized_fs.is_mounted(directory):
            subprocess.run(["umount", "-l", str(directory)], check=True, capture_output=True)
        image.unlink(missing_ok=True)
        return True


def _ms(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1000:7.2f}"


class Variant:
    def __init__(self, name: str, make: Callable[[Path], None],
                 release: Callable[[Path], None]) -> None:
        self.name, self.make, self.release = name, make, release
        self.made: list[float] = []
        self.released: list[float] = []

    def round(self, place: Path, i: int) -> None:
        directory = place / f"{self.name.split()[0]}-{i}"
        started = time.perf_counter()
        self.make(directory)
        middle = time.perf_counter()
        self.release(directory)
        ended = time.perf_counter()
        self.made.append(middle - started)
        self.released.append(ended - middle)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=31)
    parser.add_argument("--quota", type=int, default=1 << 30)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    filesystems = SizedFilesystems(args.quota)
    if filesystems.problem() is not None:
        print(f"cannot mount here: {filesystems.problem()}")
        return 1
    place = Path(tempfile.mkdtemp(prefix="bench-sized-", dir=args.dir))
    try:
        return _bench(args, filesystems, place)
    finally:
        subprocess.run(["umount", "-R", "-l", str(place)], check=False, capture_output=True)
        shutil.rmtree(place, ignore_errors=True)


def _bench(args: argparse.Namespace, filesystems: SizedFilesystems, place: Path) -> int:
    quota = args.quota
    started = time.perf_counter()
    template_fd, _ = filesystems._template(place)  # timed apart
    template_s = time.perf_counter() - started
    os.close(template_fd)
    template = place / sized_fs.template_name(quota)

    def image(directory: Path) -> Path:
        return directory.with_name(directory.name + ".img")

    def plain_make(directory: Path) -> None:
        directory.mkdir(mode=0o700)

    def plain_release(directory: Path) -> None:
        directory.rmdir()

    def sized_make(directory: Path) -> None:
        directory.mkdir(mode=0o700)
        assert filesystems.make(directory, image(directory), templates=place) is None

    def sized_release(directory: Path) -> None:
        assert filesystems.release(directory, image(directory))
        directory.rmdir()

    before = Before(quota)

    def before_make(directory: Path) -> None:
        directory.mkdir(mode=0o700)
        assert before.make(directory, image(directory)) is None

    def before_release(directory: Path) -> None:
        assert before.release(directory, image(directory))
        directory.rmdir()

    bare_copies: list[float] = []
    bare_mounts: list[float] = []

    def bare_make(directory: Path) -> None:
        directory.mkdir(mode=0o700)
        started = time.perf_counter()
        fd = os.open(image(directory), os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        source = os.open(template, os.O_RDONLY)
        sized_fs.copy_sparse(source, fd, quota)
        os.close(source)
        os.close(fd)
        copied = time.perf_counter()
        device_fd, device = sized_fs.attach_loop(image(directory))
        sized_fs.mount_ext4(device, directory)
        os.close(device_fd)
        bare_copies.append(copied - started)
        bare_mounts.append(time.perf_counter() - copied)

    def bare_release(directory: Path) -> None:
        sized_fs.unmount(directory)
        image(directory).unlink()
        directory.rmdir()

    variants = [Variant("plain", plain_make, plain_release),
                Variant("sized (now)", sized_make, sized_release),
                Variant("before (mkfs+mount+umount)", before_make, before_release),
                Variant("bare syscalls", bare_make, bare_release)]
    cycles: dict[str, list[float]] = {"plain": [], "sized": [], "before": []}
    registries = {"plain": RunWorkspaces(place / "runs-plain"),
                  "sized": RunWorkspaces(place / "runs-sized", SizedFilesystems(quota)),
                  "before": RunWorkspaces(place / "runs-before", Before(quota))}
    for i in range(args.rounds):
        for variant in variants[i % len(variants):] + variants[:i % len(variants)]:
            variant.round(place, i)
        for name, registry in registries.items():
            begun = time.perf_counter()
            workspace = registry.start(f"run-{i}")[0]
            workspace.write("a.txt", b"x")
            workspace.end()
            if i:  # the first sized one makes its template
                cycles[name].append(time.perf_counter() - begun)
    bare = variants[-1]
    bare.made = bare_mounts  # the loop device and the mount alone; the copy below
    print(f"sized workspace generations, quota {quota / 2**20:.0f} MiB, {args.rounds} rounds, "
          f"medians in ms; kernel {os.uname().release}, data in {place.parent}, load "
          f"average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"the template, once per workspaces directory and quota: {template_s * 1000:.1f} ms")
    print(f"{'variant':34} {'make':>7} {'release':>8} {'both':>7}")
    for variant in variants:
        both = [m + r for m, r in zip(variant.made, variant.released, strict=True)]
        label = "bare syscalls (loop+mount, umount)" if variant is bare else variant.name
        print(f"{label:34} {_ms(variant.made)} {_ms(variant.released):>8} {_ms(both)}")
    print(f"{'  the copy of the template alone':34} {_ms(bare_copies)}")
    print(f"{'cycle start+write+end, plain':34} {_ms(cycles['plain'])}")
    print(f"{'cycle start+write+end, sized':34} {_ms(cycles['sized'])}")
    print(f"{'cycle start+write+end, before':34} {_ms(cycles['before'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
