"""people.search over a cache of 10,000 messages and ~2,000 people, next to the same queries
on people's own index with the connection kept open, in one run (issue #16: p50 under 5 ms;
issue #27: the tool body's p50 at most 1.5x that reference).

The mailbox is generated (seeded, so every run has the same one): 2,000 correspondents with
generated names (a tenth of them with accents), 10,000 messages between them and the owner,
sent and received, with Cc. It is written with the stdlib ``mailbox`` module and imported
with toolhost-email's importer (what ``toolhost-email import`` runs).

Rows, each over the same queries (name prefixes, address fragments, fullwidth and upper-cased
forms, a query matching nearly everyone, one matching no one):

- toolhost-people, the tool body: what one call costs the plugin, its per-call work included
  (check that the cache, the links and the index are the files it holds open, read the
  cache's generation, compare, query in one read transaction);
- the same through the host's pipeline (validation, policy, the durable record);
- the reference (issue #27): the same two SELECTs the tool runs (``index.search`` and
  ``index.addresses_of``) on people's own index, a connection kept open, the query folded
  beforehand: the query's own cost, and nothing of checking that the index is current;
- the reference of issue #16, for comparison: a plain indexed SQL query over the same
  correspondents, a table of (folded address, folded name) with an index on each,
  prefix-matched by range (the cheapest query an index answers: it cannot find a substring, a
  word inside a name, or rank), on a connection kept open, and with the open in each call.

Rounds are interleaved: each round calls every row once per query in turn, ``--runs`` times
over, so load from elsewhere on the machine falls on every row alike. A row's p50 is the median
over rounds of each round's median; the ratio is the median over rounds of the round's ratio;
p99 is over every call of every round. The first call after the import rebuilds the index;
its time is printed too.

Run: python bench/bench_people.py [--messages 10000] [--people 2000] [--rounds 9] [--runs 5]
"""

from __future__ import annotations

import argparse
import datetime as dt
import mailbox
import os
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
GOAL_RATIO = 1.5
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


def rounds_ms(rows: list[Callable[[str], object]], queries: list[str], rounds: int,
              runs: int) -> list[list[list[float]]]:
    """Milliseconds of every call, ``[row][round][call]``: each round calls every row on each
    query in turn, ``runs`` times over."""
    times: list[list[list[float]]] = [[[] for _ in range(rounds)] for _ in rows]
    for r in range(rounds):
        for _ in range(runs):
            for q in queries:
                for row, fn in enumerate(rows):
                    start = time.perf_counter()
                    fn(q)
                    times[row][r].append((time.perf_counter() - start) * 1000)
    return times


def p50(per_round: list[list[float]]) -> float:
    """The median over rounds of each round's median."""
    return statistics.median(statistics.median(r) for r in per_round)


def p99(per_round: list[list[float]]) -> float:
    every = sorted(t for r in per_round for t in r)
    return every[max(0, int(len(every) * 0.99) - 1)]


def ratio(per_round: list[list[float]], reference: list[list[float]]) -> float:
    """The median over rounds of this row's round median over the reference's."""
    return statistics.median(statistics.median(a) / statistics.median(b)
                             for a, b in zip(per_round, reference, strict=True))


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
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--runs", type=int, default=5, help="calls per query per round")
    args = parser.parse_args()

    from toolhost_email.importer import import_path
    from toolhost_people import index
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
        folded = {q: fold(q) for q in queries}
        reference = base / "reference.sqlite3"
        reference_table(reference, everyone)
        index_file = data_dir / "plugins" / "toolhost-people" / "index.sqlite3"

        with Harness.over(("toolhost-people",), settings={"AGENT_PEOPLE_ENABLED": "1"},
                          data_dir=data_dir) as host:
            body = host.tool("people.search")
            context = host.context(timeout_s=600)
            start = time.perf_counter()
            first = body({"query": "a", "limit": 10}, context)
            rebuilt_s = time.perf_counter() - start
            assert not hasattr(first, "__await__")
            own = sqlite3.connect(index_file, isolation_level=None)
            (count,) = own.execute("SELECT count(*) FROM person").fetchone()
            prefix = sqlite3.connect(reference)

            def same_selects(q: str) -> None:
                rows = index.search(own, folded[q], 11)
                shown = [r.person_id for r in rows[:10]]
                if shown:
                    index.addresses_of(own, shown, 5)

            def opened_each_time(q: str) -> None:
                c = sqlite3.connect(reference)
                try:
                    c.execute(_REFERENCE_SQL, (folded[q],)).fetchall()
                finally:
                    c.close()

            rows: list[tuple[str, Callable[[str], object]]] = [
                ("people.search, tool body", lambda q: body({"query": q, "limit": 10}, context)),
                ("people.search, through the pipeline",
                 lambda q: host.invoke("people.search", query=q, limit=10)),
                ("reference: the same SELECTs on people's index, open", same_selects),
                ("indexed prefix SELECT, open connection (#16)",
                 lambda q: prefix.execute(_REFERENCE_SQL, (folded[q],)).fetchall()),
                ("indexed prefix SELECT, connect + query + close (#16)", opened_each_time),
            ]
            times = rounds_ms([fn for _, fn in rows], queries, args.rounds, args.runs)
            own.close()
            prefix.close()

    print(f"{args.messages} messages, {count} people in the index; import "
          f"{imported_s:.1f} s, first call (index rebuild) {rebuilt_s * 1000:.0f} ms; "
          f"{len(queries)} queries x {args.runs} calls x {args.rounds} interleaved rounds; "
          f"load average {os.getloadavg()[0]:.2f}\n")
    same = times[2]
    print(f"| {'work':<54} | p50 ms | p99 ms | x the same SELECTs (median of rounds) |")
    print(f"|{'-' * 56}|--------|--------|---------------------------------------|")
    for (name, _), row in zip(rows, times, strict=True):
        print(f"| {name:<54} | {p50(row):6.3f} | {p99(row):6.2f} | {ratio(row, same):37.2f} |")
    body_p50, body_ratio = p50(times[0]), ratio(times[0], same)
    print(f"\ntarget (#16): tool body p50 under {GOAL_MS} ms: "
          f"{'met' if body_p50 < GOAL_MS else 'NOT met'}")
    print(f"target (#27): tool body at most {GOAL_RATIO}x the same SELECTs: {body_ratio:.2f}x, "
          f"{'met' if body_ratio <= GOAL_RATIO else 'NOT met'}")


if __name__ == "__main__":
    main()
