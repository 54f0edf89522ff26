"""workspace.read_text and workspace.list_files against the plain-Python way to do the same work.

Standalone: ``python bench/bench_workspace.py`` from the repository root (``--quick`` skips the
40,000-file trees). It uses the installed toolhost and toolhost-workspace, or the source trees
beside this file if they are not installed.

The tools are timed as the host runs them: the tool body (``read_text.read_text`` /
``list_files.list_files``) called with arguments and the context the test kit's ``Harness``
builds, whose workspace is a real ``WorkspaceHandle`` on a real directory. Peak memory is
tracemalloc's peak over one call: Python allocations, which is where text and entries live.

- read_text of a 1 MiB UTF-8 file, next to ``open().read()`` + ``hashlib.sha256`` +
  ``decode()`` of the same file, for three kinds of text (CPython stores a str at 1, 2 or 4
  bytes a character), both in one long-lived process (as a server runs the tool), warmed up
  and interleaved run by run so that noise and the allocator's state hit both alike; the
  figure is the median of REPEATS runs of 20 calls. Goal (issue #11): at most 1.3x.
- list_files recursive over 10,000 files, next to ``os.walk`` + a bytewise sort of every path,
  for a tree of directories and for one flat directory, each figure from a fresh process as
  the median over REPEATS runs of a timeit run sized by ``autorange``. Goal: within 2x, with
  memory bounded by the 1000-entry cap rather than by the size of the tree.
"""

from __future__ import annotations

import argparse
import atexit
import hashlib
import importlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import timeit
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPEATS = 11
ROOT = Path(__file__).resolve().parents[1]
MIB = 1024 * 1024
#: Calls per timed read run (the median is over REPEATS such runs).
READ_CALLS = 20

#: One line per kind of text, repeated to exactly 1 MiB.
TEXTS = {
    "ASCII": "The quick brown fox jumps over the lazy dog, again and again.\n",
    "BMP (é, —, CJK)": "The quick brown fox — naïve café, 日本語, over the lazy dog.\n",
    "astral (+ emoji)": "The quick brown fox — naïve café, 日本語, 😀 over the lazy dog.\n",
}
#: (files, files per directory); per-directory >= files means one flat directory.
TREES = [(10_000, 100), (10_000, 10_000), (40_000, 100), (40_000, 40_000)]


# ---------------------------------------------------------------------------- measuring


def median_us(function: Callable[[], object]) -> float:
    """Median microseconds per call over REPEATS runs of an autoranged timeit."""
    timer = timeit.Timer(function)
    number, _ = timer.autorange()
    runs = timer.repeat(repeat=REPEATS, number=number)
    return statistics.median(runs) / number * 1e6


def peak_kib(function: Callable[[], object]) -> float:
    """tracemalloc's peak over one call, in KiB, with the result still alive."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        kept = function()
        peak = tracemalloc.get_traced_memory()[1]
        del kept
    finally:
        tracemalloc.stop()
    return peak / 1024


def _tools() -> tuple[Any, Any, Any]:
    try:
        importlib.import_module("toolhost_workspace")
    except ImportError:
        sys.path[:0] = [str(ROOT / "host"), str(ROOT / "plugins" / "workspace" / "src")]
    from toolhost_workspace import list_files, plugin, read_text

    from toolhost.testing import Harness

    # The test kit's host over the plugin: its context is the one the pipeline would build
    # (a real WorkspaceHandle on the directory, the run's artifact writer, a deadline).
    harness = Harness.over({"toolhost-workspace": plugin})
    atexit.register(harness.close)  # its data directory is a temporary one

    def context(root: Path) -> Any:
        return harness.context(run=harness.start_run(workspace=root), timeout_s=3600.0)

    return read_text, list_files, context


def plain_read(path: Path) -> Callable[[], object]:
    def run() -> object:
        with open(path, "rb") as f:
            data = f.read()
        return data.decode("utf-8"), "sha256:" + hashlib.sha256(data).hexdigest()

    return run


def walk_and_sort(root: Path) -> Callable[[], object]:
    top = str(root)

    def run() -> object:
        found: list[str] = []
        for here, dirs, files in os.walk(top):
            rel = os.path.relpath(here, top)
            prefix = "" if rel == "." else rel + "/"
            found.extend(prefix + name for name in dirs)
            found.extend(prefix + name for name in files)
        found.sort(key=os.fsencode)  # bytewise, the order the tool uses
        return found

    return run


def child(kind: str, target: Path) -> dict[str, float]:
    """One measurement, in this (fresh) process. Checks the tool against the plain way first."""
    read_text, list_files, context = _tools()
    if kind == "read":
        ctx = context(target.parent)
        arguments = {"path": target.name}

        def tool() -> object:
            return read_text.read_text(arguments, ctx)

        plain = plain_read(target)
        text, checksum = plain()  # type: ignore[misc]
        out = tool()
        assert out.content == text and out.structured["checksum"] == checksum  # type: ignore[attr-defined]
        return {**interleaved(tool, plain), "tool_kib": peak_kib(tool), "plain_kib": peak_kib(plain)}
    ctx = context(target)
    arguments = {"path": "", "recursive": True}

    def listing() -> object:
        return list_files.list_files(arguments, ctx)

    out = listing()
    names = [e["path"] for e in out.structured["entries"]]  # type: ignore[attr-defined]
    assert names == walk_and_sort(target)()[:1000] and out.structured["truncated"]  # type: ignore[index, attr-defined]
    function = listing if kind == "list-tool" else walk_and_sort(target)
    return {"us": median_us(function), "kib": peak_kib(function)}


def interleaved(tool: Callable[[], object], plain: Callable[[], object]) -> dict[str, float]:
    """Median µs per call of each, one long-lived process, warmed up, run by run in turn.

    The order flips every run: what one leaves in the allocator (a freed megabyte kept or
    returned to the system) moves the next one's page faults, in either direction."""
    for _ in range(READ_CALLS):
        tool(), plain()
    runs: dict[str, list[float]] = {"tool": [], "plain": []}
    pair = [("tool", tool), ("plain", plain)]
    for _ in range(REPEATS):
        for name, function in pair:
            runs[name].append(timeit.timeit(function, number=READ_CALLS) / READ_CALLS * 1e6)
        pair.reverse()
    return {name: statistics.median(times) for name, times in runs.items()}


def measure(kind: str, target: Path) -> dict[str, float]:
    result = subprocess.run(
        [sys.executable, __file__, "--child", kind, str(target)], check=True,
        capture_output=True, text=True,
    )
    return json.loads(result.stdout)  # type: ignore[no-any-return]


# ---------------------------------------------------------------------------- fixtures


def write_text_file(path: Path, line: str) -> None:
    encoded = line.encode("utf-8")
    data = encoded * (MIB // len(encoded))
    path.write_bytes(data + b"x" * (MIB - len(data)))  # ASCII padding: exactly 1 MiB


def make_tree(root: Path, files: int, per_directory: int) -> None:
    root.mkdir()
    if per_directory >= files:
        for i in range(files):
            (root / f"file-{i:06d}.txt").touch()
        return
    for d in range(files // per_directory):
        sub = root / f"dir-{d:04d}"
        sub.mkdir()
        for i in range(per_directory):
            (sub / f"file-{i:04d}.txt").touch()


# ---------------------------------------------------------------------------- report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the 40,000-file trees")
    parser.add_argument("--child", nargs=2, metavar=("KIND", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child[0], Path(args.child[1]))))
        return 0

    print(f"CPython {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f}")
    base = Path(tempfile.mkdtemp(prefix="toolhost-bench-"))
    try:
        print("\nread_text of a 1 MiB UTF-8 file, µs per call, tool and plain in one long-lived "
              "process (goal: at most 1.3x)")
        print(f"  {'text':22} {'tool':>7} {'plain':>7} {'ratio':>6} {'tool KiB':>9} "
              f"{'plain KiB':>9}")
        (base / "read").mkdir()
        for i, (label, line) in enumerate(TEXTS.items()):
            path = base / "read" / f"text-{i}.txt"
            write_text_file(path, line)
            read = measure("read", path)
            print(f"  {label:22} {read['tool']:7.0f} {read['plain']:7.0f} "
                  f"{read['tool'] / read['plain']:6.2f} {read['tool_kib']:9.0f} "
                  f"{read['plain_kib']:9.0f}")

        print("\nlist_files recursive, capped at 1000 entries, ms per call (goal: within 2x, "
              "memory bounded by the cap)")
        print(f"  {'tree':30} {'tool':>7} {'walk+sort':>9} {'ratio':>6} {'tool KiB':>9} "
              f"{'walk KiB':>9}")
        for files, per in TREES[:2] if args.quick else TREES:
            root = base / f"tree-{files}-{per}"
            make_tree(root, files, per)
            tool, walk = measure("list-tool", root), measure("list-walk", root)
            shape = "one directory" if per >= files else f"{files // per} dirs x {per}"
            label = f"{files:,} files, {shape}"
            print(f"  {label:30} {tool['us'] / 1000:7.2f} {walk['us'] / 1000:9.2f} "
                  f"{tool['us'] / walk['us']:6.2f} {tool['kib']:9.0f} {walk['kib']:9.0f}")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
