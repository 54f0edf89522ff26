"""toolhost-email: importing a generated 10,000-message mbox, beside the standard library's own
parse of the same file, in the same run.

Each round runs every mode once, in an order that rotates from round to round, every run cold
(a fresh cache; in this process no header parsed by an earlier run is reused; the console
script and its reference are processes of their own):

- ``compat32``: the reference (issue #27): ``mailbox.mbox`` + ``email.message_from_bytes``
  (``compat32``) over every message, nothing else: no header or body decoding, no store.
- ``default`` (with ``--default``): the same with ``policy.default`` (issue #15's reference;
  five times compat32, so left out unless asked for).
- ``serial``: ``import_path`` parsing in this process (``workers=1``, a library caller's).
- ``pool``: ``import_path`` with the console script's worker pool (``workers=None``).
- ``re-import``: the serial cache again (idempotent: nothing added, nothing parsed).
- ``cli``: ``toolhost-email import`` as a process; ``compat32 cli``: the reference as one.

Printed: each mode's median seconds and CPU seconds (the workers' included) over the rounds,
and its median ratio to ``compat32`` of the same round (the process modes to ``compat32 cli``),
with the load average before and after. Target (issue #27): the import at most 1.5x compat32.

    python bench/bench_email_import.py [--messages 10000] [--rounds 7] [--default]
"""

from __future__ import annotations

import argparse
import datetime as _dt
import email
import email.utils
import mailbox
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from email import policy
from email.headerregistry import Address
from email.message import EmailMessage
from email.parser import BytesParser
from pathlib import Path

from toolhost_email import parse
from toolhost_email.importer import import_path

ACCOUNT = "owner@example.com"
#: The reference as its own process, for the console script's row.
_REFERENCE_SCRIPT = """
import email, mailbox, sys
box = mailbox.mbox(sys.argv[1], create=False)
for key in box.iterkeys():
    email.message_from_bytes(box.get_bytes(key))
"""


def _message(i: int) -> EmailMessage:
    m = EmailMessage()
    sender = i % 400
    m["From"] = Address(f"Zoë Sender {sender}", f"sender{sender}", f"example{sender % 40}.org")
    m["To"] = Address("Owner", "owner", "example.com")
    m["Subject"] = f"Grüße, report {i} — weekly"
    m["Message-ID"] = f"<msg{i}@example{sender % 40}.org>"
    m["Date"] = email.utils.format_datetime(
        _dt.datetime.fromtimestamp(1_700_000_000 + 3600 * i, _dt.UTC))
    if i % 3:
        m["In-Reply-To"] = f"<msg{i - 1}@example.org>"
        m["References"] = f"<msg{i // 10 * 10}@example.org> <msg{i - 1}@example.org>"
    if i % 5 == 0:
        m["List-Id"] = f"Weekly news <news{sender % 20}.example.org>"
        m["List-Unsubscribe"] = f"<https://example.org/u/{i}>, <mailto:u@example.org>"
        m["List-Unsubscribe-Post"] = "List-Unsubscribe=One-Click"
    body = f"Hello,\n\nline {i} of the report.\n" + "Some text of a mail body. " * 20
    m.set_content(body)
    if i % 2:
        m.add_alternative(f"<html><body><p>{body}</p></body></html>", subtype="html")
    return m


def _write_mbox(path: Path, count: int) -> None:
    box = mailbox.mbox(path)
    box.lock()
    for i in range(count):
        box.add(_message(i))
    box.flush()
    box.unlock()
    box.close()


def _compat32(path: Path) -> None:
    box = mailbox.mbox(path, create=False)
    for key in box.iterkeys():
        email.message_from_bytes(box.get_bytes(key))
    box.close()


def _default(path: Path) -> None:
    parser = BytesParser(policy=policy.default)
    box = mailbox.mbox(path, create=False)
    for key in box.iterkeys():
        parser.parsebytes(box.get_bytes(key))
    box.close()


def _cpu() -> float:
    """CPU seconds of this process and of its children waited for (the pool's workers)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _timed(work: Callable[[], object]) -> tuple[float, float]:
    parse._PARSED.clear()  # cold, as one `toolhost-email import` process is
    cpu, start = _cpu(), time.perf_counter()
    work()
    return time.perf_counter() - start, _cpu() - cpu


def _modes(src: Path, tmp: Path, n: int, round_: int,
           default: bool) -> dict[str, Callable[[], object]]:
    serial, pool, cli = tmp / f"serial{round_}", tmp / f"pool{round_}", tmp / f"cli{round_}"
    script = Path(sys.executable).with_name("toolhost-email")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "toolhost_email.cli"]

    def imported(data_dir: Path, workers: int | None, added: int) -> None:
        assert import_path(data_dir, ACCOUNT, src, workers=workers).added == added

    def console() -> None:
        subprocess.run([*command, "import", "--account", ACCOUNT, str(src)], check=True,
                       stdout=subprocess.DEVNULL, env={**os.environ, "TOOLHOST_DATA_DIR": str(cli)})

    modes: dict[str, Callable[[], object]] = {
        "compat32": lambda: _compat32(src),
        "default": lambda: _default(src),
        "serial": lambda: imported(serial, 1, n),
        "pool": lambda: imported(pool, None, n),
        "re-import": lambda: imported(serial, 1, 0),
        "cli": console,
        "compat32 cli": lambda: subprocess.run(
            [sys.executable, "-c", _REFERENCE_SCRIPT, str(src)], check=True),
    }
    if not default:
        del modes["default"]
    return modes


def _report(n: int, seconds: dict[str, list[float]], cpu: dict[str, list[float]]) -> None:
    rounds = len(seconds["compat32"])
    print(f"median of {rounds} rounds; ratio: the median of each round's time over its "
          "reference's (target: import at most 1.5x compat32)")
    print(f"{'mode':14} {'seconds':>8} {'(min-max)':>14} {'msgs/s':>8} {'CPU s':>6} "
          f"{'x ref':>6}  reference")
    for name, values in seconds.items():
        reference = "compat32 cli" if name == "cli" else "compat32"
        ratio = statistics.median(v / r for v, r in zip(values, seconds[reference], strict=True))
        median = statistics.median(values)
        print(f"{name:14} {median:8.2f} {f'({min(values):.2f}-{max(values):.2f})':>14} "
              f"{n / median:8,.0f} {statistics.median(cpu[name]):6.2f} {ratio:6.2f}  "
              f"{reference if name != reference else ''}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=10_000)
    ap.add_argument("--rounds", "--runs", type=int, default=7)
    ap.add_argument("--default", action="store_true", help="also the policy.default parse")
    args = ap.parse_args()
    n = args.messages
    seconds: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "export.mbox"
        _write_mbox(src, n)
        print(f"mbox: {n} messages, {src.stat().st_size / 1e6:.1f} MB; {os.cpu_count()} CPUs")
        for round_ in range(args.rounds):
            modes = _modes(src, Path(tmp), n, round_, args.default)
            names = list(modes)
            # re-import reads the serial cache: it runs after serial, wherever the turn starts
            order = names[round_ % len(names):] + names[:round_ % len(names)]
            order.remove("re-import")
            order.insert(order.index("serial") + 1, "re-import")
            load = os.getloadavg()[0]
            for name in order:
                wall, used = _timed(modes[name])
                seconds.setdefault(name, []).append(wall)
                cpu.setdefault(name, []).append(used)
            print(f"round {round_} (load {load:.1f}-{os.getloadavg()[0]:.1f}): " + "  ".join(
                f"{name} {seconds[name][-1]:.2f}s" for name in names))
            for cache in Path(tmp).glob(f"*{round_}"):  # each round's caches, some 30 MB each
                shutil.rmtree(cache)
        seconds = {name: seconds[name] for name in names}
        _report(n, seconds, cpu)


if __name__ == "__main__":
    main()
