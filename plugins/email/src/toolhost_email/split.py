"""The standard feed parser's reading of a plain-shaped message, without the feed parser.

``email.parser`` reads a message line by line through generators, compiles a regular expression
for every multipart boundary and, under ``policy.default``, parses each part's Content-Type
with the full header grammar several times: 70% of an import's parse of typical mail. For the
shape nearly all mail has (LF line ends; header sections of well-formed fields, each ended by a
blank line; text and attachment parts; well-formed multiparts whose Content-Type is plain)
``split`` builds the tree the feed parser builds (the same raw fields, the same payload
strings) from the text directly, so ``EmailMessage.get_body`` and ``get_content`` read it as
they read the parser's. Anything else is None and the caller runs the parser: a CR anywhere, a
line in a header section that is no field, an envelope line, a message/* message, a digest, a
multipart without a start or close boundary or with an empty part, a boundary that is a prefix
of an enclosing one. The tests hold the two readings equal.
"""

from __future__ import annotations

import itertools
import re
from email.message import EmailMessage, Message
from email.parser import Parser
from email.policy import EmailPolicy
from typing import Final

__all__ = ["MAX_NESTING", "Fields", "TooDeep", "nesting", "simple_content_type", "split"]

#: A message's raw header fields, as ``Message.raw_items()`` lists them.
Fields = list[tuple[str, str]]

#: One field: a name as the feed parser's ``headerRE`` takes it (printable ASCII but the colon,
#: at least one character), its colon, and the rest of its line and of each continuation line.
_FIELD: Final = re.compile(r"([\x21-\x39\x3b-\x7e]+):([^\n]*\n(?:[ \t][^\n]*\n)*)")
_MIME_FIELD: Final = re.compile("content-", re.IGNORECASE)
#: A Content-Type that ``policy.default`` reads as written: type/subtype and parameters whose
#: names are letters, digits and "-" and whose values are tokens or quoted strings of RFC
#: 2046's boundary characters (no space, no "?", so no encoded word), after ";" and blanks.
_TOKEN: Final = r"[A-Za-z0-9][A-Za-z0-9.+_-]*"
_SIMPLE_TYPE: Final = re.compile(
    rf"({_TOKEN}/{_TOKEN})((?:;[ \t]*[A-Za-z][A-Za-z0-9-]*="
    r"""(?:"[A-Za-z0-9'()+_,./:=-]+"|[A-Za-z0-9+_.-]+))*)""")
_PARAM: Final = re.compile(r";[ \t]*([A-Za-z0-9-]+)=\"?([^\";]*)")
#: RFC 5322's line length; far under ``parse.MAX_RAW_HEADER_CHARS``, so never cut before parsing.
_MAX_SIMPLE: Final = 998
#: How deep multiparts nest before the parser reads the message (real mail nests 3 or 4).
_MAX_DEPTH: Final = 16


def simple_content_type(raw: str) -> tuple[str, dict[str, str]] | None:
    """``raw`` (a Content-Type field's raw value) as ``policy.default`` reads it: the
    lower-cased type and the parameters by lower-cased name, when it is plain (``_SIMPLE_TYPE``
    after unfolding, no parameter twice, within a line's length); None otherwise."""
    if len(raw) > _MAX_SIMPLE:
        return None
    value = raw.replace("\n", "")
    match = _SIMPLE_TYPE.fullmatch(value)
    if match is None:
        return None
    params: dict[str, str] = {}
    for name, param in _PARAM.findall(match[2]):
        if name.lower() in params:
            return None
        params[name.lower()] = param
    return match[1].lower(), params


def _fields(text: str, start: int, end: int) -> tuple[Fields, int] | None:
    """The fields of the header section at ``text[start:end]`` and where the body after its
    blank line starts; None unless every line before that blank line is a field or a
    field's continuation (the parser would find a defect, or an envelope line)."""
    if text.startswith("\n", start):  # no field at all: the blank line alone
        return [], start + 1
    blank = text.find("\n\n", start, end)
    if blank < 0:
        return None
    # One field at a time from where the last ended, stopping at the first line that is none:
    # ``findall`` would retry at every position of a long line without a colon (quadratic: a
    # 40k-character line took 25 s), where one anchored attempt fails in one pass.
    found: Fields = []
    at, stop = start, blank + 1
    while at < stop:
        field = _FIELD.match(text, at, stop)
        if field is None:
            return None  # a line that is no field: the parser finds a defect
        # Each value as EmailPolicy.header_source_parse makes it of the field's lines.
        found.append((field[1], field[2].lstrip(" \t").rstrip("\r\n")))
        at = field.end()
    return found, blank + 2


def _boundary_lines(text: str, start: int, end: int,
                    boundary: str) -> list[tuple[int, int, bool]]:
    """Each line of ``text[start:end]`` the parser takes for a boundary of ``boundary``:
    (where it starts, where the next line starts, whether it closes the multipart)."""
    delimiter = "--" + boundary
    found: list[tuple[int, int, bool]] = []
    at = text.find(delimiter, start, end)
    while at >= 0:
        newline = text.find("\n", at, end)
        line_end = end if newline < 0 else newline
        after = line_end if newline < 0 else newline + 1
        if at == start or text[at - 1] == "\n":
            rest = text[at + len(delimiter):line_end]
            close = rest.startswith("--")
            if not (rest[2:] if close else rest).strip(" \t"):
                found.append((at, after, close))
        at = text.find(delimiter, after, end)
    return found


def _part_ranges(text: str, start: int, end: int,
                 boundary: str) -> list[tuple[int, int]] | None:
    """Where each part of the multipart body ``text[start:end]`` starts and where the next
    boundary line starts; None when the parser would read it otherwise than part by part (no
    start or close boundary, an empty part)."""
    lines = _boundary_lines(text, start, end, boundary)
    close = next((i for i, (_, _, closes) in enumerate(lines) if closes), None)
    if not close:  # None: never closed; 0: closed before it opened
        return None
    ranges = []
    for (_, part_start, _), (next_line, _, _) in itertools.pairwise(lines[:close + 1]):
        if part_start >= next_line:
            return None
        ranges.append((part_start, next_line))
    return ranges


def _mime_fields(fields: Fields) -> tuple[Fields, str | None]:
    """The part's Content-* fields, the only ones ``get_body`` and ``get_content`` read (its
    type, disposition, transfer encoding and id), and the first Content-Type's raw value, the
    one ``Message.get`` returns."""
    mime = [field for field in fields if _MIME_FIELD.match(field[0])]
    raw = next((value for name, value in mime if name.lower() == "content-type"), None)
    return mime, raw


def _canonical(mime: Fields, ctype: str) -> None:
    """Make the first Content-Type of a multipart's ``mime`` fields its type alone, which
    ``get_body`` reads the same and the policy parses once per type, not once per boundary
    (not for a related one: ``get_body`` reads its start parameter)."""
    if ctype != "multipart/related":
        index = next(i for i, (name, _) in enumerate(mime) if name.lower() == "content-type")
        mime[index] = (mime[index][0], ctype)


def _structure(part: EmailMessage, raw: str | None,
               simple: tuple[str, dict[str, str]] | None) -> tuple[str, str | None]:
    """The part's content type, and its boundary when it is a multipart, as the parser reads
    them (by the policy when the Content-Type is not plain)."""
    if raw is None:
        return "text/plain", None
    if simple is not None:
        ctype, params = simple
        return ctype, params.get("boundary") if ctype.startswith("multipart/") else None
    ctype = part.get_content_type()
    return ctype, part.get_boundary() if ctype.startswith("multipart/") else None


def _part(text: str, start: int, end: int, parsed: tuple[Fields, int], policy: EmailPolicy,
          enclosing: tuple[str, ...]) -> EmailMessage | None:
    """The part at ``text[start:end]`` (``parsed``: its fields, where its body starts) as the
    parser builds it, for ``get_body``; in a multipart (``enclosing`` its boundaries) the
    newline before ``end`` is the next boundary's, not the payload's. None: leave the message
    to the parser."""
    fields, body = parsed
    mime, raw = _mime_fields(fields)
    simple = None if raw is None else simple_content_type(raw)
    if simple is not None and simple[0].startswith("multipart/"):
        _canonical(mime, simple[0])
    part = EmailMessage(policy=policy)
    for name, value in mime:
        part.set_raw(name, value)
    ctype, boundary = _structure(part, raw, simple)
    if ctype == "multipart/digest" or len(enclosing) > _MAX_DEPTH:
        return None
    if ctype.startswith("message/"):
        if not enclosing:
            return None
        # get_body never reads into it, but the parser reads it as a message of its own:
        # whatever that raises, it raises here too. One nested too deep is refused here, as
        # the parser's tree would be (its levels are this part's, counted by ``nesting``,
        # under the enclosing ones): reading a hostile nesting again costs as much as this
        # reading did, quadratic in the depth. Python's recursion limit is met only hundreds
        # of levels past MAX_NESTING, so a RecursionError is one such nesting too.
        try:
            enclosed = Parser(policy=policy).parsestr(text[start:end])
        except RecursionError:
            raise TooDeep from None
        if nesting(enclosed) + len(enclosing) > MAX_NESTING:
            raise TooDeep
    if not ctype.startswith("multipart/"):
        payload = text[body:end]
        part.set_payload(payload[:-1] if enclosing and payload.endswith("\n") else payload)
        return part
    if not boundary or any(boundary.startswith(b) or b.startswith(boundary) for b in enclosing):
        return None
    part.get("content-transfer-encoding")  # the parser reads it here (for a defect)
    ranges = _part_ranges(text, body, end, boundary)
    if ranges is None:
        return None
    for part_start, part_end in ranges:
        sub_fields = _fields(text, part_start, part_end)
        sub = None if sub_fields is None else _part(text, part_start, part_end, sub_fields,
                                                    policy, (*enclosing, boundary))
        if sub is None:
            return None
        part.attach(sub)
    return part


#: Levels of multiparts and enclosed messages a message may have (``parse`` skips a deeper one
#: as undecodable). The parser's own bound is Python's recursion limit, met at a depth that
#: depends on how deep the caller's stack is (the importing process and a worker differ), so
#: the same message could be stored in one run and skipped in the next; real mail nests a
#: handful of levels.
MAX_NESTING: Final = 100


class TooDeep(ValueError):
    """The message nests deeper than ``MAX_NESTING``: undecodable, without the parser."""


def nesting(msg: Message) -> int:
    """How many levels of parts ``msg`` holds (1: none), walked without recursion."""
    deepest, stack = 1, [(msg, 1)]
    while stack:
        part, depth = stack.pop()
        deepest = max(deepest, depth)
        if part.is_multipart():
            stack.extend((sub, depth + 1) for sub in part.get_payload()
                         if isinstance(sub, Message))
    return deepest


def split(raw: bytes, policy: EmailPolicy) -> tuple[Fields, EmailMessage] | None:
    """``raw`` read as ``BytesParser(policy=policy)`` reads it: the top-level fields (at least
    one), and the message to read the body from (``get_body``, ``get_content``), built with
    the Content-* fields alone; None: the parser must read it. Raises ``TooDeep`` for a
    message the parser would read nested deeper than ``MAX_NESTING``."""
    if b"\r" in raw:
        return None
    text = raw.decode("ascii", "surrogateescape")
    parsed = _fields(text, 0, len(text))
    if parsed is None or not parsed[0]:
        return None
    part = _part(text, 0, len(text), parsed, policy, ())
    return None if part is None else (parsed[0], part)
