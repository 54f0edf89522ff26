"""The bytes received, reported while the provider's file streams in (``context.progress``):
counted as they arrive, out of the Content-Length the provider declared when it declared one,
the last report the whole file. The host decides who hears them (tests/test_progress.py);
here the context's reporter is the test's own, so every report the body makes is seen."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import attrs
import pytest

from media_support import PNG, FakeTensorScale, sized
from toolhost import ToolExecutionContext
from toolhost.testing import Harness

SIZE = 3 * 1024 * 1024  # three of the fake's 1 MiB writes: many reads on this side

Report = tuple[float, "float | None", "str | None"]


@pytest.fixture
def reports() -> list[Report]:
    return []


@pytest.fixture
def context(host: Harness, reports: list[Report]) -> Iterator[ToolExecutionContext]:
    run = host.start_run()
    yield attrs.evolve(host.context(run=run),
                       reporter=lambda *report: reports.append(report))
    host.end_run(run)


def _generate(host: Harness, context: ToolExecutionContext) -> None:
    output = host.run_body("image.generate", {"prompt": "a kite", "size": "1024x1024"},
                           context)
    assert output.structured["artifact"]["byte_count"] == SIZE


def test_the_bytes_received_out_of_the_declared_size(
        host: Harness, server: FakeTensorScale, context: ToolExecutionContext,
        reports: list[Report]) -> None:
    server.reply = sized(PNG[:16], SIZE, "image/png", declared=SIZE)
    _generate(host, context)
    received = [done for done, _, _ in reports]
    assert len(received) > 3 and all(a < b for a, b in itertools.pairwise(received))
    assert received[-1] == SIZE
    assert {(total, message) for _, total, message in reports} == {(SIZE, "bytes received")}


def test_without_a_declared_size_the_total_is_unknown(
        host: Harness, server: FakeTensorScale, context: ToolExecutionContext,
        reports: list[Report]) -> None:
    server.reply = sized(PNG[:16], SIZE, "image/png")
    _generate(host, context)
    assert reports[-1] == (SIZE, None, "bytes received")
    assert {total for _, total, _ in reports} == {None}
