"""people.search over a cache of 10,000 messages and ~2,000 people, next to a plain indexed SQL
query over the same data, in one run (issue #16; target: p50 under 5 ms).

The mailbox is generated (seeded, so every run has the same one): 2,000 correspondents with
generated names (a tenth of them with accents), 10,000 messages between them and the owner,
sent and received, with Cc. It is written with the stdlib ``mailbox`` module and imported
with toolhost-email's importer (what ``toolhost-email import`` runs).

Rows, each a median over the same queries (name prefixes, address fragments, fullwidth and
upper-cased forms, a query matching nearly everyone, one matching no one):

- toolhost-people, the tool body: what one call costs the plugin, its per-call work included
  (open the cache, read its generation, open the index, compare, query, close);
- the same through the host's pipeline (validation, policy, the durable record);
- the reference: a plain indexed SQL query over the same correspondents, a table of
  (folded address, folded name) with an index on each, prefix-matched by range (the cheapest
  query an index answers: it cannot find a substring, a word inside a name, or rank), on a
  connection kept open, and with the open in each call as the tool does it.

The first call after the import rebuilds the index; its time is printed too.

Run: python bench/bench_people.py [--messages 10000] [--people 2000] [--runs 15]
"""

from __future__ import annotations

import argparse
import datetime as dt
import mailbox
import random
import sqlite3
import statistics
import tempfile
import time
import unicodedata
from collections.abc import Callable
from email.message import EmailMessage
from email.utils import format_datetime, formataddr
from pathlib import Path

GOAL_MS = 5.0
OWNER = "owner@example.com"
START = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
_SYLLABLES = ["an", "na", "ber", "to", "li", "sa", "mar", "ko", "el", "ri", "da", "vin", "jo",
              "han", "ne", "ot", "us", "ka", "mi", "lo"]
_ACCENTED = ["Zoë", "Åsa", "Jürgen", "Søren", "Ærøe", "Łukasz", "Renée", "José"]


def _word(rng: random.Random) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()


def people(count: int, rng: random.Random) -> list[tuple[str, str]]:
    found: dict[str, str] = {}
    while len(found) < count:
        first = rng.choice(_ACCENTED) if rng.random() < 0.1 else _word(rng)
        last = _word(rng)
        domain = rng.choice(["example.org", "example.net", "mail.example.com", "corp.example"])
        ascii_first = unicodedata.normalize("NFKD", first).encode("ascii", "ignore").decode()
        address = f"{ascii_first.lower()}.{last.lower()}{len(found)}@{domain}"
        found[address] = f"{first} {last}"
    return [(name, address) for address, name in found.items()]


def write_mbox(path: Path, messages: int, everyone: list[tuple[str, str]],
               rng: random.Random) -> None:
    box = mailbox.mbox(path, create=True)
    box.lock()
    try:
        for i in range(messages):
            m = EmailMessage()
            other = everyone[i % len(everyone)] if i < len(everyone) else rng.choice(everyone)
            if rng.random() < 0.3:
                m["From"], m["To"] = OWNER, formataddr(other)
            else:
                m["From"], m["To"] = formataddr(other), OWNER
            if rng.random() < 0.2:
                m["Cc"] = formataddr(rng.choice(everyone))
            m["Subject"] = f"{_word(rng)} {_word(rng)} {i}"
            m["Date"] = format_datetime(START + dt.timedelta(minutes=37 * i))
            m["Message-ID"] = f"<bench-{i}@example.org>"
            m.set_content(f"Message {i}.\n")
            box.add(m)
        box.flush()
    finally:
        box.unlock()
        box.close()


def median_ms(fn: Callable[[], object], queries: list[str], runs: int,
              arg: Callable[[str], object]) -> tuple[float, float]:
    """Median and 99th percentile, ms, of ``fn(arg(query))`` over every query, ``runs`` times."""
    times = []
    for _ in range(runs):
        for q in queries:
            a = arg(q)
            start = time.perf_counter()
            fn(a)  # type: ignore[call-arg]
            times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.99) - 1]


def reference_table(path: Path, everyone: list[tuple[str, str]]) -> None:
    from toolhost_people.fold import fold

    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE correspondents (address TEXT PRIMARY KEY, name TEXT,"
                 " folded_address TEXT, folded_name TEXT)")
    conn.executemany("INSERT INTO correspondents VALUES (?, ?, ?, ?)",
                     [(a, n, fold(a), fold(n)) for n, a in everyone])
    conn.execute("CREATE INDEX by_name ON correspondents (folded_name)")
    conn.execute("CREATE INDEX by_address ON correspondents (folded_address)")
    conn.commit()
    conn.close()


_REFERENCE_SQL = (
    "SELECT address, name FROM correspondents WHERE folded_name >= ?1 AND folded_name < ?1 || "
    "char(1114111) UNION SELECT address, name FROM correspondents WHERE folded_address >= ?1 "
    "AND folded_address < ?1 || char(1114111) ORDER BY 1 LIMIT 11")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10000)
    parser.add_argument("--people", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()

    from toolhost_email.importer import import_path
    from toolhost_people.fold import fold

    from toolhost import Settings
    from toolhost.testing import Harness

    rng = random.Random(16)
    everyone = people(args.people, rng)
    with tempfile.TemporaryDirectory(prefix="toolhost-bench-people-") as tmp:
        base = Path(tmp)
        data_dir = base / "data"
        box = base / "owner.mbox"
        write_mbox(box, args.messages, everyone, rng)
        start = time.perf_counter()
        import_path(Settings(env={"TOOLHOST_DATA_DIR": str(data_dir)}).plugin_data_dir(
            "toolhost-email"), OWNER, box)
        imported_s = time.perf_counter() - start

        sample = rng.sample(everyone, 12)
        queries = [
            *(n.split()[0][:3] for n, _ in sample[:4]),  # a name's first letters
            *(n.split()[1] for n, _ in sample[4:6]),  # a whole family name
            *(a.split("@")[0] for _, a in sample[6:8]),  # an address's local part
            sample[8][1].upper(),  # a whole address, upper-cased
            "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c
                    for c in sample[9][0].split()[0]),  # a fullwidth first name
            "a",  # nearly everyone: the ranking's worst case
            "nobody-matches-this",
        ]

        with Harness.over(("toolhost-people",), settings={"AGENT_PEOPLE_ENABLED": "1"},
                          data_dir=data_dir) as host:
            body = host.tool("people.search")
            context = host.context(timeout_s=600)
            start = time.perf_counter()
            first = body({"query": "a", "limit": 10}, context)
            rebuilt_s = time.perf_counter() - start
            (count,) = sqlite3.connect(
                data_dir / "plugins" / "toolhost-people" / "index.sqlite3").execute(
                "SELECT count(*) FROM person").fetchone()
            assert not hasattr(first, "__await__")

            tool_p50, tool_p99 = median_ms(
                lambda a: body(a, context), queries, args.runs,  # type: ignore[arg-type]
                lambda q: {"query": q, "limit": 10})
            pipe_p50, pipe_p99 = median_ms(
                lambda a: host.invoke("people.search", **a), queries, args.runs,  # type: ignore[arg-type]
                lambda q: {"query": q, "limit": 10})

        reference = base / "reference.sqlite3"
        reference_table(reference, everyone)
        conn = sqlite3.connect(reference)
        open_p50, open_p99 = median_ms(
            lambda q: conn.execute(_REFERENCE_SQL, (q,)).fetchall(), queries, args.runs, fold)

        def opened_each_time(q: object) -> None:
            c = sqlite3.connect(reference)
            try:
                c.execute(_REFERENCE_SQL, (q,)).fetchall()
            finally:
                c.close()

        each_p50, each_p99 = median_ms(opened_each_time, queries, args.runs, fold)
        conn.close()

    print(f"{args.messages} messages, {count} people in the index; import "
          f"{imported_s:.1f} s, first call (index rebuild) {rebuilt_s * 1000:.0f} ms; "
          f"{len(queries)} queries x {args.runs} runs\n")
    rows = [
        ("people.search, tool body", tool_p50, tool_p99),
        ("people.search, through the pipeline", pipe_p50, pipe_p99),
        ("indexed prefix SELECT, open connection", open_p50, open_p99),
        ("indexed prefix SELECT, connect + query + close", each_p50, each_p99),
    ]
    print(f"| {'work':<48} | p50 ms | p99 ms | p50 x reference (open connection) |")
    print(f"|{'-' * 50}|--------|--------|-----------------------------------|")
    for name, p50, p99 in rows:
        print(f"| {name:<48} | {p50:6.3f} | {p99:6.2f} | {p50 / open_p50:33.1f} |")
    print(f"\ntarget: tool body p50 under {GOAL_MS} ms: {'met' if tool_p50 < GOAL_MS else 'NOT met'}")


if __name__ == "__main__":
    main()
