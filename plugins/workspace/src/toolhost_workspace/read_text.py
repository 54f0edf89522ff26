"""workspace.read_text: a UTF-8 text file from the run's workspace, with its checksum.

The path goes to ``context.workspace`` as the caller wrote it; this module resolves nothing
and opens nothing (hard gate 10). A path the handle rejects raises ``WorkspaceEscape``, which
is deliberately not caught: pipeline step 9 maps it to ToolValidationError.

The binary rule is the whole rule: a NUL byte, then strict UTF-8. Both checks run as the bytes
arrive, chunk by chunk: the NUL scan on each chunk's bytes before they are decoded, and an
incremental strict decoder that carries a multi-byte sequence split across two chunks into the
next one. A file that fails either is ``not_text`` with no content at all: a partial decode
looks like content, so nothing downstream would treat it as a failure.

There is no size limit of its own here. The pipeline's step 12 owns large results (excerpt
and artifact past maximum_output_bytes, OUTPUT_TOO_LARGE past the hard ceiling); a second
ceiling in the tool would be a second truncation shape without the elision marker or the
artifact. What the tool does own is how much it reads: a file past the pipeline's
``HARD_OUTPUT_CEILING`` can only end as OUTPUT_TOO_LARGE, so reading stops as soon as the text
read is over it (at most one chunk past it), and that text is returned for step 12 to refuse
and artifactize exactly as it would the whole file. A 40 MiB file, or one that grows while it
is read, costs the ceiling and a chunk, not its size.
"""

from __future__ import annotations

import codecs
import hashlib
from collections.abc import Iterator, Mapping
from typing import Any

from toolhost import (
    HARD_OUTPUT_CEILING,
    Provenance,
    ToolExecutionContext,
    ToolFailure,
    ToolOutput,
    Trust,
    WorkspaceIsDirectory,
    WorkspaceNotFound,
    provenance_of,
    sha256_checksum,
)
from toolhost_workspace.messages import NO_SUCH_PATH, NOT_A_FILE, NOT_TEXT
from toolhost_workspace.specs import READ_TEXT_DESCRIPTION as DESCRIPTION
from toolhost_workspace.specs import READ_TEXT_INPUT_SCHEMA as INPUT_SCHEMA
from toolhost_workspace.specs import READ_TEXT_OUTPUT_SCHEMA as OUTPUT_SCHEMA
from toolhost_workspace.specs import READ_TEXT_SPEC as SPEC

__all__ = ["CHUNK_SIZE", "DESCRIPTION", "INPUT_SCHEMA", "OUTPUT_SCHEMA", "SPEC", "read_text"]

#: Bytes per read. A module constant so the chunk-boundary test (hard gate 11) can place a
#: multi-byte character exactly across it. 64 KiB matches the handle's own default.
CHUNK_SIZE = 64 * 1024


def read_text(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
    """The tool body: read, check, decode and hash incrementally; trust from the handle's
    provenance."""
    path = arguments["path"]
    workspace = context.workspace
    decoder = codecs.getincrementaldecoder("utf-8")(errors="strict")
    decode, state = decoder.decode, decoder.getstate
    digest = hashlib.sha256()
    text = ""
    byte_count = 0
    # Bytes read that begin a character the next chunk completes: held back by the decoder,
    # and hashed only once the character is whole, so the checksum always covers exactly the
    # bytes of ``text``.
    held = b""
    past_ceiling = False
    chunks: Iterator[bytes] | None = None
    try:
        chunks = workspace.read_chunks(path, CHUNK_SIZE)
        for chunk in chunks:
            # On the bytes, before the decode: U+0000 is valid UTF-8, and it is binary anyway.
            nul = chunk.find(b"\x00")
            if nul >= 0:
                raise ToolFailure(NOT_TEXT, detail={"problem": "NUL byte",
                                                    "offset": byte_count + nul})
            try:
                piece = decode(chunk)
            except UnicodeDecodeError as exc:
                raise ToolFailure(NOT_TEXT, detail={
                    "problem": f"invalid UTF-8 ({exc.reason})",
                    "offset": byte_count - len(held) + exc.start,
                }) from None
            # The one decode, as the bytes arrive: each piece is appended where the text
            # grows in place (CPython resizes a str it holds the only reference to), and is
            # dropped at once. Keeping the pieces for one join at the end holds the text twice
            # and measured 1.5-1.8x a plain read on non-ASCII text; this, 0.45-0.75x.
            text += piece
            byte_count += len(chunk)
            # Hash what the decoder took whole: all of held + chunk but what it now holds.
            whole = len(held) + len(chunk) - len(state()[0])
            if whole >= len(held):
                if held:
                    digest.update(held)
                digest.update(memoryview(chunk)[:whole - len(held)])
                held = chunk[whole - len(held):]
            else:  # a chunk smaller than the character it continues
                digest.update(held[:whole])
                held = held[whole:] + chunk
            if byte_count - len(held) > HARD_OUTPUT_CEILING:
                # The whole characters read are already over the pipeline's hard ceiling: the
                # call ends OUTPUT_TOO_LARGE whatever follows, so stop reading (the handle
                # reads lazily; the dropped iterator closes the file). Nothing past this
                # point is checked for text: a NUL further on is never seen.
                past_ceiling = True
                break
        if not past_ceiling:
            try:
                # final=True: a multi-byte sequence cut off by the end of the file is not text.
                decode(b"", final=True)  # "" or an error: complete sequences decoded
            except UnicodeDecodeError as exc:
                raise ToolFailure(NOT_TEXT, detail={
                    "problem": f"invalid UTF-8 at the end of the file ({exc.reason})",
                    "offset": byte_count - len(exc.object) + exc.start,
                }) from None
        # Judged on the descriptor read, after the last chunk and before it is closed: asking
        # the path after the read let a command swap a directory of its own in for the read
        # and back (a review returned a sandbox's text as INTERNAL_TOOL). Past the ceiling
        # the read stopped early: the output is refused anyway. Reads never establish
        # provenance; writes do.
        trusted = not past_ceiling and provenance_of(chunks) is Provenance.TOOL_WRITTEN
    except WorkspaceNotFound:
        raise ToolFailure(NO_SUCH_PATH) from None
    except WorkspaceIsDirectory:
        raise ToolFailure(NOT_A_FILE) from None
    finally:
        # The read let go now (its descriptor closes with it), not when a failure's
        # traceback, which holds this frame, is dropped.
        chunks = None
    # Past the ceiling, ``text`` is the text read without the start of a character the next
    # chunk would have completed: more than HARD_OUTPUT_CEILING bytes, so step 12 refuses it
    # and saves it as the partial output. byte_count and checksum describe exactly its bytes.
    byte_count -= len(held)
    checksum = sha256_checksum(digest)
    return ToolOutput(
        structured={
            "path": path,
            "content": text,
            "byte_count": byte_count,
            "checksum": checksum,
        },
        # What the model reads is the file's text and nothing else: a header would be text the
        # file could imitate, and byte_count and checksum are in the structured result.
        content=text,
        output_trust=Trust.INTERNAL_TOOL if trusted else Trust.EXTERNAL_UNTRUSTED,
    )
