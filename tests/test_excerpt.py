"""Pipeline step 12: what the limit measures, and the excerpt past it (issue 10, defect 8).

``maximum_output_bytes`` bounds the text the model reads. The seed's rule for read_text ("a file
between that and the hard ceiling is excerpted head-and-tail and artifactized") is about the
file's bytes, so a structured result that repeats the content is not counted a second time,
escaped. The fixture tools here are shaped like workspace.write_text and workspace.read_text
(the real plugin is tested in its own distribution): a write and a read of the same 1 MiB
round-trip whole, and one byte more is excerpted within the budget.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from conftest import make_plugin, make_spec
from hypothesis import example, given, settings
from hypothesis import strategies as st

from toolhost import (
    Idempotency,
    OutcomeStatus,
    SideEffect,
    Tool,
    ToolFailureKind,
    ToolOutput,
)
from toolhost._composition import Host
from toolhost._pipeline.excerpt import elision_marker, excerpt
from toolhost._registration.refusals import HARD_OUTPUT_CEILING
from toolhost.testing import host_for

MIB = 1024 * 1024
ARTIFACT = "01JABCDEFGHJKMNPQRSTVWXYZ0"
CHECKSUM = "sha256:" + "0" * 64
MARKER = re.compile(
    r"\n\[\.\.\. (-?\d+) bytes elided of (\d+)\. The whole output is artifact (\S+) "
    r"\((\S+)\)\. \.\.\.\]\n"
)


def parts(text: str) -> tuple[str, int, int, str]:
    """An excerpt's head, elided count, total and tail; exactly one marker."""
    (match,) = list(MARKER.finditer(text))
    return text[:match.start()], int(match[1]), int(match[2]), text[match.end():]


# ------------------------------------------------------------------ the excerpt itself


@settings(max_examples=400)
@given(content=st.text(), budget=st.integers(min_value=0, max_value=600))
@example(content='"' * 600, budget=400)
@example(content="é€😀" * 40, budget=len(elision_marker(480, 480, ARTIFACT, CHECKSUM)) + 7)
def test_an_excerpt_fits_its_budget_and_elides_what_it_leaves_out(content: str,
                                                                  budget: int) -> None:
    text = excerpt(content, budget, ARTIFACT, CHECKSUM)
    data = content.encode()
    assert len(text.encode()) <= budget
    worst = len(elision_marker(len(data), len(data), ARTIFACT, CHECKSUM).encode())
    if budget < worst:
        # No room for the marker: what fits of it, and nothing of the content.
        assert text == elision_marker(len(data), len(data), ARTIFACT, CHECKSUM)[:len(text)]
        assert len(text.encode()) == budget
        return
    head, elided, total, tail = parts(text)
    assert total == len(data)
    assert elided == len(data) - len(head.encode()) - len(tail.encode()) >= 0
    assert content.startswith(head) and content.endswith(tail)
    if elided == 0:
        assert head + tail == content
    else:
        # Head and tail never overlap, and they use the room up to a character's bytes.
        assert len(head) + len(tail) < len(content)
        assert len(head.encode()) + len(tail.encode()) >= budget - worst - 6


def test_an_excerpt_of_content_that_fits_is_the_content_and_a_zero_count() -> None:
    # The overlap: 600,000 bytes under a 1 MiB budget came back as 1,048,577 bytes
    # with "-448397 bytes elided".
    text = excerpt('"' * 600_000, MIB, ARTIFACT, CHECKSUM)
    assert text == '"' * 600_000 + elision_marker(0, 600_000, ARTIFACT, CHECKSUM)


def test_one_byte_over_is_cut_to_the_budget_exactly() -> None:
    text = excerpt("a" * (MIB + 1), MIB, ARTIFACT, CHECKSUM)
    head, elided, total, tail = parts(text)
    assert len(text.encode()) == MIB
    assert total == MIB + 1 and elided == MIB + 1 - len(head) - len(tail) > 0
    assert abs(len(head) - len(tail)) <= 1


# ------------------------------------------------------------------ through the pipeline


def _write(arguments: Mapping[str, Any], context: Any) -> ToolOutput:
    data = arguments["content"].encode()
    context.workspace.write(arguments["path"], data)
    checksum = "sha256:" + hashlib.sha256(data).hexdigest()
    return ToolOutput(
        structured={"path": arguments["path"], "byte_count": len(data), "checksum": checksum},
        content=f"Wrote {len(data)} bytes to {arguments['path']} ({checksum}).",
    )


def _read(arguments: Mapping[str, Any], context: Any) -> ToolOutput:
    data = context.workspace.read(arguments["path"])
    text = data.decode()
    return ToolOutput(
        structured={"path": arguments["path"], "content": text, "byte_count": len(data),
                    "checksum": "sha256:" + hashlib.sha256(data).hexdigest()},
        content=text,
    )


def _noted(arguments: Mapping[str, Any], context: Any) -> ToolOutput:
    return ToolOutput(structured={"echo": "n" * arguments["count"]}, content="ok")


PATH = {"type": "string", "maxLength": 4096}
WRITE_IN = {"type": "object", "properties": {
    # As write_text: the reader's maximum_output_bytes, so a write and a read are symmetric.
    "path": PATH, "content": {"type": "string", "maxLength": MIB}},
    "required": ["path", "content"], "additionalProperties": False}
WRITE_OUT = {"type": "object", "properties": {
    "path": {"type": "string"}, "byte_count": {"type": "integer"},
    "checksum": {"type": "string"}},
    "required": ["path", "byte_count", "checksum"], "additionalProperties": False}
READ_IN = {"type": "object", "properties": {"path": PATH}, "required": ["path"],
           "additionalProperties": False}
READ_OUT = {"type": "object", "properties": {
    "path": {"type": "string"}, "content": {"type": "string"},
    "byte_count": {"type": "integer"}, "checksum": {"type": "string"}},
    "required": ["path", "content", "byte_count", "checksum"], "additionalProperties": False}
NOTED_IN = {"type": "object", "properties": {"count": {"type": "integer"}},
            "required": ["count"], "additionalProperties": False}
NOTED_OUT = {"type": "object", "properties": {"echo": {"type": "string"}},
             "required": ["echo"], "additionalProperties": False}

PLUGIN = make_plugin(domains=["fx"], tools=[
    Tool(spec=make_spec(name="fx.write_text", input_schema=WRITE_IN, output_schema=WRITE_OUT,
                        side_effect=SideEffect.WORKSPACE_WRITE, allow_parallel=False,
                        idempotency=Idempotency.IDEMPOTENT, timeout_s=30), call=_write),
    Tool(spec=make_spec(name="fx.read_text", input_schema=READ_IN, output_schema=READ_OUT,
                        side_effect=SideEffect.WORKSPACE_READ, timeout_s=30,
                        maximum_output_bytes=MIB), call=_read),
    Tool(spec=make_spec(name="fx.noted", input_schema=NOTED_IN, output_schema=NOTED_OUT),
         call=_noted),
])


@pytest.fixture
def host(tmp_path: Path) -> Host:
    return host_for({"fx-step12": PLUGIN}, data_dir=tmp_path)


def round_trip(host: Host, text: str) -> Any:
    run = host.start_run()
    written = host.invoke_sync("fx.write_text", {"path": "f.txt", "content": text}, run=run)
    assert written.ok and written.structured is not None, written
    assert written.structured["byte_count"] == len(text.encode())
    return host.invoke_sync("fx.read_text", {"path": "f.txt"}, run=run)


@pytest.mark.parametrize("unit", ["a", '"'])
def test_a_write_and_a_read_of_exactly_the_limit_round_trip_whole(host: Host,
                                                                 unit: str) -> None:
    text = unit * MIB
    outcome = round_trip(host, text)
    assert outcome.status is OutcomeStatus.SUCCEEDED and not outcome.truncated
    assert outcome.content == text and outcome.artifacts == ()
    assert outcome.structured is not None and outcome.structured["content"] == text
    assert outcome.structured["byte_count"] == MIB
    record = host.pipeline.invocations.get(outcome.invocation_id)
    assert record.result_content == text and record.result_structured == outcome.structured


def test_a_file_of_quotes_under_the_limit_is_read_whole(host: Host) -> None:
    outcome = round_trip(host, '"' * 600_000)
    assert outcome.ok and not outcome.truncated and outcome.content == '"' * 600_000


@pytest.mark.parametrize("unit", ["a", '"'])
def test_one_byte_past_the_limit_is_excerpted_within_it(host: Host, unit: str) -> None:
    run = host.start_run()
    assert run.workspace is not None
    text = unit * (MIB + 1)
    run.workspace.write("f.txt", text.encode())
    outcome = host.invoke_sync("fx.read_text", {"path": "f.txt"}, run=run)
    assert outcome.ok and outcome.truncated and outcome.structured is None
    assert len(outcome.content.encode()) <= MIB
    head, elided, total, tail = parts(outcome.content)
    assert total == MIB + 1 and elided == MIB + 1 - len(head) - len(tail) > 0
    assert head == unit * len(head) and tail == unit * len(tail)
    (ref,) = outcome.artifacts
    assert f"The whole output is artifact {ref['id']} ({ref['checksum']})" in outcome.content
    whole = json.loads(host.pipeline.artifacts.read(ref["id"]))
    assert whole["content"] == text and whole["structured"]["content"] == text


def test_quotes_under_the_ceiling_are_excerpted_not_too_large(host: Host) -> None:
    # Escaped, the structured copy of 5 MiB of quotes is 10 MiB: past the ceiling. The
    # content is 5 MiB, under it, so this is an excerpt, not OUTPUT_TOO_LARGE.
    run = host.start_run()
    assert run.workspace is not None
    run.workspace.write("f.txt", b'"' * (5 * MIB))
    outcome = host.invoke_sync("fx.read_text", {"path": "f.txt"}, run=run)
    assert outcome.ok and outcome.truncated and len(outcome.content.encode()) <= MIB
    head, elided, total, tail = parts(outcome.content)
    assert total == 5 * MIB and elided == 5 * MIB - len(head) - len(tail) > 0


def test_past_the_ceiling_is_still_too_large(host: Host) -> None:
    run = host.start_run()
    assert run.workspace is not None
    run.workspace.write("f.txt", b"a" * (HARD_OUTPUT_CEILING + 1))
    outcome = host.invoke_sync("fx.read_text", {"path": "f.txt"}, run=run)
    assert outcome.failure and outcome.failure.kind is ToolFailureKind.OUTPUT_TOO_LARGE
    assert outcome.failure.detail == {"bytes": HARD_OUTPUT_CEILING + 1}


def test_a_structured_result_past_the_limit_still_counts(host: Host) -> None:
    # Only a structured field that is the content itself is counted once; anything else in
    # the structured result is measured as its canonical JSON, as before.
    outcome = host.invoke_sync("fx.noted", {"count": 5000}, run=host.start_run())
    assert outcome.ok and outcome.truncated and outcome.structured is None
    (ref,) = outcome.artifacts
    assert outcome.content == "ok" + elision_marker(0, 2, ref["id"], ref["checksum"])
    assert json.loads(host.pipeline.artifacts.read(ref["id"])) == {
        "content": "ok", "structured": {"echo": "n" * 5000}}
    within = host.invoke_sync("fx.noted", {"count": 4000}, run=host.start_run())
    assert within.ok and not within.truncated and within.structured == {"echo": "n" * 4000}
