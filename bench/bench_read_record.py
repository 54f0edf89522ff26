"""workspace.read_text of 1 MiB through the pipeline, next to the tool alone (issue #27).

The call's row holds its output: before issue #27 the text twice (``result_content``, and
escaped inside ``result_structured``), 2.1 MB a row; now once, by reference when large
(``toolhost._adapters.stored_output``). Rows, per call, in one process, interleaved round by
round so noise hits all alike (median of the rounds' medians):

- ``reference``: ``open().read()`` + sha256 + decode of the same file;
- ``tool alone``: the read_text body, called with the context the pipeline would build;
- ``same work``: the body, then what any record keeping the text by its content must do:
  sha256 of the text and a small row committed (the floor of this design);
- ``pipeline, same file``: ``Host.invoke`` on one event loop, the same file each call (an
  agent reading a file again: its output is already stored);
- ``pipeline, new file``: a file of other bytes each call (every output stored anew).

Then the database's growth per 1 MiB read, in pages in use once the WAL is checkpointed:
for new files, and for the same file again.

Run: python bench/bench_read_record.py [--rounds 9] [--calls 10]
(needs toolhost and toolhost-workspace installed)
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from toolhost_workspace import plugin, read_text

from toolhost._adapters.sqlite_db import DATABASE_NAME
from toolhost._testing.sqlite_size import used_bytes
from toolhost.testing import Harness

MIB = 1024 * 1024


def text_of(seed: int) -> bytes:
    line = f"{seed:08d} The quick brown fox jumps over the lazy dog, again and again.\n"
    return (line * (MIB // len(line) + 1)).encode()[:MIB]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--calls", type=int, default=10, help="calls per row per round")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="bench-read-"))
    (root / "same.txt").write_bytes(text_of(0))
    fresh = iter(range(1, 10**9))

    def new_file() -> str:
        name = f"f{next(fresh)}.txt"
        (root / name).write_bytes(text_of(int(name[1:-4])))
        return name

    with Harness.over({"toolhost-workspace": plugin}) as harness:
        host = harness.host
        run = harness.start_run(workspace=root)
        database = host.data_dir / DATABASE_NAME
        loop = asyncio.new_event_loop()

        def reference() -> None:
            data = (root / "same.txt").read_bytes()
            data.decode("utf-8")
            hashlib.sha256(data).hexdigest()

        def tool_alone() -> None:
            read_text.read_text({"path": "same.txt"},
                                harness.context(run=run, timeout_s=3600.0))

        # What any record that keeps the text by its content must do besides the tool: hash
        # the text, and commit a small row naming it (WAL, synchronous=NORMAL, as toolhost).
        floor = sqlite3.connect(root / "floor.sqlite3", isolation_level=None)
        floor.execute("PRAGMA journal_mode=WAL")
        floor.execute("PRAGMA synchronous=NORMAL")
        floor.execute("CREATE TABLE rows (id INTEGER PRIMARY KEY, digest TEXT, meta TEXT)")

        def same_work() -> None:
            output = read_text.read_text({"path": "same.txt"},
                                         harness.context(run=run, timeout_s=3600.0))
            digest = hashlib.sha256(output.content.encode()).hexdigest()
            floor.execute("INSERT INTO rows (digest, meta) VALUES (?, ?)", (digest, "x" * 800))

        def through(names: Callable[[], str]) -> Callable[[], None]:
            def call() -> None:
                outcome = loop.run_until_complete(
                    host.invoke("workspace.read_text", {"path": names()}, run=run))
                assert outcome.status.value == "succeeded", outcome.content[:200]
            return call

        # New files are written outside the timed calls: one per call, made ahead.
        ahead: list[str] = [new_file()]
        rows: dict[str, Callable[[], None]] = {
            "reference: read + sha256 + decode": reference,
            "tool alone (read_text body)": tool_alone,
            "same work: tool + sha256 + a row": same_work,
            "pipeline, same file": through(lambda: "same.txt"),
            "pipeline, new file each call": through(ahead.pop),
        }
        for action in rows.values():  # warm every path once
            action()
        per_round: dict[str, list[float]] = {name: [] for name in rows}
        for _ in range(args.rounds):
            ahead.extend(new_file() for _ in range(args.calls))
            for name, action in rows.items():
                times = []
                for _ in range(args.calls):
                    start = time.perf_counter()
                    action()
                    times.append(time.perf_counter() - start)
                per_round[name].append(statistics.median(times) * 1e3)
        tool = statistics.median(per_round["tool alone (read_text body)"])
        print(f"read_text of 1 MiB, {args.rounds} interleaved rounds of {args.calls} calls "
              "(median of the rounds' medians, ms; x the tool alone)")
        for name, values in per_round.items():
            mid = statistics.median(values)
            print(f"  {name:<38} {mid:8.3f}  ({min(values):.3f}-{max(values):.3f})  "
                  f"{mid / tool:5.2f}x")

        n = 20
        ahead.extend(new_file() for _ in range(n))
        before = used_bytes(database)
        for _ in range(n):
            rows["pipeline, new file each call"]()
        grown_new = (used_bytes(database) - before) / n
        before = used_bytes(database)
        for _ in range(n):
            through(lambda: "same.txt")()
        grown_same = (used_bytes(database) - before) / n
        print(f"database growth per 1 MiB read: new file {grown_new / MIB:.3f} MiB "
              f"({grown_new / 1024:.1f} KiB); the same file again {grown_same / 1024:.2f} KiB")
        loop.close()


if __name__ == "__main__":
    main()
