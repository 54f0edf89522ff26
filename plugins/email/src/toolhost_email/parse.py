"""One raw message to what the cache stores: decoded headers, addresses, thread root, bounded
plain text, and the list headers the subscription census reads.

Decoding is the standard library's ``email`` package with ``policy.default`` (RFC 2047 words,
MIME parts, transfer encodings, charsets). A message the parser cannot make sense of is
``Malformed`` with a closed reason, never an exception out of here. The parser itself runs only
for what ``split`` (a message's structure) and ``words`` (an unstructured value) leave to it:
their readings are the parser's and the policy's, for the plain shapes most mail has.
"""

from __future__ import annotations

import base64
import datetime as _dt
import email.utils
import hashlib
import re
from email.errors import HeaderParseError
from email.header import decode_header, make_header
from email.headerregistry import (
    AddressHeader,
    BaseHeader,
    HeaderRegistry,
    ParameterizedMIMEHeader,
    UnstructuredHeader,
)
from email.message import EmailMessage
from email.parser import BytesParser
from email.policy import EmailPolicy
from email.utils import getaddresses
from html.parser import HTMLParser
from typing import Any, Final, Literal

import attrs

from toolhost_email.authres import MAX_STORED_CHARS as MAX_AUTH_RESULTS_CHARS
from toolhost_email.cache_model import MailAddress
from toolhost_email.split import MAX_NESTING, Fields, TooDeep, nesting, split
from toolhost_email.words import decode_unstructured

__all__ = [
    "MAX_ADDRESSES",
    "MAX_ADDRESS_CHARS",
    "MAX_HEADERS",
    "MAX_HEADER_CHARS",
    "MAX_MESSAGE_BYTES",
    "MAX_NAME_CHARS",
    "MAX_RAW_HEADER_CHARS",
    "MAX_SUBJECT_CHARS",
    "MAX_TEXT_CHARS",
    "SKIP_REASONS",
    "Malformed",
    "ParsedMessage",
    "cut_raw",
    "message_key_for",
    "message_keys",
    "parse_message",
    "thread_id_for",
]

#: The bounds the README documents: a message over MAX_MESSAGE_BYTES is skipped; the stored
#: source keeps the first MAX_HEADERS headers, each value cut to MAX_HEADER_CHARS, and the
#: first MAX_TEXT_CHARS characters of plain text.
MAX_MESSAGE_BYTES: Final = 25 * 1024 * 1024
MAX_HEADERS: Final = 100
MAX_HEADER_CHARS: Final = 4000
MAX_TEXT_CHARS: Final = 65536
#: A raw header value is cut to this before any parsing: the stdlib's address and
#: encoded-word parsers are quadratic in a value's length (a From phrase of "a." x 4,000 costs
#: 0.15 s), and no real header is longer.
MAX_RAW_HEADER_CHARS: Final = 8000
#: Stored (and so returned) per message: the subject, each display name, each address list
#: (addresses longer than RFC 5321's path allows are dropped), so one hostile mail cannot
#: outgrow a result.
MAX_SUBJECT_CHARS: Final = 1000
MAX_NAME_CHARS: Final = 200
MAX_ADDRESS_CHARS: Final = 320
MAX_ADDRESSES: Final = 100

#: Why a message was skipped (the import report counts each).
SKIP_REASONS: Final = ("no_header_section", "too_large", "undecodable")
SkipReason = Literal["no_header_section", "too_large", "undecodable"]



def cut_raw(value: str) -> str:
    """``value`` cut to MAX_RAW_HEADER_CHARS, at its last white space when there is one in the
    second half, so an encoded word or an address is not split."""
    if len(value) <= MAX_RAW_HEADER_CHARS:
        return value
    cut = value[:MAX_RAW_HEADER_CHARS + 1]
    space = max(cut.rfind(" "), cut.rfind("\t"), cut.rfind("\n"))
    return cut[:space] if space > MAX_RAW_HEADER_CHARS // 2 else cut[:MAX_RAW_HEADER_CHARS]


class _SharedHeaderPolicy(EmailPolicy):
    """``policy.default`` exactly, except that a value is cut to MAX_RAW_HEADER_CHARS before it
    is parsed, and a short header (name, value) already parsed is not parsed again: the feed
    parser and ``get_body`` fetch Content-Type a dozen times per message, and most MIME headers
    repeat across a mailbox. Header objects are immutable strings, so sharing one is safe; the
    table is bounded in count and, holding short values only, in size."""

    def header_fetch_parse(self, name: str, value: str) -> str:
        value = cut_raw(value)
        if len(value) > _PARSED_VALUE_MAX:
            return self._parse(name, value)
        key = (name, value)
        hit = _PARSED.get(key)
        if hit is None:
            if len(_PARSED) >= _PARSED_MAX:
                _PARSED.clear()
            hit = _PARSED[key] = self._parse(name, value)
        return hit

    def _parse(self, name: str, value: str) -> str:
        """The policy's reading; for a value whose charset text it cannot hold (it raises
        UnicodeError), the reading of ``_holdable(value)``: one such word costs its own
        characters, not the message. An address list the policy raises on is read again
        quoted (``_requoted``)."""
        try:
            return super().header_fetch_parse(name, value)  # type: ignore[no-any-return]
        except UnicodeError:  # a ValueError too: caught first
            return super().header_fetch_parse(  # type: ignore[no-any-return]
                name, _holdable(value, parameters=issubclass(_HEADER_CLASSES[name],
                                                             ParameterizedMIMEHeader)))
        # ValueError: an encoded display name that decodes to CR or LF ("address parts
        # cannot contain CR or LF"); _quoted makes its line breaks spaces.
        except (AttributeError, TypeError, IndexError, ValueError):
            if not issubclass(_HEADER_CLASSES[name], AddressHeader):
                raise
            return super().header_fetch_parse(  # type: ignore[no-any-return]
                name, _requoted(value))


def _requoted(value: str) -> str:
    """An address list whose parsing raised, written again with each display name quoted.
    Python before 3.13 raises reading a display name that ends in a dot right before ``<``
    (``J.<j@x>``, ``. <j@x>``), and every version on an encoded name that decodes to a line
    break (``=?utf-8?q?A=0AB?= <j@x>``): ``email.utils.getaddresses`` reads such a list, and
    the message is kept with its addresses rather than skipped as ``undecodable``."""
    return ", ".join(_quoted(_decoded_words(display_name), addr_spec)
                     for display_name, addr_spec in getaddresses([value]))


def _quoted(display_name: str, addr_spec: str) -> str:
    """``"name" <address>``, the name as a quoted string (UTF-8 inside it is RFC 6532's, so a
    non-ASCII name or address is kept as it is, which ``formataddr`` refuses); a name's line
    breaks are spaces, so nothing starts a header of its own."""
    if not display_name:
        return addr_spec
    name = " ".join(display_name.splitlines()).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{name}" <{addr_spec}>'


def _decoded_words(text: str) -> str:
    """``text`` with its RFC 2047 encoded words decoded, or as it is if one cannot be."""
    try:
        return str(make_header(decode_header(text)))
    except (LookupError, UnicodeError, ValueError, HeaderParseError):
        return text


#: An RFC 2047 encoded word (``decode_header`` reads its charset and bytes).
_ENCODED_WORD: Final = re.compile(r"=\?[^?\s]+\?[bBqQ]\?[^?\s]*\?=")
#: The charset of an RFC 2231 parameter value (``name*=charset'lang'text``, ``name*0*=``),
#: folded or not: a raw value keeps its line breaks (``filename*=\n\tutf-7''...``).
_PARAMETER_CHARSET: Final = re.compile(r"""(\*\s*=\s*"?\s*)[^'"\s;]*'""")
_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _holdable(value: str, *, parameters: bool) -> str:
    """``value`` with each encoded word whose text in its charset holds a lone surrogate (UTF-7
    decodes to one), which no string the policy returns can hold, written again as a UTF-8
    word of that text with U+FFFD in its place; and, with ``parameters`` (a Content-Type or
    Content-Disposition), each RFC 2231 parameter's charset taken as UTF-8 (there a codec that
    refuses to decode with replacement, idna or undefined, fails too; parameters are names,
    not stored). Every other word stays as it is: the policy reads an unknown charset or
    undecodable bytes itself."""

    def word(match: re.Match[str]) -> str:
        try:
            ((data, charset),) = decode_header(match[0])
            if not isinstance(data, bytes) or not charset:
                return match[0]
            # RFC 2231's language ("utf-7*en") is no part of the codec's name.
            text = data.decode(charset.partition("*")[0])
        except (ValueError, LookupError, HeaderParseError):  # UnicodeError among them
            return match[0]
        if _SURROGATE.search(text) is None:
            return match[0]
        held = _SURROGATE.sub("\ufffd", text).encode()
        return f"=?utf-8?b?{base64.b64encode(held).decode('ascii')}?="

    value = _ENCODED_WORD.sub(word, value)
    return _PARAMETER_CHARSET.sub(r"\1utf-8'", value) if parameters else value


class _HeaderClasses(HeaderRegistry):
    """The default registry, with each header class made once: the stock one builds a new
    class with ``type()`` on every header it parses."""

    def __init__(self) -> None:
        super().__init__()
        self._made: dict[str, type[BaseHeader]] = {}

    def __getitem__(self, name: str) -> type[BaseHeader]:
        made = self._made.get(name.lower())
        if made is None:
            made = self._made[name.lower()] = super().__getitem__(name)
        return made


_PARSED: dict[tuple[str, str], str] = {}
_PARSED_MAX: Final = 20_000
#: Only values up to this long are kept (the repeating MIME headers are far shorter).
_PARSED_VALUE_MAX: Final = 256
_HEADER_CLASSES: Final = _HeaderClasses()
_POLICY: Final = _SharedHeaderPolicy(header_factory=_HEADER_CLASSES)
_PARSER: Final = BytesParser(policy=_POLICY)
_MSGID = re.compile(r"<([^<>\s]+)>")


@attrs.frozen
class Malformed:
    reason: SkipReason


@attrs.frozen
class ParsedMessage:
    message_key: str
    account: str
    thread_id: str
    message_id: str
    date: _dt.datetime | None
    subject: str
    sender: tuple[MailAddress, ...]
    to: tuple[MailAddress, ...]
    cc: tuple[MailAddress, ...]
    reply_to: tuple[MailAddress, ...]
    direction: Literal["sent", "received"]
    headers: tuple[tuple[str, str], ...]
    text: str
    truncated: bool
    list_id: str | None
    list_unsubscribe: str | None
    list_unsubscribe_post: str | None
    auth_results: tuple[str, ...]


def _digest(*parts: str | bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode() if isinstance(part, str) else part)
        h.update(b"\0")
    return h.hexdigest()[:32]


#: Header fields a mail client rewrites in the mbox itself to keep its read, replied, flagged
#: and deleted marks there (mutt's Status and X-Status, Thunderbird's X-Mozilla-*, Evolution's
#: X-Evolution, Dovecot's and UW IMAP's X-UID, X-Keywords, X-IMAP, Content-Length and Lines):
#: reading a message in the client changes them, not the message. A line of such a field, and
#: its folded lines, each ended by a line feed: a bare CR ends no line here (a message whose
#: lines end in CR alone keeps every byte in its key, or one field would swallow it whole).
_CLIENT_STATE = re.compile(
    rb"^(?:status|x-status|x-mozilla-status2?|x-mozilla-keys|x-evolution|x-keywords|x-uid"
    rb"|x-imap(?:base)?|content-length|lines)[ \t]*:[^\r\n]*\n(?:[ \t][^\r\n]*\n)*",
    re.IGNORECASE | re.MULTILINE)


def message_key_for(account: str, raw: bytes) -> str:
    """Stable per (account, content): line endings and trailing newlines, which mbox and Maildir
    writers change freely, do not count, nor the header fields a mail client keeps its marks
    in (``_CLIENT_STATE``); anything else is another message."""
    return "m_" + _digest(account, _without_client_state(_normalized(raw))[0])


def message_keys(account: str, plain: bytes, *quoted: bytes) -> tuple[str, tuple[str, ...]]:
    """``plain``'s ``message_key_for``, and the keys earlier versions may have given it: its
    bytes with the client's mark fields counted, and for an mbox message whose ">From " lines
    were unquoted, its bytes before (``quoted``). A cache imported then holds it under one."""
    normalized = _normalized(plain)
    kept, marks = _without_client_state(normalized)
    formers = [f"m_{_digest(account, normalized)}"] if marks else []
    formers.extend(f"m_{_digest(account, _normalized(raw))}" for raw in quoted)
    return f"m_{_digest(account, kept)}", tuple(formers)


def _normalized(raw: bytes) -> bytes:
    return raw.replace(b"\r\n", b"\n").rstrip(b"\n")


def _without_client_state(raw: bytes) -> tuple[bytes, int]:
    """``raw`` (line endings normalized) without the fields of ``_CLIENT_STATE`` in its header
    section, which ends at its first empty line (or with the message); and how many went."""
    end = raw.find(b"\n\n")
    if end < 0:  # headers alone: the last field ends with the message
        head, count = _CLIENT_STATE.subn(b"", raw + b"\n")
        return (head.rstrip(b"\n"), count) if count else (raw, 0)
    head, count = _CLIENT_STATE.subn(b"", raw[:end + 1])
    return (head + raw[end + 1:], count) if count else (raw, 0)


def thread_id_for(account: str, root: str) -> str:
    return "t_" + _digest(account, root)


def _ids(value: str | None) -> list[str]:
    return _MSGID.findall(value) if value else []


def _safe(text: str) -> str:
    """Text SQLite and JSON can hold: raw 8-bit header bytes (which the parser keeps as lone
    surrogates) read as UTF-8 (RFC 6532), anything undecodable replaced."""
    if text.isascii():
        return text
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:  # a surrogate that was not an escaped byte
        return text.encode("utf-8", "replace").decode("utf-8")


def _first(fields: Fields, name: str) -> Any:
    """The first field called ``name`` as the policy parses it: what ``Message.get`` returns."""
    lower = name.lower()
    for key, value in fields:
        if key.lower() == lower:
            return _POLICY.header_fetch_parse(key, value)
    return None


def _addresses(fields: Fields, name: str) -> tuple[MailAddress, ...]:
    header = _first(fields, name)
    if header is None:
        return ()
    found: list[MailAddress] = []
    for addr in getattr(header, "addresses", ()):
        spec = _safe(addr.addr_spec.strip().lower())
        if spec and spec != "<>" and len(spec) <= MAX_ADDRESS_CHARS:
            found.append(MailAddress(name=_safe(addr.display_name or "")[:MAX_NAME_CHARS],
                                     address=spec))
            if len(found) >= MAX_ADDRESSES:
                break
    return tuple(found)


def _date(raw: str | None) -> _dt.datetime | None:
    if raw is None:
        return None
    try:
        parsed = email.utils.parsedate_to_datetime(raw)
        if parsed.tzinfo is None:  # "-0000": the zone is unknown; UTC is the stated reading
            parsed = parsed.replace(tzinfo=_dt.UTC)
        # Inside the try: a date at the edge of year 1 or 9999 overflows in UTC, and is then
        # no date, as a nonsense one is (the message is kept).
        return parsed.astimezone(_dt.UTC)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


class _HtmlText(HTMLParser):
    """Visible text of an HTML part: tags dropped, script and style skipped."""

    _BLOCK = frozenset({"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "blockquote"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style"):
            self._skip += 1
        elif tag in self._BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style") and self._skip:
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def _html_to_text(html: str) -> str:
    parser = _HtmlText()
    parser.feed(html)
    parser.close()
    lines = (" ".join(line.split()) for line in "".join(parser.parts).splitlines())
    return "\n".join(line for line in lines if line)


def _part_text(part: EmailMessage) -> str:
    try:
        content = part.get_content()
    except (LookupError, UnicodeError):
        # An unknown charset, or a codec that refuses to decode with replacement (idna,
        # undefined): the bytes, decoded as UTF-8 with replacement.
        payload = part.get_payload(decode=True)
        content = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else ""
    return content if isinstance(content, str) else ""


def _body(msg: EmailMessage) -> str:
    """The plain text: the text/plain alternative when there is one, else the HTML's text."""
    part = msg.get_body(preferencelist=("plain", "html"))
    if part is None:
        return ""
    text = _part_text(part)  # type: ignore[arg-type]  # get_body's stub says Message
    if part.get_content_subtype() == "html":
        text = _html_to_text(text)
    return _safe(text.replace("\r\n", "\n"))


_LINESEP = re.compile(r"\n|\r")


def _decoded(name: str, raw: str) -> str:
    """The header's value as ``policy.default`` reads it. A value with no encoded word and
    no non-ASCII byte decodes to itself, unfolded, and a plain unstructured one (a Subject)
    as ``words`` decodes it, so the header parser runs only for the values that need it (the
    parser is most of an import's time)."""
    raw = cut_raw(raw)
    if "=?" not in raw and raw.isascii():
        return "".join(_LINESEP.split(raw)).strip()
    if issubclass(_HEADER_CLASSES[name], UnstructuredHeader):
        decoded = decode_unstructured("".join(_LINESEP.split(raw)))
        if decoded is not None:
            return decoded
    return _safe(str(_POLICY.header_fetch_parse(name, raw)))


def _headers(fields: Fields) -> tuple[tuple[tuple[str, str], ...], dict[str, str], bool]:
    """(the bounded decoded headers, the first decoded value of each name (lower case),
    whether a header was cut)."""
    cut = len(fields) > MAX_HEADERS
    out: list[tuple[str, str]] = []
    first: dict[str, str] = {}
    for index, (name, raw) in enumerate(fields):
        text = _decoded(name, raw)
        first.setdefault(name.lower(), text)
        if index >= MAX_HEADERS:
            continue
        if len(text) > MAX_HEADER_CHARS:
            text, cut = text[:MAX_HEADER_CHARS], True
        out.append((name, text))
    return tuple(out), first, cut


def _auth_results(fields: Fields) -> tuple[str, ...]:
    """Each Authentication-Results value of the stored headers as the receiving server wrote
    it: unfolded, 8-bit text read as UTF-8, cut to MAX_AUTH_RESULTS_CHARS (``authres`` reads
    one that long as cut: no verdict). Never RFC 2047 decoded: RFC 8601 has no encoded words,
    and decoding one a sender put in a quoted ``smtp.mailfrom`` closed the quotes and wrote a
    ``dkim=pass`` of its own (D159)."""
    found: list[str] = []
    for name, raw in fields[:MAX_HEADERS]:
        if name.lower() == "authentication-results":
            # A character of the value is at most 4 raw ones (an escaped UTF-8 byte each), so
            # a value cut at 4 times the bound still reads the bound long once decoded.
            unfolded = raw.replace("\r", "").replace("\n", "").strip()
            found.append(_safe(unfolded[:4 * MAX_AUTH_RESULTS_CHARS])[:MAX_AUTH_RESULTS_CHARS])
    return tuple(found)


def _read(raw: bytes) -> tuple[Fields, EmailMessage]:
    """The message's raw header fields and the message its body is read from: ``split``'s
    reading, or the parser's when ``split`` leaves it to the parser (or fails: the parser's
    answer stands then)."""
    try:
        read = split(raw, _POLICY)
    except TooDeep:
        raise
    except Exception:
        read = None
    if read is not None:
        return read
    msg = _PARSER.parsebytes(raw)
    assert isinstance(msg, EmailMessage)
    if nesting(msg) > MAX_NESTING:
        raise TooDeep  # undecodable
    return list(msg.raw_items()), msg



def parse_message(account: str, raw: bytes, *,
                  key: str | None = None) -> ParsedMessage | Malformed:
    """``raw`` (one message, no mbox From_ line) as imported under ``account`` (lower-cased);
    ``key`` is its ``message_key_for``, when the caller has it already."""
    if len(raw) > MAX_MESSAGE_BYTES:
        return Malformed("too_large")
    try:
        fields, msg = _read(raw)
        if not fields:
            return Malformed("no_header_section")
        key = message_key_for(account, raw) if key is None else key
        headers, first, cut = _headers(fields)
        message_id = (_ids(first.get("message-id")) or [""])[0]
        root = ((_ids(first.get("references")) or _ids(first.get("in-reply-to"))
                 or [message_id])[0]) or key
        sender = _addresses(fields, "From")
        text = _body(msg)
        if len(text) > MAX_TEXT_CHARS:
            text, cut = text[:MAX_TEXT_CHARS], True
        return ParsedMessage(
            message_key=key,
            account=account,
            thread_id=thread_id_for(account, root),
            message_id=message_id,
            date=_date(first.get("date")),
            subject=first.get("subject", "")[:MAX_SUBJECT_CHARS],
            sender=sender,
            to=_addresses(fields, "To"),
            cc=_addresses(fields, "Cc"),
            reply_to=_addresses(fields, "Reply-To"),
            direction="sent" if any(a.address == account for a in sender) else "received",
            headers=headers,
            text=text,
            truncated=cut,
            list_id=first.get("list-id"),
            list_unsubscribe=first.get("list-unsubscribe"),
            list_unsubscribe_post=first.get("list-unsubscribe-post"),
            auth_results=_auth_results(fields),
        )
    except Exception:
        return Malformed("undecodable")
