"""Where the host's test suite spends CPU, per test file: what decides noxfile.ONE_PYTHON_ONLY.

On this 2-core machine CI is CPU-bound (the host's tests alone keep 1.75 cores busy), so what a
file costs is its CPU, not its time, and most of it is in the processes a test starts
(``toolhost serve``, MCP servers, Chromium): importing the MCP SDK alone is ~0.8 s of CPU.

    # 1. run the suite with this file as a pytest plugin (each worker writes its own lines)
    PYTHONPATH=bench TOOLHOST_CPU_DIR=/tmp/cpu pytest tests -p ci_test_cpu -n 4
    # 2. the files heavy enough to run on one Python only, by CPU
    python bench/ci_test_cpu.py /tmp/cpu

A test's CPU is its worker's own (``RUSAGE_SELF``) and that of the children it waited for
(``RUSAGE_CHILDREN``); a server a fixture starts for the whole session is in neither.
"""

from __future__ import annotations

import collections
import json
import os
import resource
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

#: A file whose tests took more CPU than this, their children included, runs on one Python
#: only; the rest are cheap enough to run on both.
HEAVY_S = 5.0


def _cpu() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Any) -> Iterator[None]:
    before = _cpu()
    yield
    after = _cpu()
    directory = Path(os.environ.get("TOOLHOST_CPU_DIR", "/tmp/toolhost-test-cpu"))
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / f"{os.getpid()}.jsonl").open("a", encoding="utf-8") as out:
        out.write(json.dumps([item.nodeid, after[0] - before[0], after[1] - before[1]]) + "\n")


def report(directory: Path) -> None:
    own: collections.Counter[str] = collections.Counter()
    children: collections.Counter[str] = collections.Counter()
    for path in directory.glob("*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            nodeid, self_s, children_s = json.loads(line)
            name = nodeid.split("::")[0]
            own[name] += self_s
            children[name] += children_s
    files = set(own) | set(children)
    heavy = {f for f in files if own[f] + children[f] > HEAVY_S}
    print(f"all files: {sum(own.values()) + sum(children.values()):.0f} s CPU "
          f"({sum(children.values()):.0f} s in child processes)")
    print(f"heavy ({len(heavy)}): {sum(own[f] + children[f] for f in heavy):.0f} s; "
          f"the other {len(files - heavy)}: {sum(own[f] + children[f] for f in files - heavy):.0f} s")
    for name in sorted(heavy, key=lambda f: -(own[f] + children[f])):
        print(f"{own[name] + children[name]:7.1f} s  (own {own[name]:5.1f})  {name}")


if __name__ == "__main__":
    report(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/toolhost-test-cpu"))
