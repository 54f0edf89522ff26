"""The three workspace tools keep their hand-written specs, for two reasons a typed tool cannot
meet. Hard gate 10 (test_workspace_structure.py) follows the context only inside one module: a
body uses it only as ``context.workspace``, never passes it whole, and hands the handle only to
its own module's functions. A typed tool's function must live where the plugin registers it
(``specs``, imported by ``toolhost check``), so it could reach a lazily imported body only by
passing the context or the handle across that boundary, which the gate refuses; the whole body
in ``specs`` would be imported at load. And the bodies are measured as they are, ``(arguments,
context)`` in and one ToolOutput out: read_text's pipeline path by bench/bench_read_record.py
and bench/bench_pipeline*.py, read_text and list_files directly by bench/bench_workspace.py.

The specs are nevertheless exactly what ``toolhost.tool`` derives from the typed signatures
below, so a later conversion changes no byte: this test holds each pair to each other.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import pytest

from toolhost import (
    Idempotency,
    MaxLen,
    Risk,
    SideEffect,
    ToolExecutionContext,
    ToolOutput,
    ToolSpec,
    Trust,
    tool,
)
from toolhost_workspace import specs
from toolhost_workspace.messages import LIST_FILES_REASONS, READ_TEXT_REASONS, WRITE_TEXT_REASONS


def read_text(context: ToolExecutionContext, path: Annotated[str, MaxLen(4096)]) -> ToolOutput:
    """Unused: the signature is what is compared."""
    raise NotImplementedError


def write_text(context: ToolExecutionContext, path: Annotated[str, MaxLen(4096)],
               content: Annotated[str, MaxLen(1048576)]) -> ToolOutput:
    """Unused: the signature is what is compared."""
    raise NotImplementedError


def list_files(context: ToolExecutionContext, path: Annotated[str, MaxLen(4096)] = "",
               recursive: bool = False) -> ToolOutput:
    """Unused: the signature is what is compared."""
    raise NotImplementedError


READ = {"side_effect": SideEffect.WORKSPACE_READ, "risk": Risk.LOW,
        "idempotency": Idempotency.READ_ONLY, "required_scopes": ("workspace.read",)}
# What each tool declares besides its signature; allow_parallel is left to follow READ_ONLY
# (the readers are parallel, the writer never is).
DECLARED: list[tuple[Callable[..., Any], ToolSpec, dict[str, Any]]] = [
    (read_text, specs.READ_TEXT_SPEC,
     {**READ, "maximum_output_bytes": 1048576, "reasons": READ_TEXT_REASONS,
      "description": specs.READ_TEXT_DESCRIPTION, "output_schema": specs.READ_TEXT_OUTPUT_SCHEMA}),
    (write_text, specs.WRITE_TEXT_SPEC,
     {"side_effect": SideEffect.WORKSPACE_WRITE, "risk": Risk.MEDIUM,
      "idempotency": Idempotency.IDEMPOTENT, "required_scopes": ("workspace.write",),
      "maximum_output_bytes": 4096, "reasons": WRITE_TEXT_REASONS,
      "description": specs.WRITE_TEXT_DESCRIPTION,
      "output_schema": specs.WRITE_TEXT_OUTPUT_SCHEMA}),
    (list_files, specs.LIST_FILES_SPEC,
     {**READ, "maximum_output_bytes": 262144, "reasons": LIST_FILES_REASONS,
      "description": specs.LIST_FILES_DESCRIPTION,
      "output_schema": specs.LIST_FILES_OUTPUT_SCHEMA, "default_enabled": False}),
]


@pytest.mark.parametrize(("function", "pinned", "declared"), DECLARED,
                         ids=[spec.name for _, spec, _ in DECLARED])
def test_the_typed_signature_derives_the_pinned_spec_exactly(
    function: Callable[..., Any], pinned: ToolSpec, declared: dict[str, Any]
) -> None:
    derived = tool(pinned.name, "1.0.0", output_trust=Trust.INTERNAL_TOOL, timeout_s=10,
                   **declared)(function)
    assert derived.spec == pinned
