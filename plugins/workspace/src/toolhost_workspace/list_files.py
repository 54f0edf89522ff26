"""workspace.list_files: the entries under a directory of the run's workspace.

The path goes to ``context.workspace`` as the caller wrote it; this module resolves nothing
and opens nothing (hard gate 10). The handle walks the tree without following a symlink and
without listing one, orders entries bytewise on the full relative path, and keeps at most
``LIMIT`` of them, dropping the tail, so a truncated listing is a prefix of the full one and
memory is bounded by the cap rather than by the size of the tree.

An entry is a relative path, a kind and a size, and nothing else: no modification time (it
is ambient state and would change the result under a fixed clock), no checksum (hashing every
file would turn a directory read into a full read of the directory).

Registered but not in the default roster (the seed's rule): within one claim a model knows what it
wrote, so only an explicit enabled_tools list offers it.
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
    Trust,
    WorkspaceNotDirectory,
    WorkspaceNotFound,
)
from toolhost_workspace.messages import NO_SUCH_PATH, NOT_A_DIRECTORY
from toolhost_workspace.specs import LIST_FILES_DESCRIPTION as DESCRIPTION
from toolhost_workspace.specs import LIST_FILES_INPUT_SCHEMA as INPUT_SCHEMA
from toolhost_workspace.specs import LIST_FILES_OUTPUT_SCHEMA as OUTPUT_SCHEMA
from toolhost_workspace.specs import LIST_FILES_SPEC as SPEC

__all__ = ["DESCRIPTION", "INPUT_SCHEMA", "LIMIT", "OUTPUT_SCHEMA", "SPEC", "list_files"]

#: Entries per listing. A constant, not an argument: a limit the model sets is a limit the model
#: raises. The real bound is maximum_output_bytes; the cap makes overflow a clean truncated flag
#: rather than the pipeline's excerpt cutting a JSON document in half. Tests lower it.
LIMIT = 1000


def _quoted(path: str) -> str:
    # JSON-quoted in the text the model reads: a name may hold a newline or a quote (the handle
    # refuses those in arguments, not on disk), and an unquoted one could forge a line.
    return json.dumps(path, ensure_ascii=False)


def _line(entry: Mapping[str, Any]) -> str:
    if entry["kind"] == "directory":
        return f"directory {_quoted(entry['path'])}"
    size = entry["byte_count"]
    return f"file {_quoted(entry['path'])} {size} {'byte' if size == 1 else 'bytes'}"


def _truncated_line(count: int) -> str:
    return (f"Truncated: these are the first {count} entries in bytewise order; "
            f"list a subdirectory to see the rest.")


def _render(path: str, entries: list[dict[str, Any]], truncated: bool) -> str:
    """What the model reads: one line an entry, then a line saying the listing was cut."""
    if not entries:
        where = "the workspace root" if path == "" else _quoted(path)
        return f"No entries under {where}."
    lines = [_line(e) for e in entries]
    if truncated:
        lines.append(_truncated_line(len(entries)))
    return "\n".join(lines)


def _canonical_size(value: Any) -> int:
    # As the pipeline measures a structured result: sorted keys, no spaces, UTF-8.
    return len(json.dumps(value, sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False).encode("utf-8"))


def _fitting(path: str, entries: list[dict[str, Any]]) -> int:
    """How many of ``entries`` (from the first) fit in maximum_output_bytes, the structured
    result and the text each measured whole as the pipeline measures them, with the line
    saying the rest was cut: long paths pass the byte bound before LIMIT entries do, and the
    pipeline's excerpt would then cut the listing in the middle, not drop its tail."""
    limit = SPEC.maximum_output_bytes
    # Measured with the longer of the two flags: a listing that fits whole says false.
    structured = _canonical_size({"entries": [], "path": path, "truncated": False})
    text = 0
    for count, entry in enumerate(entries):
        structured += _canonical_size(entry) + (1 if count else 0)
        text += len(_line(entry).encode("utf-8")) + 1
        cut = len(_truncated_line(count + 1).encode("utf-8"))
        if structured > limit or text + cut > limit:
            return count
    return len(entries)


def list_files(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
    """The tool body: one bounded listing from the handle, trust from every entry's provenance."""
    # Step 4 applied the schema's defaults: both are here.
    path = arguments["path"]
    recursive = arguments["recursive"]
    workspace = context.workspace
    try:
        listing = workspace.listdir(path, recursive=recursive, limit=LIMIT)
    except WorkspaceNotFound:
        raise ToolFailure(NO_SUCH_PATH) from None
    except WorkspaceNotDirectory:
        raise ToolFailure(NOT_A_DIRECTORY) from None
    entries: list[dict[str, Any]] = [
        {"path": e.path, "kind": e.kind, "byte_count": e.byte_count} for e in listing.entries
    ]
    truncated = listing.truncated
    if (fitting := _fitting(path, entries)) < len(entries):
        entries, truncated = entries[:fitting], True
    # INTERNAL_TOOL only when every entry returned is TOOL_WRITTEN. all() stops at the first
    # that is not, which is the common case, so this costs one lookup there. A directory has no
    # provenance record (the handle stamps files), so any listing with a directory is
    # EXTERNAL_UNTRUSTED. An empty listing is INTERNAL_TOOL: it carries no name from disk.
    trusted = all(workspace.provenance(e["path"]) is Provenance.TOOL_WRITTEN for e in entries)
    return ToolOutput(
        structured={"path": path, "entries": entries, "truncated": truncated},
        content=_render(path, entries, truncated),
        output_trust=Trust.INTERNAL_TOOL if trusted else Trust.EXTERNAL_UNTRUSTED,
    )

