"""workspace.read_text and workspace.list_files against the plain-Python way to do the same work.

Standalone: ``python bench/bench_workspace.py`` from the repository root (``--quick`` skips the
40,000-file trees). It uses the installed toolhost and toolhost-workspace, or the source trees
beside this file if they are not installed.

The tools are timed as the host runs them: the tool body (``read_text.read_text`` /
``list_files.list_files``) called with arguments and a ``ToolExecutionContext`` whose workspace
is a real ``WorkspaceHandle`` on a real directory. Each figure is measured in a fresh Python
process (the allocator's state after one measurement moves the next one by up to 2x, see
below), as the median over REPEATS runs of a timeit run sized by ``autorange``. Peak memory is
tracemalloc's peak over one call: Python allocations, which is where text and entries live.

- read_text of a 1 MiB UTF-8 file, next to ``open().read()`` + ``hashlib.sha256`` +
  ``decode()`` of the same file, for three kinds of text (CPython stores a str at 1, 2 or 4
  bytes a character). Goal: within 1.5x.
- list_files recursive over 10,000 files, next to ``os.walk`` + a bytewise sort of every path,
  for a tree of directories and for one flat directory. Goal: within 2x, with memory bounded by
  the 1000-entry cap rather than by the size of the tree.

The read rows are repeated with glibc told to keep freed memory (``MALLOC_MMAP_THRESHOLD_`` and
``MALLOC_TRIM_THRESHOLD_`` at 64 and 128 MiB) to show where the read's extra time goes.
"""

from __future__ import annotations

import argparse
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
RETAIN = {"MALLOC_MMAP_THRESHOLD_": str(64 * MIB), "MALLOC_TRIM_THRESHOLD_": str(128 * MIB)}

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
    from toolhost_workspace import list_files, read_text

    from toolhost import Principal, ToolExecutionContext
    from toolhost._adapters.fs_workspace import WorkspaceHandle

    def context(root: Path) -> Any:
        return ToolExecutionContext(run_id="bench", principal=Principal("bench"),
                                    workspace=WorkspaceHandle(root))

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
    if kind.startswith("read"):
        ctx = context(target.parent)
        arguments = {"path": target.name}

        def tool() -> object:
            return read_text.read_text(arguments, ctx)

        text, checksum = plain_read(target)()  # type: ignore[misc]
        out = tool()
        assert out.content == text and out.structured["checksum"] == checksum  # type: ignore[attr-defined]
        function = tool if kind == "read-tool" else plain_read(target)
    else:
        ctx = context(target)
        arguments = {"path": "", "recursive": True}

        def tool() -> object:
            return list_files.list_files(arguments, ctx)

        out = tool()
        names = [e["path"] for e in out.structured["entries"]]  # type: ignore[attr-defined]
        assert names == walk_and_sort(target)()[:1000] and out.structured["truncated"]  # type: ignore[index, attr-defined]
        function = tool if kind == "list-tool" else walk_and_sort(target)
    return {"us": median_us(function), "kib": peak_kib(function)}


def measure(kind: str, target: Path, env: dict[str, str] | None = None) -> dict[str, float]:
    result = subprocess.run(
        [sys.executable, __file__, "--child", kind, str(target)], check=True,
        capture_output=True, text=True, env={**os.environ, **(env or {})},
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
          f"load average {os.getloadavg()[0]:.2f}; each figure from a fresh process")
    base = Path(tempfile.mkdtemp(prefix="toolhost-bench-"))
    try:
        print("\nread_text of a 1 MiB UTF-8 file, µs per call (goal: within 1.5x)")
        print(f"  {'text':22} {'tool':>7} {'plain':>7} {'ratio':>6} {'tool KiB':>9} "
              f"{'plain KiB':>9}   {'retained: tool':>14} {'plain':>6} {'ratio':>6}")
        (base / "read").mkdir()
        for i, (label, line) in enumerate(TEXTS.items()):
            path = base / "read" / f"text-{i}.txt"
            write_text_file(path, line)
            tool, plain = measure("read-tool", path), measure("read-plain", path)
            tool_r, plain_r = measure("read-tool", path, RETAIN), measure("read-plain", path, RETAIN)
            print(f"  {label:22} {tool['us']:7.0f} {plain['us']:7.0f} "
                  f"{tool['us'] / plain['us']:6.2f} {tool['kib']:9.0f} {plain['kib']:9.0f}   "
                  f"{tool_r['us']:14.0f} {plain_r['us']:6.0f} {tool_r['us'] / plain_r['us']:6.2f}")

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
