"""workspace.write_text: write a UTF-8 text file in the run's workspace, whole, and say what
was written.

The path goes to ``context.workspace`` as the caller wrote it; this module resolves nothing
and opens nothing (hard gate 10). The handle makes the write atomic, creates missing parent
directories inside the root, and records TOOL_WRITTEN provenance in the same operation, which
is what later lets workspace.read_text keep INTERNAL_TOOL trust for this file.

The content is encoded strictly as UTF-8 and nothing is normalized: no BOM, no line-ending
translation, no trailing newline the model did not write. The checksum is taken over exactly
those encoded bytes, not a re-read, so it is independent of the filesystem and equal to what
workspace.read_text reports for the same file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from toolhost import (
    Provenance,
    ToolExecutionContext,
    ToolFailure,
    ToolOutput,
    WorkspaceIsDirectory,
    WorkspaceNotFound,
    sha256_checksum,
)
from toolhost_workspace.messages import NO_SUCH_PATH, NOT_A_FILE
from toolhost_workspace.specs import WRITE_TEXT_DESCRIPTION as DESCRIPTION
from toolhost_workspace.specs import WRITE_TEXT_INPUT_SCHEMA as INPUT_SCHEMA
from toolhost_workspace.specs import WRITE_TEXT_OUTPUT_SCHEMA as OUTPUT_SCHEMA
from toolhost_workspace.specs import WRITE_TEXT_SPEC as SPEC

__all__ = ["DESCRIPTION", "INPUT_SCHEMA", "OUTPUT_SCHEMA", "SPEC", "write_text"]


def write_text(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
    """The tool body: encode strictly, hand the bytes to the handle, report what was written."""
    path = arguments["path"]
    # Strict, and "utf-8" never writes a BOM. Step 4 already refused a lone surrogate (it has
    # no UTF-8 form), so this cannot fail.
    data = arguments["content"].encode("utf-8")
    workspace = context.workspace
    try:
        written = workspace.write(path, data, provenance=Provenance.TOOL_WRITTEN)
    except WorkspaceIsDirectory:
        raise ToolFailure(NOT_A_FILE) from None
    except WorkspaceNotFound:  # a parent removed while the handle was creating it
        raise ToolFailure(NO_SUCH_PATH) from None
    checksum = sha256_checksum(data)
    verb = "Created" if written.created else "Replaced"
    noun = "byte" if written.byte_count == 1 else "bytes"
    return ToolOutput(
        structured={
            "path": path,
            "byte_count": written.byte_count,
            "checksum": checksum,
            "created": written.created,
        },
        content=(f"{verb} {json.dumps(path, ensure_ascii=False)}: {written.byte_count} {noun}, "
                 f"{checksum}."),
    )

