"""How a call's output is laid out in the record: once, and by reference when large.

A tool's output has two parts, the text the model reads (``result_content``) and the
structured result (``result_structured``), and the structured result often holds the text
itself (read_text's ``content``): stored as it comes, a 1 MiB read was 2.1 MB of row, and the
same file read 500 times was a gigabyte of database. So the stores write it thus:

- the structured result's first string equal to the text, when the text is at least
  ``ELIDE_CHARS`` long, is stored as ``""``, its place named in ``output_refs``
  (``{"content_at": ["content"]}``: keys, and indexes of arrays, from the top);
- a column text (the content, or the structured result's canonical JSON) over ``INLINE_BYTES``
  of UTF-8 is stored in ``tool_outputs`` under its ``sha256:`` digest, once however many rows
  name it, and the column is NULL with the digest in ``output_refs``
  (``{"content": "sha256:...", "structured": "sha256:..."}``).

A row with ``output_refs`` NULL holds its output as written before this layout (or small
enough to need none). Both stores lay rows out with these functions, and read them back into
the very record that was written: the layout is the stores' business, never the port's.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from toolhost._model.convert import column_values, to_row
from toolhost._model.digest import canonical_text, sha256_digest
from toolhost._model.invocations import InvocationRecord
from toolhost._model.settings import StoreUnavailable

__all__ = ["ELIDE_CHARS", "INLINE_BYTES", "OUTPUT_COLUMNS", "Blob", "OutputMissing",
           "both_or_neither", "completed", "elided", "joined", "laid_out", "record_columns",
           "relaid", "relay", "set_columns"]

#: Characters the text must have before the structured result's copy of it is left out: a
#: shorter one costs less stored twice than the walk to find it (math's "391").
ELIDE_CHARS = 256
#: UTF-8 bytes above which a column's text is stored by reference: a row stays within a few
#: pages, and a text read again is stored once.
INLINE_BYTES = 4096
#: The columns an output is written to; setting one of them sets the layout too.
OUTPUT_COLUMNS = frozenset({"result_structured", "result_content"})

#: (digest, body): one ``tool_outputs`` row to insert, if not there already.
Blob = tuple[str, bytes]
#: A place in the structured result: keys of objects, indexes of arrays.
Place = list[str | int]


def elided(structured: Mapping[str, Any] | None,
           content: str | None) -> tuple[Mapping[str, Any] | None, Place | None]:
    """``structured`` with its first string equal to ``content`` replaced by ``""``, and that
    string's place; ``(structured, None)`` when the content is short or not in it."""
    if structured is None or content is None or len(content) < ELIDE_CHARS:
        return structured, None
    path: Place = []
    found = _find(structured, content, path)
    if not found:
        return structured, None
    return _replaced(structured, path, ""), path


def _find(value: Any, content: str, path: Place) -> bool:
    """Whether ``content`` is a string within ``value``; ``path`` then leads to the first."""
    if isinstance(value, str):
        return value == content
    items: Any = (value.items() if isinstance(value, Mapping)
                  else enumerate(value) if isinstance(value, (list, tuple)) else ())
    for key, item in items:
        path.append(key)
        if _find(item, content, path):
            return True
        path.pop()
    return False


def _replaced(value: Any, path: Sequence[str | int], new: Any) -> Any:
    """A copy of ``value`` with the item at ``path`` replaced (only the containers on the
    path are copied)."""
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, Mapping):
        return {**value, head: _replaced(value[head], rest, new)}
    copy = list(value)
    copy[int(head)] = _replaced(copy[int(head)], rest, new)
    return copy


class OutputMissing(StoreUnavailable):
    """A row names an output ``tool_outputs`` does not hold: the database was altered. A
    command stops on it in one line, as on any database it cannot use."""

    def __init__(self, database: Path, digest: str) -> None:
        super().__init__(database, f"the recorded output {digest} is missing from the "
                         f"database {database}: it was altered outside toolhost; restore it "
                         "from a backup")


def record_columns(record: InvocationRecord) -> tuple[dict[str, Any], list[Blob]]:
    """Every column of ``record``'s row (``to_row``'s, then ``output_refs``), laid out, and
    the blobs to write with it."""
    structured, content_at = elided(record.result_structured, record.result_content)
    if content_at is not None:
        record = attrs.evolve(record, result_structured=structured)
    columns = to_row(record)
    return columns, laid_out(columns, content_at)


def set_columns(fields: Mapping[str, Any]) -> tuple[dict[str, Any], list[Blob]]:
    """The columns an UPDATE of ``fields`` (attribute name → value) sets, laid out, and the
    blobs to write with it.

    :raises ValueError: one output column without the other (``both_or_neither``).
    """
    both_or_neither(fields)
    if "result_content" not in fields:
        return column_values(InvocationRecord, fields), []
    structured, content_at = elided(fields["result_structured"], fields["result_content"])
    columns = column_values(InvocationRecord, {**fields, "result_structured": structured})
    return columns, laid_out(columns, content_at)


def laid_out(columns: dict[str, Any], content_at: Place | None) -> list[Blob]:
    """Lay out the output columns of a row being written (name → stored value, as
    ``to_row``/``column_values`` give them), in place: a text over ``INLINE_BYTES`` becomes
    NULL and a blob, and ``output_refs`` says where each part is. The blobs returned must be
    written in the same transaction as the row."""
    refs: dict[str, Any] = {}
    blobs: list[Blob] = []
    for column, key in (("result_content", "content"), ("result_structured", "structured")):
        text = columns.get(column)
        # A str's length bounds its UTF-8 from below: the encode is paid by large texts only.
        if text is None or len(text) * 4 <= INLINE_BYTES:
            continue
        body = text.encode()
        if len(body) <= INLINE_BYTES:
            continue
        digest = sha256_digest(body)
        blobs.append((digest, body))
        refs[key] = digest
        columns[column] = None
    if content_at is not None:
        refs["content_at"] = content_at
    columns["output_refs"] = canonical_text(refs) if refs else None
    return blobs


def joined(structured: Mapping[str, Any] | None, content: str | None, refs_text: str,
           blob: Callable[[str], bytes]) -> tuple[Mapping[str, Any] | None, str | None]:
    """The output a row laid out by ``laid_out`` holds: ``structured`` and ``content`` as read
    from its columns, completed from ``refs_text`` (its ``output_refs``) and ``blob`` (the body
    of a ``tool_outputs`` row by digest)."""
    refs = _decode(refs_text)
    if "content" in refs:
        content = blob(refs["content"]).decode()
    if "structured" in refs:
        structured = _decode(blob(refs["structured"]).decode())
    if "content_at" in refs and structured is not None:
        structured = _replaced(structured, refs["content_at"], content)
    return structured, content


def _decode(text: str) -> Any:
    return json.loads(text)


def both_or_neither(fields: Mapping[str, Any]) -> None:
    """The two output columns are one output, laid out together: a write sets both or
    neither (the structured result's copy of the content is found only beside it).

    :raises ValueError: one without the other.
    """
    given = OUTPUT_COLUMNS & fields.keys()
    if len(given) == 1:
        raise ValueError(f"{next(iter(given))} is set only with "
                         f"{next(iter(OUTPUT_COLUMNS - given))}: they are one output")


def relaid(structured_text: str | None,
           content: str | None) -> tuple[dict[str, Any], list[Blob]] | None:
    """The output columns of a row written before this layout (``structured_text`` its
    canonical JSON as stored), laid out now; None when it stays as it is. The migration to
    this layout runs it over the rows already written."""
    structured = None if structured_text is None else _decode(structured_text)
    structured, content_at = elided(structured, content)
    columns: dict[str, Any] = {
        "result_structured": structured_text if content_at is None or structured is None
        else canonical_text(structured),
        "result_content": content,
    }
    blobs = laid_out(columns, content_at)
    return None if columns["output_refs"] is None else (columns, blobs)


def relay(rows: Iterable[tuple[str, str | None, str | None]],
          write: Callable[[str, dict[str, Any], list[Blob]], None]) -> None:
    """The migration to this layout, over ``rows`` written before it (id, structured text,
    content, as stored): ``write(id, columns, blobs)`` for each row it changes, in the
    store's own SQL."""
    for invocation_id, structured_text, content in rows:
        laid = relaid(structured_text, content)
        if laid is not None:
            write(invocation_id, *laid)


def completed(record: InvocationRecord, refs_text: str | None,
              blob: Callable[[str], bytes]) -> InvocationRecord:
    """``record`` as read from its columns, its output completed by ``refs_text`` (the row's
    ``output_refs``) and ``blob``; itself when the row has no layout."""
    if refs_text is None:
        return record
    structured, content = joined(record.result_structured, record.result_content, refs_text,
                                 blob)
    return attrs.evolve(record, result_structured=structured, result_content=content)
