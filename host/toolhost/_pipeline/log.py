"""Structured logging: one event per pipeline step, bound to the invocation and run ids.

Logs go to stderr (stdout is a transport for ``toolhost serve``), as JSON when stderr is not a
TTY. ``detail`` goes to logs, never into model-facing text. A processor redacts secrets: any key
ending in _API_KEY (or _TOKEN, _SECRET, _PASSWORD), any ``authorization``, ``cookie`` or
``signature`` key, the value of a ``(name, value)`` pair so named (a tuple, a list's list, a
list whose second item no field's or header's name is shaped like; not a list of names, such as
``['Authorization', 'Content-Type']``), the item after a secret's flag in a command line
(``['mysql', '--password', '...']``, curl's ``-u user:...``, attached too: ``-uuser:...``,
``--user=user:...``), any ``Secret`` value, however deeply nested, and credentials inside
strings and bytes: after an auth scheme (``Bearer``, ``Basic``, ``Token``; separated by a space,
a colon, ``%20`` or ``+``), as the whole value of an ``Authorization``, ``Cookie`` or
``Set-Cookie`` header (any scheme, also in a dict's repr), as the value of a secret-named header
or parameter (``x-api-key: ...``, ``?access_token=...``, ``OPENAI_API_KEY=...``,
``password: ...``, ``Signature=...``; URL-encoded too, once or twice: ``api_key%3D...``,
``%22password%22%3A%22...``, ``token%253D...``), a quoted value to its closing quote, a bytes
repr's too (``b'...'``), a JSON text's nested in a JSON string too (its quotes escaped, at any
depth), a header as a pair's repr (httpcore's ``[(b'set-cookie', b'...')]``) or with a list of
values (``{'Cookie': [...]}``), and bare, by a provider key's published shape (``sk-...``,
``ghp_...``, ``AKIA...``, ``ASIA...``). A name is a secret's in ``snake_case``, ``kebab-case``
and ``camelCase`` alike (``accessToken``, ``clientSecret``). Every value of a secret setting the
log was configured with (``configure_logging(secrets=...)``), wherever it appears, also as a
JSON string shows it (``SecretValues``). The same redaction, with its own marker, is what a
span's arguments get (``redact_value``).

Logging never decides a call's outcome: a line that cannot be rendered or written (stderr's
reader gone, a value the renderer rejects) is dropped and counted (``lost_lines``), and the
first one of a configuration is reported with one line, if that can be written. A process
started with no stderr at all (``2>&-``) logs to ``stderr()``'s stand-in, which drops and
counts every line.
"""

from __future__ import annotations

import io
import json as jsonlib
import re
import sys
import threading
from collections.abc import Collection, Iterable, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any, TextIO, cast

from toolhost._model.secrets import Secret
from toolhost._model.settings import is_secret_name, redact_url_password
from toolhost._ports.clock import Clock

if TYPE_CHECKING:
    from types import ModuleType

__all__ = ["REDACTED", "SecretValues", "apply_logging", "configure_logging", "get_logger",
           "logging_configured", "lost_lines", "redact_secrets", "redact_value", "secret_values",
           "stderr", "unfiltered_logger"]

REDACTED = "[redacted]"


class _Pattern:
    """A regular expression compiled when first used: compiling the five below was most of
    importing this module, which every command that opens the stores does, and most of them
    never redact a line."""

    __slots__ = ("_compiled", "_source")

    def __init__(self, source: str) -> None:
        self._source = source
        self._compiled: re.Pattern[str] | None = None

    def _pattern(self) -> re.Pattern[str]:
        if self._compiled is None:
            self._compiled = re.compile(self._source)
        return self._compiled

    def sub(self, replacement: Any, text: str) -> str:
        return self._pattern().sub(replacement, text)

    def fullmatch(self, text: str) -> bool:
        return self._pattern().fullmatch(text) is not None


#: Backslashes before a quote: its escape, in a JSON text nested in a JSON string
#: (``{"body": "{\"password\": \"...\"}"}``), at any depth (``\\\"``; a repr's ``\\"``).
_ESCAPES = r"\\*"
#: A backslash run that escapes no quote, which a bare value takes. One that does is left, with
#: its quote, so that a nested text is still the JSON it was.
_UNESCAPING = r"""\\++(?![\\"'])"""


def _run(excluded: str) -> str:
    """One or more characters outside ``excluded`` (a class's body), backslashes by
    ``_UNESCAPING``. Possessive: a stretch is taken whole, at the speed of a character class
    (the alternation per character was twice the scan)."""
    return rf"(?:[^{excluded}\\]++|{_UNESCAPING})+"


#: A credential after a scheme: RFC 6750's token68 characters.
_CHARACTER = r"[A-Za-z0-9._~+/=-]"
_CREDENTIAL = _CHARACTER + "+"
#: ``Bearer x``, ``Bearer: x``, ``Bearer=x``, and URL- or form-encoded: ``Bearer%20x``,
#: ``Bearer+x``. The credential runs to the next space, quote or separator, not only over
#: RFC 6750's characters: a malformed one (``Bearer tok!x``) is still somebody's secret.
_SCHEME = _Pattern(r"(?i)\b(bearer|basic)(\s*[:=]\s*|%20|\+|\s+)("
                   + _run(r"""\s"'&,;""") + ")")
#: A name that is the first of a quoted (name, value) pair: a tuple's (httpcore prints headers
#: as ``[(b'set-cookie', b'...')]``) or a list's that is a list's item (a header list in JSON:
#: ``[["Set-Cookie", "..."]]``), once escaped too, or a bytes one's (the wire's); or the first
#: of a list on its own (``alone``), a pair only when its second item is no name (``_WORD``):
#: ``['token', 'S3x']`` is a pair, ``['password', 'username']`` names two fields. Matched
#: empty, before the name, so that the separator takes the comma after it only there: a comma
#: after a secret name elsewhere is prose. The quote is looked at first (most words have none
#: before them), then the character before it.
_PAIR = (r"""(?:(?<=['"])(?<=[(\[bB\\].)(?:(?P<pair>""" + "|".join(
    rf"(?<={opens}{prefix}.)" for opens in (r"\(", r"[\[,]\[", r", \[")
    for prefix in ("", "[bB]", r"\\")) + r"|(?<=\[[bB].))|(?P<alone>(?<=\[.)|(?<=\[\\.)))|)")
#: What comes after the separator: a list of quoted values (``{'Cookie': ['sid=...']}``), or
#: a value's opening quote, a bytes repr's too (``b'...'``: botocore, urllib3 and requests
#: print headers so), remembered so that the value runs to its closing quote; its escape too.
_OPENING = (rf"""(?:(?P<list>\[)(?=\s*[bB]?{_ESCAPES}["'])"""
            r"""|[bB]?(?P<escaped>\\+)?(?:(?P<single>')|(?P<double>"))|)""")
#: A list's values to its closing bracket, each quoted one to its closing quote: the values
#: are all one header's (a cookie per item), so the marker replaces them all.
_LIST = r"""(?:[^'"\]\\\n]|\\.|'(?:[^'\\\n]|\\.)*'?|"(?:[^"\\\n]|\\.)*"?)+"""


def _quoted(quote: str) -> str:
    r"""A value opened by ``quote``, to its closing quote: past an escaped one (``\'``); when the
    opening quote was escaped itself (``\"``, a nested JSON text's), past a quote escaped more
    than it was (``\\\"``), the value's own. Never past the line's end."""
    escaped = rf"(?:[^{quote}\\\n]++|\\++(?=[^{quote}\\\n])|(?P=escaped)\\++{quote})+"
    return rf"(?(escaped){escaped}|(?:[^{quote}\\\n]|\\.)+)"


_SINGLE, _DOUBLE = _quoted("'"), _quoted('"')


def _value(bare: str) -> str:
    """The credential after ``_OPENING``: a list's values, a quoted one to its closing quote
    or the line's end (SigV4's ``Credential=..., Signature=...`` holds spaces), a ``bare`` one
    as given. Atomic: what follows (a pair's end) is looked for where it ends, never in it."""
    return rf"""((?>(?(list){_LIST}|(?(single){_SINGLE}|(?(double){_DOUBLE}|{bare})))))"""


#: A secret's name in text, a whole word (``max_tokens=5`` is not ``token=``): ``_NAMED``'s.
_SECRET_NAME = (r"""(?:[A-Za-z0-9_-]*(?:[_-]|(?-i:[a-z0-9](?=[A-Z]))))?"""
                r"""(?:api[_-]?key|token|secret|password|signature)""")
#: A field's or header's name as a list of names holds it: words joined by ``_`` or ``-``, a
#: lower-case one in ``camelCase`` too, a capitalised one Title-Case (``Content-Type``,
#: ``ETag``, ``TraceId``). Digits may end a lower-case word or an acronym (``password2``,
#: ``line_1``, ``Content-MD5``, ``X-B3-TraceId``), never a capitalised word (``Summer2024``, a
#: password's shape) nor come before a letter (``S3CRET``, ``a1b2``): those, a sign or a space
#: make a value. Each word starts with what no other can, and is taken possessively: one try.
_NAME_WORD = r"""(?:[a-z]++(?:[A-Z][a-z]*+)*+[0-9]*+|[A-Z]++(?:[a-z][A-Za-z]*+|[0-9]*+))"""
_WORD = rf"""(?-i:{_NAME_WORD}(?:[_-](?:{_NAME_WORD}|[0-9]++))*+)"""


def _named(start: str, name: str, bare: str, after: str = "") -> tuple[_Pattern, _Pattern]:
    """The pattern of a credential after ``name`` and ``:`` or ``=`` (a dict's repr, a header,
    a parameter), and the same also after a pair's comma (``_PAIR``): that one is used only
    on a line that holds a quote and a comma (``_redact_text``), since looking behind every
    word made each pattern about 8% slower on an ordinary line."""
    separator = rf"""(?:{_ESCAPES}["'])?\s*[:=]\s*"""
    # A pair's value is quoted as its name is (``_PAIR``: one escaping level at most). Deeper
    # ones would let each pair's value run past every later, more escaped one (``_quoted``),
    # and the unclosed ones rescan the line's rest: L**1.5. A second item that is a secret's
    # name makes two names (``('api_key', 'secret')``), and so does a word in a list alone.
    named = rf"""[bB]?\\?["'](?:{_SECRET_NAME}|(?(alone){_WORD}|(?!)))\\?["']"""
    paired = (rf"""(?:{separator}|(?(pair)|(?(alone)|(?!)))(?P<comma>{_ESCAPES}["'],\s*"""
              rf"""(?=[bB]?\\?["'\[]))(?!{named})(?(alone)(?![bB]?\\?\[)|))""")
    # A pair's quoted value is its last item: a tuple of three names is not a pair either. A
    # list is not checked (its own ``]`` passed anyway): one never closed failed only after
    # running to the line's end, so ``["password", `` repeated rescanned the rest from each
    # name (quadratic).
    closed = rf"""(?(comma)(?(list)|(?={_ESCAPES}["']?\]?\s*[)\]])))"""

    def source(pair: str, between: str, end: str = "") -> str:
        return rf"""{start}{pair}({name})({between}{_OPENING}{after}){_value(bare)}{end}"""

    return _Pattern(source("", separator)), _Pattern(source(_PAIR, paired, closed))


#: The credential of an ``Authorization`` header, whatever its scheme (``Token x``, a scheme
#: of a provider's own, none), also as a dict's repr shows it: ``'Authorization': '...'``.
#: The scheme stays, for the reader of the log. A ``Cookie``/``Set-Cookie`` header's value is
#: all credential (a session): no scheme, and a bare one runs over its ``; name=value`` pairs.
#: The first letters' lookahead lets the engine skip ahead to them: without it the two names
#: are tried at every word of a line (nearly twice the scan).
_QUOTES = r"""\s"'"""
_COOKIE = _QUOTES + ";"
_AUTHORIZATION, _PAIRED_AUTHORIZATION = _named(
    r"""(?i)(?=[apsc])(?<![A-Za-z0-9_-])""",
    r"""(?:proxy-)?authorization|(?P<cookie>(?:set-)?cookie)""",
    rf"""(?(cookie){_run(_COOKIE)}(?:;\s*{_run(_COOKIE)})*|{_run(_QUOTES)})""",
    after=r"""(?(cookie)|(?:[A-Za-z][A-Za-z0-9_-]*(?::\s*|%20|\+|\s+)(?=[^\s"']))?)""")
#: Provider keys by their published shapes, wherever they appear, named or not: OpenAI's and
#: Anthropic's ``sk-...``, GitHub's ``ghp_...``/``github_pat_...``, Slack's ``xoxb-...``,
#: AWS access key ids (``AKIA...``, and a session's temporary ``ASIA...``), Google API keys.
_KEY_SHAPES = _Pattern(
    r"\b(?:sk-[A-Za-z0-9_-]{20,}|(?:gh[pousr]_|github_pat_)[A-Za-z0-9_]{20,}"
    r"|xox[abprs]-[A-Za-z0-9-]{10,}|A[KS]IA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{35})")
#: ``Token x`` (GitHub's and Django REST framework's scheme). "token" is also this host's
#: everyday word ("Token limit exceeded"), so after a plain space only a credential-shaped
#: word goes: one with a digit or one of ``_./+=~``, or 24 characters or more. With a colon
#: or ``=`` it is a named value, below, and goes whatever it is.
_TOKEN_SCHEME = _Pattern(
    rf"(?i)\b(token)(%20|\+|\s+)((?=[A-Za-z-]*[0-9_./+=~]){_CREDENTIAL}|{_CHARACTER}{{24,}})"
)
#: The value of a secret-named header, parameter or setting in a string: ``x-api-key: x``,
#: ``?access_token=x``, ``&client_secret=x``, ``OPENAI_API_KEY=x``, ``"api_key": "x"``,
#: ``password: x``, and a request's signature (SigV4's ``Signature=...``, botocore's
#: ``Signature:\n...``, ``X-Amz-Signature=...``): each replays the request it signs.
_NAMED, _PAIRED_NAMED = _named(
    r"""(?i)(?<![A-Za-z0-9_-])""", _SECRET_NAME, _run(_QUOTES + "&#,;"))
#: A command line's flag naming a secret, an item of an argv list or tuple of any length
#: (``['mysql', '--password', 'x', '-v']``), and curl's ``-u``/``--user``/``--proxy-user``
#: followed by a ``user:password``: the next item, quoted as it is, is the secret, unless it
#: is a flag or a secret's name itself. Run only on lines with a quote before a dash.
_FLAG = _Pattern(
    r"""(?i)(?=-)(?<=['"])(?:(?<=[\[(,\s].)|(?<=[\[(,\s][bB\\].))"""
    rf"""({_SECRET_NAME}|(?P<user>-u|--(?:proxy-)?user))"""
    rf"""({_ESCAPES}["'],\s*(?![bB]?\\?["'](?:-|{_SECRET_NAME}\\?["']))"""
    r"""(?(user)(?=[bB]?\\?["'][^"'\\\n:]*:)|(?=[bB]?\\?["']))"""
    rf"""{_OPENING}){_value("(?!)")}""")
#: curl's ``user:password`` attached to its flag, an argv item (``-ualice:x``, ``-Ualice:x``,
#: ``--user=alice:x``, ``--proxy-user=alice:x``): a text that is the item (a list's, redacted
#: item by item), or one quoted after ``[``, ``(``, a comma or a space (a list's repr or JSON,
#: bytes, escaped once). The flag stays and the rest goes, as ``_FLAG`` hides a separate one.
_ATTACHED_USER = _Pattern(
    r"""(?i)(?=-)(?:^|(?<=[\[(,\s]["'])|(?<=[\[(,\s][bB\\]["']))"""
    r"""(?:(?<=(?P<escaped>\\)["'])|)(?:(?<=(?P<single>'))|(?<=(?P<double>"))|)"""
    r"""(-u|--(?:proxy-)?user=)(?=[^\s"'\\:][^"'\\\n:]*:)"""
    rf"""((?>(?(single){_SINGLE}|(?(double){_DOUBLE}|.+))))""")
#: The same, URL-encoded (a form body's JSON, ``payload=%7B%22token%22%3A%22x%22%7D``; a
#: redirect's nested ``next=%2Fcb%3Faccess_token%3Dx``): the name also after an encoded
#: character, ``%3A`` or ``%3D`` its separator, encoded quotes around it, and the value to the
#: next encoded quote, ``&``, ``#``, comma or semicolon (an encoded space is the value's).
#: Encoded twice too (a URL in another's query: ``%253D``, ``%2522``): a value whose separator
#: was (``twice``) also ends at a twice-encoded quote or separator, which in a once-encoded
#: value is a literal ``%`` and its own.
_ENCODED = r"%(?:25)?"
_ENCODED_NAMED = _Pattern(
    rf"""(?i)(?:(?<![A-Za-z0-9_-])|(?<=%[0-9A-F]{{2}})|(?<=%25[0-9A-F]{{2}}))({_SECRET_NAME})"""
    rf"""((?:{_ENCODED}2[27])?(?:{_ENCODED}20|\+)*%(?P<twice>25)?3[AD]"""
    rf"""(?:{_ENCODED}20|\+)*(?:{_ENCODED}2[27])?)"""
    rf"""((?:[^\s"'&#,;%\\]++|%(?(twice)(?!(?:25)?(?:2[2367C]|3B))|(?!2[2367C]|3B))"""
    rf"""|{_UNESCAPING})+)""")
#: Where a camelCase name's words meet: ``accessToken`` is ``access_Token``, ``APIKey``
#: ``API_Key``.
_CAMEL = _Pattern(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
#: The containers rebuilt as their own type; any other (a namedtuple's constructor takes
#: fields, not an iterable) becomes a list, as JSON shows it anyway.
_REBUILT = (list, tuple, set, frozenset)


#: Names that are a secret's whatever ``is_secret_name`` says: headers' and parameters'.
_SECRET_KEYS = frozenset({"authorization", "proxy-authorization", "x-api-key", "api_key",
                          "apikey", "cookie", "set-cookie"})


def _is_secret_key(key: str) -> bool:
    lowered = key.lower()
    return (is_secret_name(key)
            or lowered in _SECRET_KEYS
            or ("signature" in lowered and _names_a_signature(key))  # `in`: cheapest, first
            or (not key.islower() and not key.isupper()
                and is_secret_name(_CAMEL.sub("_", key))))


def _names_a_signature(key: str) -> bool:
    """Whether ``key``'s last word is "signature" (``Signature``, ``x-amz-signature``,
    ``requestSignature``; not ``xsignature``): a request's signature replays it, as the text
    rule (``_NAMED``) says. Only the last word and what precedes it are looked at."""
    end = _CAMEL.sub("_", key[-10:]).replace("-", "_")
    return end.lower().rsplit("_", 1)[-1] == "signature"


def _as_text(value: object) -> str | None:
    """``value`` as text if it is text or bytes (read as their repr shows them), else None."""
    return value.decode("latin-1") if isinstance(value, bytes) else (
        value if isinstance(value, str) else None)


def _names_secret(name: object) -> bool:
    """Whether ``name``, a mapping's key or a pair's first item, text or bytes, names a
    secret."""
    text = _as_text(name)
    return text is not None and _is_secret_key(text)


#: ``_WORD`` and ``_SECRET_NAME``, for a list's item: what the text rules read as a name.
_A_WORD, _A_SECRET_NAME = _Pattern(_WORD), _Pattern("(?i)" + _SECRET_NAME)
#: The types of item no flag is (``_secret_items``).
_NO_FLAG = frozenset({int, float, bool, type(None), dict, list, tuple})
#: curl's flags of a ``user:password`` (``-U`` is ``--proxy-user``), as ``_FLAG`` reads them.
_USER_FLAGS = frozenset({"-u", "--user", "--proxy-user"})


def secret_values(env: Mapping[str, str]) -> list[str]:
    """The values of the settings in ``env`` named like a secret's (``is_secret_name``)."""
    return [v.strip() for k, v in env.items() if is_secret_name(k) and v.strip()]


class SecretValues:
    """Known secrets (a secret setting's values), replaced wherever they appear in a text: as
    written and as a JSON string shows them (a JSON text inside a line: an MCP frame a library
    logged), longest first, so that a secret holding another is hidden whole. One that is
    shorter than ``shortest`` characters is left: a ``1`` or ``on`` would hide every such
    word, and in a log line a ``2026`` or a ``none`` every date and every absent value."""

    __slots__ = ("_forms",)

    def __init__(self, values: Iterable[str] = (), shortest: int = 4) -> None:
        forms = {form for value in values if len(value) >= shortest
                 for form in (value, jsonlib.dumps(value, ensure_ascii=False)[1:-1])}
        self._forms = sorted(forms, key=len, reverse=True)

    def redact(self, text: str, marker: str) -> str:
        # One scan of the text each (str.replace's): linear in it, whatever it holds.
        for form in self._forms:
            text = text.replace(form, marker)
        return text


#: The shortest secret setting's value a log line loses wherever it stands (D562): the names
#: and patterns still hide a shorter one where it is a setting's or a parameter's value.
LOGGED_SECRET_SHORTEST = 8
#: The secret settings' values of the log's configuration (``configure_logging``).
_known = SecretValues()


def redact_value(value: Any, marker: str = REDACTED) -> Any:
    """``value`` with every secret in it replaced by ``marker``, however deeply nested: what a
    log line and a span's arguments show of it."""
    return _redacted(value, marker, False)


def _secret_items(value: list[Any] | tuple[Any, ...], item: bool) -> Collection[int]:
    """The positions of ``value``'s items that are secrets: a pair's second (``_is_pair``), or
    in a command line (argv, of any length) the item after a flag naming a secret
    (``--password``) or after curl's ``-u`` when it holds a ``user:password`` (``_FLAG``)."""
    if len(value) == 2 and _is_pair(value, item):
        return (1,)
    # Every list logged is asked: one of numbers or containers only is passed over at C speed,
    # and in others the dash is looked for inline (a call an item was +40% of their cost).
    if _NO_FLAG.issuperset(map(type, value)):
        return ()
    flags = [position for position, flag in enumerate(value[:-1], 1)
             if (flag[:1] == "-" if isinstance(flag, str)
                 else isinstance(flag, bytes) and flag[:1] == b"-")]
    return frozenset(position for position in flags  # a set: each item asks it
                     if _flags_a_secret(value[position - 1], value[position])) if flags else ()


def _is_pair(value: list[Any] | tuple[Any, ...], item: bool) -> bool:
    """Whether ``value``, a list's or a tuple's ``item`` or not, is a (name, value) pair whose
    name is a secret's and whose value is not: a tuple (httpx's and httpcore's headers, a
    mapping's items), a list that is an item (a header list in JSON, ``[["Cookie", "..."]]``)
    or a bytes name (the wire's); a list on its own when its second item is text and no name
    (``_WORD``): ``["token", "S3x"]`` is a pair, ``fields=["password", "username"]`` and
    ``["Authorization", "Content-Type"]`` are names."""
    name, second = value
    text = _as_text(second)
    if not _names_secret(name) or (text is not None and _A_SECRET_NAME.fullmatch(text)):
        return False  # ("api_key", "secret"): two names
    return (item or isinstance(value, tuple) or isinstance(name, bytes)
            or (text is not None and not _A_WORD.fullmatch(text)))


def _flags_a_secret(flag: object, following: object) -> bool:
    """Whether ``flag``, an argv item starting with a dash, names a secret whose value is
    ``following``."""
    flag, following = _as_text(flag) or "", _as_text(following)
    if following is None or following.startswith("-"):
        return False
    # The flag first: most (``-m``, ``--log-level``) name no secret, and the value is not read.
    if flag.lower() in _USER_FLAGS:
        return ":" in following  # a ``user:password``: no name holds a colon
    return _is_secret_key(flag) and not _A_SECRET_NAME.fullmatch(following)


def _redacted(value: Any, marker: str, item: bool) -> Any:
    """``redact_value``'s, ``item`` saying whether ``value`` is a collection's item."""
    if isinstance(value, Secret):
        return marker
    if isinstance(value, Mapping):
        return {k: marker if _names_secret(k) else _redacted(v, marker, False)
                for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        secret = _secret_items(value, item) if isinstance(value, (list, tuple)) else ()
        items = ([marker if position in secret else _redacted(v, marker, True)
                  for position, v in enumerate(value)] if secret
                 else [_redacted(v, marker, True) for v in value])
        kind = type(value)
        if kind not in _REBUILT:
            return items
        try:
            return kind(items)
        except TypeError:  # a set of namedtuples: their lists cannot be members
            return items
    if isinstance(value, str):
        return _redact_text(value, marker)
    if isinstance(value, bytes):  # shown as its repr, which the patterns read as text does
        text = value.decode("latin-1")
        redacted = _redact_text(text, marker)
        return value if redacted == text else redacted.encode("latin-1", "replace")
    return value


def _redact_text(text: str, marker: str = REDACTED) -> str:
    """The string with each credential replaced; the scheme or name and separator stay. A
    connection string's first (a conninfo's quoted ``password='a b'`` is one value, which
    the line-oriented patterns below would cut at its first space)."""
    text = _known.redact(text, marker)  # whole values first, before a pattern cuts into one
    if "://" in text or "=" in text:
        text = redact_url_password(text)
    paired = "'," in text or '",' in text  # a pair's name ends so (``_named``)
    patterns = [(_PAIRED_AUTHORIZATION if paired else _AUTHORIZATION), _SCHEME,
                _TOKEN_SCHEME, (_PAIRED_NAMED if paired else _NAMED)]
    if paired and ("'-" in text or '"-' in text):  # an argv's flag item (``_FLAG``)
        patterns.append(_FLAG)
    if ("-u" in text or "-U" in text) and ":" in text:  # curl's attached user
        patterns.append(_ATTACHED_USER)
    # An encoded separator (%3A, %3D; twice, %253A): rare, so other lines skip the pattern.
    if "%3" in text or "%253" in text:
        patterns.append(_ENCODED_NAMED)
    for pattern in patterns:
        text = pattern.sub(lambda m: _kept(m) + marker, text)
    return _KEY_SHAPES.sub(marker, text)


def _kept(match: re.Match[str]) -> str:
    """What a match keeps: all before its credential, which each pattern's last group is."""
    return match.string[match.start():match.start(match.re.groups)]


def redact_secrets(
    logger: Any, method_name: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """structlog processor: secrets never reach a log line, however deeply nested. The line's
    own stamps (its time and level) are the host's, never a secret's (D562)."""
    return {k: v if k in _OWN_STAMPS else REDACTED if _is_secret_key(k) else redact_value(v)
            for k, v in event_dict.items()}


#: What ``redact_secrets`` leaves as the host wrote it.
_OWN_STAMPS = frozenset({"timestamp", "level"})


def _clock_timestamper(clock: Clock) -> Any:
    # Timestamps come from the injected Clock, so logs under a fixed clock are byte-stable.
    def add_timestamp(
        logger: Any, method_name: str, event_dict: MutableMapping[str, Any]
    ) -> MutableMapping[str, Any]:
        event_dict["timestamp"] = clock.now().isoformat(timespec="microseconds")
        return event_dict

    return add_timestamp


#: The standard library's level names and numbers (``logging.getLevelNamesMapping()``),
#: stated here so that configuring the log imports neither logging nor structlog; a test
#: keeps them equal.
_LEVEL_NUMBERS = {"CRITICAL": 50, "FATAL": 50, "ERROR": 40, "WARN": 30, "WARNING": 30,
                  "INFO": 20, "DEBUG": 10, "NOTSET": 0}

#: What structlog's dev module imports at its own import when it happens to be installed, for
#: colours and tracebacks toolhost's renderers never use (rich alone is +50-80 ms of a start).
_OPTIONAL = ("rich", "colorama", "better_exceptions")


class _Configuration:
    """What ``configure_logging`` was asked for, applied to structlog when it is imported."""

    __slots__ = ("clock", "json", "level", "stream")

    def __init__(self, clock: Clock, level: int, stream: TextIO, json: bool) -> None:
        self.clock, self.level, self.stream, self.json = clock, level, stream, json

    def apply(self, structlog: ModuleType) -> None:
        renderer: Any = (
            structlog.processors.JSONRenderer(sort_keys=True)
            if self.json
            # The plain traceback named, not structlog's default: that one is rich's when
            # rich is installed, and the output would depend on what else is installed.
            else structlog.dev.ConsoleRenderer(
                colors=False, exception_formatter=structlog.dev.plain_traceback)
        )
        global _reported, _report_to
        with _lost_lock:
            _reported, _report_to = False, self
        structlog.configure(
            processors=[
                structlog.contextvars.merge_contextvars,
                structlog.processors.add_log_level,
                _clock_timestamper(self.clock),
                redact_secrets,
                renderer,
            ],
            wrapper_class=_unfailing(structlog, self.level),
            logger_factory=structlog.PrintLoggerFactory(file=self.stream),
            cache_logger_on_first_use=False,
        )


# ---------------------------------------------------------------------- a line that is lost

#: Log lines dropped because they could not be rendered or written, in this process.
_lost = 0
#: Whether this configuration's first lost line was reported, and where to.
_reported = False
_report_to: _Configuration | None = None
_lost_lock = threading.Lock()
#: The level-filtering logger classes, each with ``_proxy_to_logger`` made unfailing.
_UNFAILING: dict[int, type] = {}


def lost_lines() -> int:
    """How many log lines this process dropped because they could not be rendered or
    written."""
    return _lost


class _NoStderr(io.TextIOBase):
    """What stands for stderr in a process started with descriptor 2 closed (``2>&-``, as a
    supervisor or cron may start one), where Python leaves ``sys.stderr`` None: no terminal,
    and each line written to it, a log line or a command's one-line message, dropped and
    counted in ``lost_lines``. None itself failed the first ``isatty`` or ``write``, ending the
    command before its call ran, and ``print(file=None)`` writes to stdout, the MCP transport."""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        global _lost
        if lines := text.count("\n"):  # print() writes the line and its newline apart
            with _lost_lock:
                _lost += lines
        return len(text)


_NO_STDERR = _NoStderr()


def stderr() -> TextIO:
    """``sys.stderr``, or when the process has none the stand-in that drops and counts what is
    written to it (``_NoStderr``)."""
    return sys.stderr if sys.stderr is not None else cast(TextIO, _NO_STDERR)


def _unfailing(structlog: ModuleType, level: int) -> type:
    """structlog's filtering logger at ``level`` whose lines never raise into the caller: a
    log line is for the operator and must not decide a call's outcome (D17)."""
    made = _UNFAILING.get(level)
    if made is None:
        base: Any = structlog.make_filtering_bound_logger(level)

        class Unfailing(base):  # type: ignore[misc]
            def _proxy_to_logger(self, method_name: str, event: str | None = None,
                                 **event_kw: Any) -> Any:
                try:
                    return super()._proxy_to_logger(method_name, event, **event_kw)
                except Exception as exc:  # the processors, the renderer, or the write
                    _lose(exc, event)
                    return None

        Unfailing.__name__ = Unfailing.__qualname__ = f"Unfailing{base.__name__}"
        made = _UNFAILING[level] = Unfailing
    return made


def _lose(exc: Exception, event: str | None) -> None:
    """Count a dropped line; the first of a configuration is reported with one line, unless
    the stream itself is what failed (then that line is lost as well, and only counted)."""
    global _lost, _reported
    with _lost_lock:
        _lost += 1
        if _reported:
            return
        _reported, configuration = True, _report_to
    if configuration is None:
        return
    try:
        what = {"event": "log.line_lost", "level": "error", "exception": type(exc).__name__,
                "lost_event": _redact_text(event) if isinstance(event, str) else None}
        line = (jsonlib.dumps(what, sort_keys=True) if configuration.json else
                f"toolhost: a log line ({what['lost_event']}) could not be written "
                f"({what['exception']}); later ones are dropped and counted")
        configuration.stream.write(line + "\n")
        configuration.stream.flush()
    except Exception:
        pass  # nowhere left to say it


#: ``configure_logging``'s configuration while structlog is not imported: a command that
#: logs nothing at its level (most one-shot commands) never imports structlog.
_pending: _Configuration | None = None
#: structlog, once ``_import_structlog`` has it.
_structlog: ModuleType | None = None


def configure_logging(
    clock: Clock, *, level: str = "info", stream: TextIO | None = None, json: bool | None = None,
    secrets: Iterable[str] = (),
) -> None:
    """Configure structlog once for the process. ``json`` defaults to "stderr is not a TTY";
    ``secrets``: the secret settings' values (``secret_values``), hidden in every line.

    Applied at once when structlog is imported already, else when the first event at the
    level (or ``apply_logging``) needs it; a configuration structlog was given meanwhile by
    someone else is newer, and is kept."""
    from toolhost._model.settings import LOG_LEVELS, SettingError

    global _pending, _known
    number = _LEVEL_NUMBERS.get(level.strip().upper())
    if number is None:  # one line for the operator, not a KeyError
        raise SettingError(f"{level!r} is not a log level: use one of {', '.join(LOG_LEVELS)}")
    _known = SecretValues(secrets, shortest=LOGGED_SECRET_SHORTEST)
    stream = stream if stream is not None else stderr()
    configuration = _Configuration(clock, number, stream,
                                   json if json is not None else not stream.isatty())
    if "structlog" in sys.modules:
        _pending = None
        configuration.apply(_import_structlog())
    else:
        _pending = configuration


def logging_configured() -> bool:
    """Whether structlog is configured, or ``configure_logging``'s configuration waits for it."""
    structlog = sys.modules.get("structlog")
    return _pending is not None or (structlog is not None and structlog.is_configured())


def apply_logging() -> ModuleType:
    """structlog, imported, with ``configure_logging``'s configuration applied if it waits (a
    server applies it at its start: a library it loads may log through structlog too)."""
    global _pending
    structlog = _import_structlog()
    pending, _pending = _pending, None
    # Configured since by someone else (a test's, an application's own): theirs is newer.
    if pending is not None and not structlog.is_configured():
        pending.apply(structlog)
    return structlog


def _import_structlog() -> ModuleType:
    """structlog, imported without the optional libraries its dev module picks up when they
    are installed (``_OPTIONAL``): each is marked "not installed" (None in ``sys.modules``, the
    import system's own marker) for the length of the import only. An application that
    imported structlog before toolhost did keeps its own."""
    global _structlog
    if _structlog is None:
        if "structlog" not in sys.modules:
            absent = [name for name in _OPTIONAL if name not in sys.modules]
            for name in absent:
                sys.modules[name] = None  # type: ignore[assignment]
            try:
                import structlog
            finally:
                for name in absent:
                    if name in sys.modules and sys.modules[name] is None:
                        del sys.modules[name]
        import structlog

        _structlog = structlog
    return _structlog


def unfiltered_logger() -> Any:
    """A logger with the configured processors and stream and no level filter: for what no
    level may hide (a loosened policy)."""
    structlog = apply_logging()
    return structlog.wrap_logger(
        None, wrapper_class=_unfailing(structlog, 0), logger_name="toolhost")


def get_logger(**bound: Any) -> Any:
    return _Deferred(bound)


#: The level of each logging method a filtering logger may drop.
_LEVEL_OF = {"debug": 10, "info": 20, "warning": 30, "warn": 30, "error": 40,
             "exception": 40, "critical": 50, "fatal": 50}


def _dropped(*args: Any, **kwargs: Any) -> None:
    return None


class _Deferred:
    """A logger bound on first use at a level the configuration lets through: the pipeline
    gets one per call and mostly logs below the level, so binding up front (~5 µs) is waste."""

    __slots__ = ("_bound", "_logger")

    def __init__(self, bound: dict[str, Any]) -> None:
        self._bound = bound
        self._logger: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._logger is None:
            level = _LEVEL_OF.get(name)
            # Below a configuration still waiting: dropped without importing structlog.
            pending = _pending
            if level is not None and pending is not None and level < pending.level:
                return _dropped
            structlog = (apply_logging() if pending is not None or _structlog is None
                         else _structlog)
            # Read at each call, not at binding: configure_logging may change it meanwhile.
            wrapper = structlog.get_config()["wrapper_class"]
            enabled = getattr(wrapper, "is_enabled_for", None)
            if level is not None and enabled is not None and not enabled(wrapper, level):
                return _dropped
            self._logger = structlog.get_logger("toolhost").bind(**self._bound)
        return getattr(self._logger, name)

    # The two levels the pipeline writes about ten lines a call at, as methods of their own:
    # found on the class, they skip the failed attribute lookup that reaches ``__getattr__``
    # (~0.4 µs a line), and a line below a configuration still waiting is dropped here. Any
    # other case asks ``__getattr__`` as before, at each line (the level may change between).

    def debug(self, *args: Any, **kwargs: Any) -> Any:
        if self._logger is None:
            pending = _pending
            if pending is not None and pending.level > _DEBUG:
                return None
        return self.__getattr__("debug")(*args, **kwargs)

    def info(self, *args: Any, **kwargs: Any) -> Any:
        if self._logger is None:
            pending = _pending
            if pending is not None and pending.level > _INFO:
                return None
        return self.__getattr__("info")(*args, **kwargs)


_DEBUG, _INFO = _LEVEL_OF["debug"], _LEVEL_OF["info"]
