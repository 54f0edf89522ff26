"""A hostile log line is redacted in time linear in its length.

The redactor runs on every line, and a library may log text an attacker chose (a header, a
body). Each line here is about 1 MB and aimed at one of the patterns' loops: quotes and
backslashes, escaped openings, pairs that never close, lists of quoted items, bare values
cut by backslashes, a secret's name opening a list again and again. Linear, each takes well
under a second; a pattern that backtracks quadratically takes minutes on one of them, so the
bound is far from either.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

import pytest

from toolhost._pipeline.log import redact_secrets

N = 1_000_000

HOSTILE = {
    "quotes": "'" * N,
    "backslashes": "\\" * N,
    "authorization, bytes": "authorization: b'\\" * (N // 18),
    "password, open quote": 'password="' * (N // 10),
    "escaped quotes in a value": "token='" + "\\'" * (N // 2),
    "cookie pairs": "cookie: " + "a;" * (N // 2),
    "escaped opening, then backslashes": 'password: \\"' + "\\" * N + "x",
    "escaped openings": '\\"password\\": \\"' * (N // 16),
    "escaped value, quotes escaped deeper": '\\"password\\": \\"' + '\\\\\\"' * (N // 4),
    "bare value, backslash runs": "password=" + "a\\\\" * (N // 3),
    "bare value, backslashes then a quote": "password=" + "\\" * N + '"',
    "pairs never closed": "[('password', '" * (N // 15),
    "escaped pairs never closed": '[[\\"cookie\\", \\"' * (N // 17),
    "a pair's value never closed": "(b'cookie', b'" + "x" * N,
    "a pair's list never closed": "[['cookie', [" + "'a', " * (N // 5),
    "a scheme's credential, backslashes": "Bearer " + "a\\" * (N // 2),
    # Each name opens a list that never closes its pair (the reviewer's 40 KB took 9 s).
    "a name opening a list, JSON": '["password", ' * (N // 13),
    "a name opening a list, repr": "['password', " * (N // 13),
    "a name opening a list, escaped": '[\\"password\\", ' * (N // 15),
    "a tuple's name opening a list": "('password', ['" * (N // 15),
    # Each pair's value escaped once more than the last: each runs past all later ones. The
    # cost was L**1.5 (11 s at 1 MB), so this line is about 4 MB.
    "pairs' values escaped deeper each time": "".join(
        "('password', " + "\\" * depth + '"' for depth in range(1, 2900)),
    "URL-encoded names and separators": "%22password%22%3A%22" * (N // 20),
    "a URL-encoded value of percent signs": "token%3D" + "%2" * (N // 2),
    # Encoded twice (a URL in another's query): names, separators and values of percent signs.
    "twice URL-encoded names and separators": "%2522password%2522%253A%2522" * (N // 28),
    "a twice URL-encoded value of percent signs": "token%253D" + "%252" * (N // 4),
    "twice-encoded spaces never separated": "%2522token" + "%2520" * (N // 5),
    "names after twice-encoded characters": "%2541a_" * (N // 7),
    # Lists on their own and argv: a name's second item never closed, one a word to its end,
    # flags whose value never comes, curl's user never holding its colon.
    "a list alone never closed": '["token", "' * (N // 11),
    "a list alone, a word to the end": "['token', '" + "aB" * (N // 2),
    "a pair's value a name to the end": "('token', 'a_" + "a_" * (N // 2),
    "flags never followed by a value": "['--password', " * (N // 15),
    "flags opening a value": "['--api-key', '" * (N // 15),
    "curl's user never holding a colon": "['-u', '" + "a" * N,
    "curl's users, no colon": "['-u', 'a', " * (N // 12),
    "dashes after a quote": "'" + "-" * N,
    # Lists alone whose second item is a name to its end: header words, digits ending words.
    "a list alone, a header name to the end": "['Authorization', '" + "Ab-" * (N // 3),
    "a list alone, words ending in digits to the end": '["token", "' + "a1_" * (N // 3),
    "lists alone of header names never closed": '["Cookie", "X-B3-Id' * (N // 19),
    # curl's user attached to its flag: never a colon, a value to the end, items that open one.
    "attached users, no colon": "['-ua', " * (N // 8) + ":",
    "an attached user to the end": "['curl', '-ua:" + "a" * N,
    "attached users never closed": "['-ua:b" * (N // 7),
    "an attached user escaped, quotes escaped deeper": '[\\"-ua:' + '\\\\\\"' * (N // 4),
    "a text that is an attached flag": "-u" + "a" * N + ":",
}


@contextmanager
def _within(seconds: float) -> Iterator[None]:
    """Fails at the deadline rather than when a quadratic redaction ends, hours later (the
    regular expression engine checks for signals as it runs)."""
    def expired(signum: int, frame: FrameType | None) -> None:
        raise TimeoutError(f"not redacted within {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_hostile_megabyte_line_is_redacted_in_linear_time(text: str) -> None:
    # A pair's end is looked for after its value: were the value not atomic, the engine would
    # try every split of a list's quoted items ("a pair's list never closed": minutes).
    started = time.perf_counter()
    with _within(20):
        redact_secrets(None, "debug", {"event": text})
    assert time.perf_counter() - started < 20
