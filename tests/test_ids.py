"""Invocation ids are UUIDv7 (RFC 9562), other ids UUID4 (D133 and its amendment).

A v7 id's leading 48 bits are the system clock's Unix milliseconds, so the record's primary
key takes rows in order; the time is the system clock's, never the pipeline's injected one,
so a fixed test clock cannot make ids collide or run backwards.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any

from conftest import make_plugin, make_spec

from toolhost import Idempotency, Tool, ToolExecutionContext, ToolOutput
from toolhost._adapters.system_clock import new_id, new_invocation_id
from toolhost._testing.clocks import FixedClock
from toolhost.testing import DEFAULT_INSTANT, Harness

SCHEMA = {"type": "object", "properties": {}, "required": [], "additionalProperties": False}


def milliseconds(text: str) -> int:
    return int(text[:12], 16)


def assert_v7(text: str) -> None:
    parsed = uuid.UUID(hex=text)
    assert (len(text), parsed.hex, parsed.version, parsed.variant) == (
        32, text, 7, uuid.RFC_4122)


def test_invocation_ids_are_uuid7_in_lowercase_hex_with_the_wall_clock_in_front() -> None:
    before = time.time_ns() // 1_000_000
    ids = [new_invocation_id() for _ in range(5000)]
    after = time.time_ns() // 1_000_000
    assert len(set(ids)) == len(ids)
    for text in ids:
        assert_v7(text)
        assert before <= milliseconds(text) <= after
    stamps = [milliseconds(text) for text in ids]
    assert stamps == sorted(stamps)


def test_the_random_bits_vary_within_one_millisecond() -> None:
    # rand_a (12 bits after the version) and rand_b (62 after the variant) are os.urandom's:
    # across 5,000 ids every hex digit position outside the time, version and variant varies.
    ids = [new_invocation_id() for _ in range(5000)]
    for position in [*range(13, 16), *range(17, 32)]:
        assert len({text[position] for text in ids}) > 1, position
    assert {text[16] for text in ids} == set("89ab")


def test_other_ids_stay_uuid4() -> None:
    ids = [new_id() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for text in ids:
        parsed = uuid.UUID(hex=text)
        assert (len(text), parsed.hex, parsed.version, parsed.variant) == (
            32, text, 4, uuid.RFC_4122)


def test_a_fixed_clock_neither_repeats_nor_reorders_the_hosts_invocation_ids() -> None:
    def echo(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
        return ToolOutput(structured={}, content="ok")

    spec = make_spec(name="fx.id", input_schema=SCHEMA, idempotency=Idempotency.READ_ONLY)
    before = time.time_ns() // 1_000_000
    with Harness.over({"fx-dist": make_plugin(tools=[Tool(spec, call=echo)])},
                      clock=FixedClock(DEFAULT_INSTANT)) as h:
        ids = [h.invoke("fx.id").invocation_id for _ in range(50)]
    after = time.time_ns() // 1_000_000
    assert len(set(ids)) == 50
    for text in ids:
        assert text is not None
        assert_v7(text)
        assert before <= milliseconds(text) <= after
    stamps = [milliseconds(text) for text in ids if text is not None]
    assert stamps == sorted(stamps)
