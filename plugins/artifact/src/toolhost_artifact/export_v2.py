"""artifact.export 2.0.0 (D90, D93): a workspace file, or text the model wrote, exported to the
owner and attached to the reply.

Exactly one of ``path`` (default ``""``) and ``content`` is given; ``name`` names content only.
The input schema does not carry that rule. A given path is a non-empty one (``"path": ""`` is
the default, written out), so ``required`` cannot express it; branches on ``minLength`` would
each have to restate the closed object (registration wants ``additionalProperties: false`` at
every object level); and a top-level ``oneOf`` fails every call that breaks it with one schema
rule at the root, so the model could not be told whether it gave both, neither, or a name with
a path (some model providers also refuse top-level combinators). The descriptions state it, and
the body enforces it with a static failure for each case. ``name`` has no schema default: step
4 would fill it in, and every call would look as if it named its content.

Content is saved as UTF-8 text, at most 1 MiB of it: the schema bounds the characters
(``maxLength`` 1048576, mapped to ``content_too_long``), the body the encoded bytes, with the
same code. Its artifact is INTERNAL_TOOL (the model wrote it), its name follows the 2.0.0 file
name rule (``names``), and its media type is the table's for the name, which must be a text
type, with ``; charset=utf-8``. A path export is 1.0.0's, with 2.0.0's result text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolhost import (
    ArtifactOrigin,
    ToolExecutionContext,
    ToolFailure,
    ToolOutput,
    Trust,
    media_type_for,
)
from toolhost_artifact import names
from toolhost_artifact.export_file import export_file
from toolhost_artifact.messages import (
    BOTH_PATH_AND_CONTENT,
    CONTENT_TOO_LONG,
    INVALID_NAME,
    NAME_NOT_TEXT,
    NAME_WITH_PATH,
    NO_PATH_OR_CONTENT,
)
from toolhost_artifact.result import attached_line, structured
from toolhost_artifact.specs import CONTENT_LIMIT
from toolhost_artifact.specs import V2_DESCRIPTION as DESCRIPTION
from toolhost_artifact.specs import V2_INPUT_SCHEMA as INPUT_SCHEMA
from toolhost_artifact.specs import V2_SPEC as SPEC

__all__ = ["CONTENT_LIMIT", "DEFAULT_NAME", "DESCRIPTION", "INPUT_SCHEMA", "SPEC", "export"]

#: The name content is saved under when the call gives none.
DEFAULT_NAME = "export.txt"


def export(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
    """The tool body: check the arguments' shape, then export the file or save the text."""
    path = arguments["path"]  # step 4 applied the default: "" when omitted
    content = arguments.get("content")
    name = arguments.get("name")
    if path:
        if content is not None:
            raise ToolFailure(BOTH_PATH_AND_CONTENT)
        if name is not None:
            raise ToolFailure(NAME_WITH_PATH)
        exported = export_file(path, context)
        return ToolOutput(structured=structured(exported.ref), content=attached_line(exported.ref),
                          output_trust=exported.trust)
    if content is None:
        raise ToolFailure(NO_PATH_OR_CONTENT)
    # Strict UTF-8: step 4 already refused a lone surrogate, so this cannot fail.
    data = content.encode("utf-8")
    if len(data) > CONTENT_LIMIT:
        raise ToolFailure(CONTENT_TOO_LONG, detail={"byte_count": len(data)})
    name = DEFAULT_NAME if name is None else name
    problem = names.problem(name)
    if problem is not None:
        raise ToolFailure(INVALID_NAME, detail={"problem": problem})
    media_type = media_type_for(name)
    if not media_type.textual:
        raise ToolFailure(NAME_NOT_TEXT, detail={"media_type": media_type.name})
    ref = context.artifacts.write(
        origin=ArtifactOrigin.EXPORT, name=name, media_type=media_type.utf8(),
        content=data, trust=Trust.INTERNAL_TOOL,
    )
    return ToolOutput(structured=structured(ref), content=attached_line(ref),
                      output_trust=Trust.INTERNAL_TOOL)
