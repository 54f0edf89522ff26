"""toolhost-email: ``import_path`` of a generated 10,000-message mbox, messages per second.

Each run imports the same mbox into a fresh cache three ways, interleaved: parsing in the
importing process (``workers=1``, what a library caller gets), with the console script's worker
pool (``workers=None``: the CPU count, at most 4), and again into the filled cache (idempotent:
nothing added, nothing parsed). Beside them, in the same run, the reference: the standard
library alone reading the mbox and parsing every message with ``policy.default``, nothing else
(no body decoding, no store). Every run starts cold: no header parsed by an earlier run is
reused. Target (issue #15): at least 2,000 messages per second.

    python bench/bench_email_import.py [--messages 10000] [--runs 5]
"""

from __future__ import annotations

import argparse
import datetime as _dt
import email.utils
import mailbox
import statistics
import tempfile
import time
from email import policy
from email.headerregistry import Address
from email.message import EmailMessage
from email.parser import BytesParser
from pathlib import Path

from toolhost_email import parse
from toolhost_email.importer import import_path


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


def _bare_parse(path: Path) -> int:
    parser = BytesParser(policy=policy.default)
    box = mailbox.mbox(path, create=False)
    n = 0
    for key in box.iterkeys():
        parser.parsebytes(box.get_bytes(key))
        n += 1
    box.close()
    return n


def _rate(count: int, work: object) -> float:
    parse._PARSED.clear()  # cold, as one `toolhost-email import` process is
    t0 = time.perf_counter()
    assert callable(work)
    work()
    return count / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    n = args.messages
    figures: dict[str, list[float]] = {"serial": [], "pool": [], "re-import": [], "bare": []}
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "export.mbox"
        _write_mbox(src, n)
        print(f"mbox: {n} messages, {src.stat().st_size / 1e6:.1f} MB")
        for run in range(args.runs):
            one, pool = Path(tmp) / f"serial{run}", Path(tmp) / f"pool{run}"

            def serial(one: Path = one) -> None:
                assert import_path(one, "owner@example.com", src).added == n

            def pooled(pool: Path = pool) -> None:
                assert import_path(pool, "owner@example.com", src, workers=None).added == n

            def again(one: Path = one) -> None:
                assert import_path(one, "owner@example.com", src).added == 0

            figures["serial"].append(_rate(n, serial))
            figures["pool"].append(_rate(n, pooled))
            figures["re-import"].append(_rate(n, again))
            figures["bare"].append(_rate(n, lambda: _bare_parse(src)))
            print(f"run {run}: " + "  ".join(f"{k} {v[-1]:,.0f}/s" for k, v in figures.items()))
    bare = statistics.median(figures["bare"])
    print("median messages/s (ratio to the stdlib bare parse; target >= 2,000/s):")
    for name, values in figures.items():
        median = statistics.median(values)
        print(f"  {name:10} {median:8,.0f}  ({min(values):,.0f}-{max(values):,.0f})  "
              f"{median / bare:.2f}x")


if __name__ == "__main__":
    main()
