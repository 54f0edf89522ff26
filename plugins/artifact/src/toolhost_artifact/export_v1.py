"""artifact.export 1.0.0: a workspace file, exported to the owner as an artifact.

Classification exactly as the specification's table: WORKSPACE_READ, LOW, IDEMPOTENT,
INTERNAL_TOOL, ``artifact.write``, 30 s, 4096 bytes, not parallel, in_process. IDEMPOTENT is
made true by the run-bound writer: the same file exported twice in a run is one artifact.

The result's trust is the artifact's: a file this run's tools did not write has a name an
outsider chose, and the result shows that name to the model, so it is not platform text (as
workspace.list_files lowers a listing of such names).
"""

from __future__ import annotations

from toolhost import ToolExecutionContext, ToolOutput
from toolhost_artifact.export_file import export_file
from toolhost_artifact.result import exported_line, structured
from toolhost_artifact.specs import V1_DESCRIPTION as DESCRIPTION
from toolhost_artifact.specs import V1_INPUT_SCHEMA as INPUT_SCHEMA
from toolhost_artifact.specs import V1_SPEC as SPEC

__all__ = ["DESCRIPTION", "INPUT_SCHEMA", "SPEC", "export"]


def export(context: ToolExecutionContext, path: str) -> ToolOutput:
    """The tool body (``specs.EXPORT_V1`` calls it): export the file, return its ref at the
    artifact's trust."""
    exported = export_file(path, context)
    return ToolOutput(
        structured=structured(exported.ref),
        content=exported_line(exported.ref),
        output_trust=exported.trust,
    )
