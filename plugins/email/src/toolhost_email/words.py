"""An unstructured field's value (a Subject, an unknown field) as ``policy.default`` decodes
it, for the plain case, without the header parser.

The parser builds a token tree of the whole value, some fifty microseconds for a Subject of two
encoded words, and nearly every mail has a Subject of its own. In the plain case the tree's text
is simple: the value's words and blanks as they are, each whole RFC 2047 encoded word decoded,
and the blanks between two encoded words dropped. ``decode_unstructured`` reads that case (the
unfolded value printable ASCII; each word either no "=?" at all or one whole encoded word with
no language, whose text decodes cleanly in its charset) and returns None for any other, which
the caller hands to the parser. The tests hold the two equal.
"""

from __future__ import annotations

import base64
import re
from typing import Final

__all__ = ["decode_unstructured"]

_PRINTABLE: Final = re.compile(r"[\t\x20-\x7e]*")
_BLANKS: Final = re.compile(r"([ \t]+)")
#: A whole encoded word the parser's ``get_encoded_word`` takes as it stands: no language
#: ("*"), and no text starting with "=" (the parser looks past "?=" then).
_ENCODED_WORD: Final = re.compile(r"=\?([A-Za-z0-9_.:-]+)\?([bBqQ])\?([^?=][^?]*)\?=")
#: Base64 the parser decodes without repairing its padding or skipping a character.
_BASE64: Final = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")
_Q_BYTE: Final = re.compile(rb"=([a-fA-F0-9]{2})")


def _q_byte(match: re.Match[bytes]) -> bytes:
    return bytes.fromhex(match[1].decode())


def _encoded_word(word: str) -> str | None:
    """The text of ``word`` when it is one whole encoded word the parser decodes cleanly."""
    match = _ENCODED_WORD.fullmatch(word)
    if match is None:
        return None
    charset, encoding, text = match.groups()
    if encoding in "bB":
        if _BASE64.fullmatch(text) is None:
            return None
        data = base64.b64decode(text, validate=True)
    else:
        data = _Q_BYTE.sub(_q_byte, text.encode("ascii").replace(b"_", b" "))
    try:
        decoded = data.decode(charset)
        decoded.encode("utf-8")  # a lone surrogate: the parser sanitizes, leave it to it
    except Exception:  # an unknown charset, undecodable bytes: the parser's defects
        return None
    return decoded


def decode_unstructured(value: str) -> str | None:
    """``value`` (unfolded) decoded as ``UnstructuredHeader`` decodes it; None when it is not
    plain."""
    if _PRINTABLE.fullmatch(value) is None:
        return None
    out: list[str] = []
    after_word = False  # the last word was an encoded one
    for index, piece in enumerate(_BLANKS.split(value)):
        if index % 2:  # blanks
            out.append(piece)
            continue
        if "=?" not in piece:
            out.append(piece)
            after_word = False
            continue
        decoded = _encoded_word(piece)
        if decoded is None:
            return None
        if after_word:
            out[-1] = ""  # the blanks between two encoded words
        out.append(decoded)
        after_word = True
    return "".join(out)
