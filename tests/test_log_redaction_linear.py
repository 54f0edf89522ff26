"""A hostile log line is redacted in time linear in its length.

The redactor runs on every line, and a library may log text an attacker chose (a header, a
body). Each line here is about 1 MB and aimed at one of the patterns' loops: quotes and
backslashes, escaped openings, pairs that never close, lists of quoted items, bare values
cut by backslashes. Linear, each takes well under a second; a pattern that backtracks
quadratically takes minutes on one of them, so the bound is far from either.
"""

from __future__ import annotations

import time

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
}


@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_hostile_megabyte_line_is_redacted_in_linear_time(text: str) -> None:
    # A pair's end is looked for after its value: were the value not atomic, the engine would
    # try every split of a list's quoted items ("a pair's list never closed": minutes).
    started = time.perf_counter()
    redact_secrets(None, "debug", {"event": text})
    assert time.perf_counter() - started < 20
