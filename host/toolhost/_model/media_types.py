"""The media type of a file by its name, from one fixed table keyed by the extension.

Fixed, and never the ``mimetypes`` module, which reads the machine's mime files
(``/etc/mime.types`` and friends): the media type is part of an artifact's identity (the same
origin, name, media type and content is the same artifact), so the same file must get the same
type on every host. One table for the whole host: ``artifact.export``, ``toolhost artifacts
upload`` and any plugin naming a file it stores (public as ``toolhost.media_type_for``).

A text type carries no charset: bytes taken as they are have no known encoding. Text saved as
UTF-8 says so (``MediaType.utf8``).
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

__all__ = ["OCTET_STREAM", "TABLE", "MediaType", "extension_of", "media_type_for"]


@attrs.frozen
class MediaType:
    """A media type, and whether its content is text."""

    name: str
    textual: bool

    def utf8(self) -> str:
        """The media type of this kind of text saved as UTF-8: ``text/plain; charset=utf-8``.
        ``ValueError`` for a type that is not text."""
        if not self.textual:
            raise ValueError(f"{self.name} is not a text type")
        return f"{self.name}; charset=utf-8"


def _text(name: str) -> MediaType:
    return MediaType(name, textual=True)


def _binary(name: str) -> MediaType:
    return MediaType(name, textual=False)


#: Unknown, or no, extension: bytes of no declared kind.
OCTET_STREAM = _binary("application/octet-stream")

#: Lower-case extension (without the dot) -> media type. Registered IANA types where one
#: exists (text/javascript per RFC 9239, application/yaml per RFC 9512, application/gzip per
#: RFC 6713); the common unregistered name otherwise (text/x-python, application/x-tar,
#: application/jsonl as jsonlines.org proposes).
TABLE: Mapping[str, MediaType] = {
    "txt": _text("text/plain"),
    "log": _text("text/plain"),
    "md": _text("text/markdown"),
    "csv": _text("text/csv"),
    "tsv": _text("text/tab-separated-values"),
    "json": _text("application/json"),
    "jsonl": _text("application/jsonl"),
    "xml": _text("application/xml"),
    "yaml": _text("application/yaml"),
    "yml": _text("application/yaml"),
    "html": _text("text/html"),
    "htm": _text("text/html"),
    "css": _text("text/css"),
    "js": _text("text/javascript"),
    "py": _text("text/x-python"),
    "svg": _text("image/svg+xml"),
    "pdf": _binary("application/pdf"),
    "png": _binary("image/png"),
    "jpg": _binary("image/jpeg"),
    "jpeg": _binary("image/jpeg"),
    "gif": _binary("image/gif"),
    "webp": _binary("image/webp"),
    "mp3": _binary("audio/mpeg"),
    "wav": _binary("audio/wav"),
    "mp4": _binary("video/mp4"),
    "webm": _binary("video/webm"),
    "zip": _binary("application/zip"),
    "gz": _binary("application/gzip"),
    "tar": _binary("application/x-tar"),
}


def extension_of(name: str) -> str | None:
    """The text after the last dot, lower-cased; None for no dot, a trailing dot, a name that
    is only a dot-prefixed stem (``.bashrc``), or an extension that is not ASCII.

    ASCII only before lower-casing: ``str.lower`` maps some non-ASCII letters to ASCII ones
    (KELVIN SIGN to ``k``), which would let a lookalike extension select a table entry.
    """
    stem, dot, extension = name.rpartition(".")
    if not dot or not stem or not extension or not extension.isascii():
        return None
    return extension.lower()


def media_type_for(name: str) -> MediaType:
    """The table's media type for a file name, ``application/octet-stream`` when unknown."""
    extension = extension_of(name)
    return TABLE.get(extension, OCTET_STREAM) if extension is not None else OCTET_STREAM
