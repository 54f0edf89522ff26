"""The one place that checks and compiles JSON schemas.

Schemas compile once, at registration, with fastjsonschema. fastjsonschema implements drafts
4, 6 and 7, not 2020-12, so a schema may name draft-07 or 2020-12 as its ``$schema`` but may not
use a keyword whose meaning differs between the two (``prefixItems``, array-form ``items``,
``$dynamicRef``, ``unevaluated*``, a validation keyword beside a ``$ref`` ...): a closed schema
then means the same under either. A ``$ref`` resolves as fastjsonschema resolves it, and only
to a subschema step 5 checked as a value's schema.
"""

from __future__ import annotations

import copy
import functools
import re
import unicodedata
from collections.abc import Callable, Iterator, Mapping
from types import CodeType
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

from toolhost._model.digest import canonical_text
from toolhost._model.errors import ToolhostError
from toolhost._model.printable import SHOWS_NOTHING, escaped, prints
from toolhost._model.typed_schema import has_utf8, not_json_number

if TYPE_CHECKING:
    from toolhost._registration.validator_cache import ValidatorCache

__all__ = [
    "ITEMS",
    "MAX_SCHEMA_DEPTH",
    "PRINTABLE_REMEDY",
    "SUPPORTED_DIALECTS",
    "IntegerPosition",
    "SchemaProblem",
    "Validator",
    "closed",
    "compile_schema",
    "defaults_below_top",
    "integer_positions",
    "is_json",
    "not_json_at",
    "not_printable",
    "not_text",
    "schema_problems",
    "subschema_at",
]

Validator = Callable[[Any], Any]

SUPPORTED_DIALECTS = frozenset(
    {
        "http://json-schema.org/draft-07/schema#",
        "http://json-schema.org/draft-07/schema",
        "https://json-schema.org/draft/2020-12/schema",
    }
)

# Keywords that do not exist in draft-07 or mean something else there than in 2020-12.
_DIALECT_SENSITIVE = frozenset(
    {
        "prefixItems",
        "additionalItems",
        "$dynamicRef",
        "$dynamicAnchor",
        "$recursiveRef",
        "$recursiveAnchor",
        "unevaluatedProperties",
        "unevaluatedItems",
        "dependentRequired",
        "$vocabulary",
        # Not in draft-07, so fastjsonschema ignores them: a count no call is held to (D537).
        "minContains",
        "maxContains",
        # An annotation under 2020-12 too, but it reads as a constraint on the decoded content,
        # and its subschema is one step 5 never walks (D537).
        "contentSchema",
    }
)

# Keywords that admit members or items the schema never names, so a schema using them is not
# closed however its object levels are written.
_OPENING = {
    "patternProperties": "patternProperties admits any name matching the pattern; name each "
    "property under properties",
    "dependencies": "dependencies adds rules only when some property is present; name every "
    "property under properties",
    "dependentSchemas": "dependentSchemas adds rules only when some property is present; name "
    "every property under properties",
}

# What makes a subschema say something about its value. A subschema with none of these (``{}``,
# only a description, or only ``not``, which still admits every other value, open objects
# included) accepts any value at all. A union constrains only with branches, each checked.
# ``$ref`` constrains only through its target (``_constrains``); ``properties`` not at all: it
# says nothing of a value that is not an object (an array, a string pass it whole).
_CONSTRAINING = frozenset({"type", "enum", "const"})
_UNIONS = ("allOf", "anyOf", "oneOf")

# Where a subschema describes a value of its own, and so must constrain it, with what to give
# a type in the refusal. Under ``not``, ``if``, ``then``, ``else``, ``contains`` and
# ``propertyNames`` a subschema only narrows a value described elsewhere, so it may be as broad
# as it likes (``true`` included), and so may its union branches. So may a union branch whose
# parent constrains its value itself (``{"type": "string", "anyOf": [{"format": "date"}, ...]}``,
# an object's ``oneOf`` of ``required`` lists), or only narrows: whichever branches match, the
# value still meets the parent's own keywords (D350). A branch's own object levels, properties,
# items and definitions are checked as anywhere else.
_NARROWS = ("not", "if", "then", "else", "contains", "propertyNames")
_DESCRIBES = {
    "properties": "the property",
    "items": "the items",
    "additionalProperties": "the additional properties",
    "allOf": "the branch",
    "anyOf": "the branch",
    "oneOf": "the branch",
    "$defs": "the definition",
    "definitions": "the definition",
}

# Keywords fastjsonschema (draft-07) applies to a value, every one of which it skips beside a
# ``$ref`` ("a $ref replaces its siblings"), while 2020-12, the dialect a client and the model
# read the schema by, applies them: each shows a constraint no call is held to. ``default``
# has a line of its own; annotations (``description``, ``title``, ``examples``) and
# ``$defs`` mean the same beside a ``$ref`` under either.
_SKIPPED_BESIDE_REF = frozenset({
    "additionalProperties", "allOf", "anyOf", "const", "contains", "contentEncoding",
    "contentMediaType", "dependencies", "enum", "exclusiveMaximum", "exclusiveMinimum",
    "format", "if", "items", "maxItems", "maxLength", "maxProperties", "maximum", "minItems",
    "minLength", "minProperties", "minimum", "multipleOf", "not", "oneOf", "pattern",
    "patternProperties", "properties", "propertyNames", "required", "type", "uniqueItems",
})

#: A schema's prose, held to a tool description's rule.
_ANNOTATIONS = ("title", "description")

#: Subschemas nested deeper than this are refused before fastjsonschema generates code: its
#: generator recurses once a level, and the code it generates nests an indented block or more
#: a level, which Python refuses to compile past a few dozen (D353). A ``$ref`` to a ``$defs``
#: entry starts a function of its own, so it does not add to the depth.
MAX_SCHEMA_DEPTH = 32

# Keywords whose value is one subschema / a map of subschemas / a list of subschemas.
_ONE = ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames")
_MAP = ("properties", "patternProperties", "$defs", "definitions")
_LIST = ("allOf", "anyOf", "oneOf")


class SchemaProblem(ToolhostError, ValueError):
    """Why a schema cannot be registered. ``pointer`` is a JSON pointer into the schema;
    ``remedy``, what to change, where closing the schema is not it."""

    def __init__(self, pointer: str, problem: str, remedy: str | None = None) -> None:
        super().__init__(f"{pointer or '/'}: {problem}")
        self.pointer = pointer
        self.problem = problem
        self.remedy = remedy


#: What a description or a title may not hold (D531, D535): controls (LF aside: it separates
#: paragraphs), format characters (direction marks, zero-width ones, tags), line and paragraph
#: separators, surrogates and private use. Not all ``isprintable`` refuses: a no-break space
#: (Zs) is text, and so is a character newer than this Python's Unicode (Cn: a later version's
#: emoji), or the answer would depend on the Python version; but not a code point Unicode
#: keeps unassigned as ignorable (the tag block's: ``_shows_nothing``).
_NOT_TEXT = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co"})

#: The two format characters scripts and emoji need: U+200C ZERO WIDTH NON-JOINER (inside a
#: Persian word) and U+200D ZERO WIDTH JOINER (woman, ZWJ, laptop: one technologist emoji; an
#: Indic conjunct). Each only changes how its two neighbours are drawn (D537), but where they
#: draw the same either way, as two Latin letters do, one a gap spells a bit (D557).
_JOINERS = frozenset("\u200c\u200d")

#: The scripts whose letters a joiner changes (D557): those that join their letters or stack
#: them into conjuncts. Arabic, Syriac, Thaana, N'Ko, Mandaic and the Indic scripts
#: (Devanagari to Sinhala); Tibetan, Myanmar; the Philippine scripts, Khmer, Mongolian;
#: Buginese, Tai Tham; Balinese to Lepcha; Syloti Nagri to Rejang, Javanese to Meetei Mayek;
#: Arabic presentation forms; Kharoshthi to Chorasmian, Brahmi to Tamil Supplement, Adlam.
#: Python has no Script property, hence the blocks.
_JOINING_SCRIPTS = re.compile(
    "[\u0600-\u0dff\u0f00-\u109f\u1700-\u18af\u1a00-\u1aaf\u1b00-\u1c4f\ua800-\ua95f"
    "\ua980-\uaaff\uabc0-\uabff\ufb50-\ufdff\ufe70-\ufefe\U00010a00-\U00010fff"
    "\U00011000-\U00011fff\U0001e900-\U0001e95f]")

#: Unicode's variation selectors (Variation_Selector): Mongolian's four free ones, VS1-VS16 and
#: the ideographic VS17-VS256. Marks that show as nothing: after one emoji, a run of them spells
#: any bytes, one a selector ("emoji smuggling"), which ``isprintable`` passes (D544).
_SELECTORS = re.compile("[\u180b-\u180d\u180f\ufe00-\ufe0f\U000e0100-\U000e01ef]")

#: The first ideographic selector: VS17 on select only a CJK unified ideograph (UTS #37).
_IDEOGRAPHIC = "\U000e0100"

#: The black flag, the base of every emoji tag sequence.
_BLACK_FLAG = "\U0001f3f4"

#: The RGI emoji tag sequences (emoji-sequences.txt, the same since Emoji 5.0): the flags of
#: England, Scotland and Wales, a black flag followed by the tag letters of gbeng, gbsct and
#: gbwls and a CANCEL TAG. The only tag characters that are text: any other run of them
#: spells ASCII no one sees (D557).
_TAG_SEQUENCES = tuple(
    _BLACK_FLAG + "".join(chr(0xE0000 + ord(letter)) for letter in region) + "\U000e007f"
    for region in ("gbeng", "gbsct", "gbwls"))
_LONGEST_TAG_SEQUENCE = max(len(flag) for flag in _TAG_SEQUENCES)

#: The printable-text rule's remedy, for what it is applied to.
PRINTABLE_REMEDY = "write {} as printable text, {} paragraphs separated by newlines"


def _takes_joiner(character: str) -> bool:
    """Whether a joiner beside ``character`` changes how it is drawn: a symbol past ASCII (an
    emoji, a skin tone, the sign of a profession), a letter or mark of a script that joins
    (``_JOINING_SCRIPTS``), or a character newer than this Python's Unicode (a sequence's fate
    must not depend on the Python version). Never ASCII, nor a letter of any other script:
    Latin, Greek, Cyrillic, CJK, Hangul ... draw the same with a joiner or without."""
    if character.isascii():
        return False
    category = unicodedata.category(character)
    if category[0] == "S" or category == "Cn":
        return True
    return category[0] in "LM" and _JOINING_SCRIPTS.match(character) is not None


def _joins(line: str, index: int) -> bool:
    """Whether ``line[index]`` is a joiner between two characters it joins: the character
    before it is judged by the base its marks sit on (a virama's letter, VS16's heart), so a
    mark after a Latin letter carries no joiner either; the one after it may be a mark (a
    virama: Bengali's ra, ZWJ, virama, ya), which is judged itself. Not at the line's start
    or end, not beside a space, punctuation or another joiner."""
    if line[index] not in _JOINERS or not 0 < index < len(line) - 1:
        return False
    before = index - 1
    while before > 0 and unicodedata.category(line[before])[0] == "M":
        before -= 1  # each mark is passed by at most the one joiner after it: linear
    after = line[index + 1]
    return _takes_joiner(line[before]) and (
        _takes_joiner(after) or unicodedata.category(after)[0] == "M")


def _selects(line: str, index: int) -> bool:
    """Whether ``line[index]``, a variation selector, follows a character it can select: one
    selector a base, so never at a line's start, after a space, a mark, a joiner or another
    selector. In ASCII only a keycap's base takes one (a digit, # or * with VS15/VS16; U+0030
    U+FE00 is the slashed zero), so English prose carries none; past ASCII, a symbol (an
    emoji), a digit, punctuation or a caseless letter (Myanmar, Mongolian, CJK ...), the
    ideographic selectors only a CJK ideograph. Python has no list of the sequences Unicode
    names, hence the categories."""
    if index == 0:
        return False
    base, selector = line[index - 1], line[index]
    if base.isascii():
        keycap = base in "0123456789#*" and selector in "\ufe0e\ufe0f"
        return keycap or base + selector == "0\ufe00"
    category = unicodedata.category(base)
    if category == "Cn":  # newer than this Python's Unicode, as for a joiner (``_takes_joiner``)
        return True
    if selector >= _IDEOGRAPHIC:
        return unicodedata.name(base, "").startswith("CJK UNIFIED IDEOGRAPH")
    # U+2139 INFORMATION SOURCE is the one cased letter with an emoji presentation.
    return category[0] in "SNP" or category == "Lo" or base == "\u2139"


def _flags(line: str, index: int) -> bool:
    """Whether ``line[index]``, a format character, is a tag of one of the ``_TAG_SEQUENCES``:
    the nearest black flag before it starts one that ``index`` falls inside. Only a few
    characters back are looked at, so a line of tags is read in linear time."""
    start = line.rfind(_BLACK_FLAG, max(0, index - _LONGEST_TAG_SEQUENCE + 1), index)
    return start >= 0 and any(line.startswith(flag, start) and index < start + len(flag)
                              for flag in _TAG_SEQUENCES)


@functools.cache
def _shows_nothing() -> re.Pattern[str]:
    """What ``printable`` escapes as showing nothing (D465): Unicode's default-ignorable
    characters (the combining grapheme joiner, the Hangul fillers, unassigned tags ...) and the
    printable blanks. Its own set, compiled at first use as it compiles its own."""
    return re.compile(f"[{SHOWS_NOTHING}]")


def not_text(line: str) -> str | None:
    """The first character of ``line`` (no line break in it) that is not text, as "U+XXXX
    (NAME), which does not print: ...", "..., which shows as nothing: ..." or "... where it
    joins (selects) nothing: ..."; None if every character is. Most of them show as nothing,
    hence the name."""
    if prints(line):  # in C: nearly every line (no format character, selector or blank in it)
        return None
    for index, character in enumerate(line):
        if _SELECTORS.match(character):
            if _selects(line, index):
                continue
            why = (" where it selects nothing: a variation selector stands once, right after "
                   "the emoji, symbol or ideograph it varies")
        elif unicodedata.category(character) in _NOT_TEXT:
            if _joins(line, index) or _flags(line, index):
                continue
            why = (" where it joins nothing: a joiner stands only inside an emoji sequence or "
                   "between two letters of a script that joins them (Arabic, Persian, Indic "
                   "...)" if character in _JOINERS else
                   ", which does not print: a control character (a carriage return, tab or "
                   "escape), a direction mark, a zero-width or other format character, or a "
                   "line separator")
        elif _shows_nothing().match(character):
            # Python calls these printable (a mark, a letter, a Cn in the tag block), and a run
            # of two of them spells any bytes (D557).
            why = (", which shows as nothing: a combining grapheme joiner, a Hangul filler, a "
                   "blank or another default-ignorable character")
        else:
            continue
        name = unicodedata.name(character, "")  # a control has none
        return f"U+{ord(character):04X}" + (f" ({name})" if name else "") + why
    return None


def not_printable(text: str) -> str | None:
    """Why ``text`` (a tool's description, a schema's description or title: prose the model
    reads) is not printable text, as "line N has U+XXXX (NAME), ...", naming the first
    character that is not (``not_text``); None if it is."""
    for number, line in enumerate(text.split("\n"), 1):
        if (why := not_text(line)) is not None:
            return f"line {number} has {why}"
    return None


def _subschemas(schema: Mapping[str, Any], pointer: str) -> Iterator[tuple[Any, str, str]]:
    """Each subschema with its pointer and the keyword it sits under (a boolean one too:
    ``items: true`` is as open as ``items: {}``)."""
    for key in _ONE:
        if isinstance(schema.get(key), (Mapping, bool)):
            yield schema[key], f"{pointer}/{key}", key
    for key in _MAP:
        if isinstance(schema.get(key), Mapping):
            for name, sub in schema[key].items():
                yield sub, f"{pointer}/{key}/{name}", key
    for key in _LIST:
        if isinstance(schema.get(key), list):
            for i, sub in enumerate(schema[key]):
                yield sub, f"{pointer}/{key}/{i}", key


def _constrains(schema: Mapping[str, Any], refs: _References) -> bool:
    """Whether the subschema says something about its value (its branches are checked
    themselves); ``{"anyOf": []}`` and ``{"not": ...}`` alone do not."""
    return _constrains_itself(schema, refs) or _has_union(schema)


def _has_union(schema: Mapping[str, Any]) -> bool:
    return any(isinstance(schema.get(key), list) and schema[key] for key in _UNIONS)


def _constrains_itself(schema: Mapping[str, Any], refs: _References) -> bool:
    """Whether the subschema constrains its value by its own keywords, unions aside: a type,
    an enum, a const, or a ``$ref`` whose target does. A reference to an open subschema
    (``{}``, ``true``, a branch that only narrows its own parent) constrains nothing, wherever
    it points."""
    if _CONSTRAINING & schema.keys():
        return True
    ref = schema.get("$ref")
    return isinstance(ref, str) and refs.constrain(ref)


class _References:
    """Whether each local ``$ref`` of one schema names a subschema that constrains, worked out
    once a reference. Following the chain again from every place that names it cost a hostile
    upstream's 63 KB schema (440 links, named 1,500 times) 17 s of every start; followed by a
    loop, not by recursion, a chain of any length is linear and never hits the stack limit.

    It also keeps what the walk saw: the subschemas it checked as describing a value (by
    identity) and every ``$ref`` with its pointer, so that each target is known to be one of
    them once the walk is done (``unchecked``)."""

    def __init__(self, root: Any) -> None:
        self.root = root
        self.known: dict[str, bool] = {}
        #: What fastjsonschema joins each ``$ref`` to: the root's ``$id``, or nothing.
        self.base = (_schema_id(root) or "") if isinstance(root, Mapping) else ""
        self.walked: set[int] = set()
        self.describing: set[int] = set()
        self.named: list[tuple[str, str]] = []

    def fragment(self, ref: str) -> str:
        """The fragment fastjsonschema resolves for ``ref``: joined to the root's ``$id`` as a
        URI, which drops tabs and line breaks, before it is split off."""
        return urldefrag(urljoin(self.base, ref)).fragment

    def unchecked(self) -> Iterator[SchemaProblem]:
        """A problem for each ``$ref`` whose target the walk did not check as a value's schema:
        one inside an ``examples`` entry, under a keyword it does not know, or that only
        narrows its own parent may be an open object, and the validator would use it as is."""
        for pointer, ref in self.named:
            target = _target(self.root, self.fragment(ref))
            if isinstance(target, Mapping) and id(target) not in self.describing:
                yield SchemaProblem(f"{pointer}/$ref", _UNCHECKED_TARGET)

    def constrain(self, ref: str) -> bool:
        # (reference, whether its target has a union) for each reference followed, in order.
        followed: list[tuple[str, bool]] = []
        position: dict[str, int] = {}
        current = ref
        while current not in self.known:
            if current in position:
                # Round a cycle no target constrains by its own keywords: each reference on it
                # constrains if one of their targets has a union.
                cycle = followed[position[current]:]
                del followed[position[current]:]
                verdict = any(union for _, union in cycle)
                self.known.update((name, verdict) for name, _ in cycle)
                break
            target = (_target(self.root, self.fragment(current))
                      if current.startswith("#") else None)
            following = target.get("$ref") if isinstance(target, Mapping) else None
            if target is None:
                self.known[current] = True  # remote, or naming nothing: refused as such
            elif not isinstance(target, Mapping):
                self.known[current] = False  # `true`, or a value that is no schema
            elif _CONSTRAINING & target.keys() or not isinstance(following, str):
                self.known[current] = _constrains(target, self)
            else:
                position[current] = len(followed)
                followed.append((current, _has_union(target)))
                current = following
        verdict = self.known[current]
        for name, union in reversed(followed):
            verdict = union or verdict
            self.known[name] = verdict
        return self.known[ref]


_UNCHECKED_TARGET = ("names a part of the schema step 5 does not check as a value's schema (an "
                     "examples entry, an unknown keyword, a branch that only narrows its "
                     "parent); define the subschema under $defs and refer to #/$defs/<name>")


def _schema_id(node: Mapping[str, Any]) -> str | None:
    """The ``$id`` (or draft-04 ``id``) fastjsonschema files ``node`` under, as its
    ``get_id`` reads it; None if it has none it would use."""
    found = node.get("$id", node.get("id", ""))
    return found if ("$id" in node or "id" in node) and isinstance(found, str) else None


def _target(root: Any, fragment: str) -> Any:
    """The subschema a local ``$ref``'s fragment names, found as fastjsonschema's
    ``resolve_path`` finds it (percent-decoded, leading slashes dropped, a list step read by
    ``int``), or None where it names nothing. A fragment that is no pointer (``#name``) is
    refused as such, so it names nothing here."""
    if fragment and not fragment.startswith("/"):
        return None
    path = fragment.lstrip("/")
    node = root
    for raw in unquote(path).split("/") if path else []:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, list):
            try:
                node = node[int(part)]
            except (ValueError, IndexError):
                return None
        elif isinstance(node, Mapping) and part in node:
            node = node[part]
        else:
            return None
    return node


def _shadowing_ids(root: Mapping[str, Any], walked: set[int]) -> Iterator[str]:
    """The pointer of each object, anywhere in the schema (a default or an example too), whose
    ``$id`` fastjsonschema's walk files under the schema's own address: it then resolves the
    schema's ``$ref``s in that object instead of in the schema (its ``RefResolver.walk``, which
    skips an object with a ``$ref`` and does not enter lists). A subschema step 5 walked is
    left out: its $id is refused as such."""
    own = _schema_id(root) or ""
    document = urlsplit(urldefrag(urljoin(own, "#")).url).geturl()
    if not document:
        return  # every `#...` resolves in the schema itself, whatever is filed
    stack = [(value, f"/{key}", urljoin(own, own)) for key, value in root.items()
             if isinstance(value, Mapping)]
    while stack:
        node, pointer, scope = stack.pop()
        if isinstance(node.get("$ref"), str):
            continue
        ident = _schema_id(node)
        if ident is not None:
            scope = urljoin(scope, ident)
            if urlsplit(scope).geturl() == document and id(node) not in walked:
                yield pointer
        stack.extend((value, f"{pointer}/{key}", scope) for key, value in node.items()
                     if isinstance(value, Mapping))


def _is_object_level(schema: Mapping[str, Any]) -> bool:
    declared = schema.get("type")
    types = declared if isinstance(declared, list) else [declared]
    return "object" in types or "properties" in schema or "patternProperties" in schema


def closed(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``schema`` with every object level closed (``additionalProperties: false``):
    what an operator asks of an upstream MCP tool whose server left its schema open (D282).
    Only ever stricter: an argument the open schema did not name is refused, nothing else."""
    copy = dict(schema)
    if _is_object_level(copy):
        copy["additionalProperties"] = False
    for key in _ONE:
        if isinstance(copy.get(key), Mapping):
            copy[key] = closed(copy[key])
    for key in _MAP:
        if isinstance(copy.get(key), Mapping):
            copy[key] = {name: closed(sub) if isinstance(sub, Mapping) else sub
                         for name, sub in copy[key].items()}
    for key in _LIST:
        if isinstance(copy.get(key), list):
            copy[key] = [closed(sub) if isinstance(sub, Mapping) else sub for sub in copy[key]]
    return copy


def _is_array_level(schema: Mapping[str, Any]) -> bool:
    declared = schema.get("type")
    types = declared if isinstance(declared, list) else [declared]
    return "array" in types


def _under_union(pointer: str) -> bool:
    return "/anyOf/" in pointer or "/oneOf/" in pointer


def _under_definitions(pointer: str) -> bool:
    return "/$defs/" in pointer or "/definitions/" in pointer


_NAME_REMEDY = "name the property in printable text, with no character that does not show"


def _name_problems(schema: Mapping[str, Any], pointer: str) -> Iterator[SchemaProblem]:
    """A problem for each property name of this level (a key of ``properties``, an entry of
    ``required``) and each definition's name (a key of ``$defs`` or ``definitions``) that is
    not text (``not_text``), at its pointer with what does not show escaped: tools/list carries
    each name to the model as it does the descriptions (D557). (``patternProperties`` is
    refused whole.) Text with no UTF-8 form is the not-JSON refusal's, as for the
    annotations."""
    properties = schema.get("properties")
    required = schema.get("required")
    named = [*((None, name) for name in (properties if isinstance(properties, Mapping) else ())),
             *enumerate(required if isinstance(required, list) else ())]
    for index, name in named:
        if isinstance(name, str) and has_utf8(name) and (why := not_text(name)) is not None:
            at = f"properties/{escaped(name)}" if index is None else f"required/{index}"
            yield SchemaProblem(f"{pointer}/{at}", f"the property name has {why}", _NAME_REMEDY)
    for key in ("$defs", "definitions"):
        # A definition's name reaches the model in every $ref to it (D571).
        defined = schema.get(key)
        for name in defined if isinstance(defined, Mapping) else ():
            if isinstance(name, str) and has_utf8(name) and (why := not_text(name)) is not None:
                yield SchemaProblem(f"{pointer}/{key}/{escaped(name)}",
                                    f"the definition name has {why}", _DEFINITION_REMEDY)


_DEFINITION_REMEDY = ("name the definition in printable text, with no character that does not "
                      "show")

#: Keywords whose value is data the model reads in tools/list beside the schema's prose: a
#: value the arguments may or must take, or show (D571).
_VALUES = ("enum", "const", "default", "examples")

_VALUE_REMEDY = ("write each text in the schema's enum, const, default and examples as "
                 "printable text, with no character that does not show (lines separated by "
                 "newlines)")


#: The C0 controls but the line break, in a value: JSON writes each as an escape the model
#: reads (``\\t``, ``\\u001b``), so a value may hold them (a tab delimiter, D571); checked as
#: a character that prints.
_JSON_ESCAPES = {code: "?" for code in range(0x20) if code != 0x0A}


def _value_text_problem(text: str) -> str | None:
    """``not_printable`` of a value's text, the controls JSON escapes aside."""
    return not_printable(text.translate(_JSON_ESCAPES))


def _value_problems(schema: Mapping[str, Any], pointer: str) -> Iterator[SchemaProblem]:
    """A problem for each text in this level's ``_VALUES`` (a string, or an object's key, at
    any depth of the value) that is not printable text (``not_printable``: the descriptions'
    rule, lines and all), at its pointer, what does not show in a key escaped. Walked by a
    loop, so a value nested past the stack's depth is read too. Text with no UTF-8 form is the
    not-JSON refusal's, as for the annotations."""
    for keyword in _VALUES:
        if keyword not in schema:
            continue
        stack: list[tuple[Any, str]] = [(schema[keyword], f"{pointer}/{keyword}")]
        while stack:
            value, at = stack.pop()
            if isinstance(value, str):
                if has_utf8(value) and (why := _value_text_problem(value)) is not None:
                    yield SchemaProblem(at, f"{keyword} {why}", _VALUE_REMEDY)
            elif isinstance(value, Mapping):
                members = [(name, f"{at}/{escaped(name) if isinstance(name, str) else name}", item)
                           for name, item in value.items()]
                for name, member, _ in members:
                    if isinstance(name, str) and has_utf8(name) and (
                            why := _value_text_problem(name)) is not None:
                        yield SchemaProblem(member, f"{keyword} key {why}", _VALUE_REMEDY)
                stack.extend((item, member) for _, member, item in reversed(members))
            elif isinstance(value, (list, tuple)):
                stack.extend((item, f"{at}/{i}") for i, item in reversed(list(enumerate(value))))


def schema_problems(schema: Any, pointer: str = "", depth: int = 0, *,
                    narrows: bool = False, root: Any = None,
                    refs: _References | None = None) -> Iterator[SchemaProblem]:
    """Every reason this schema is not closed, local and dialect-neutral (registration step 5).
    ``narrows``: the schema only adds conditions to a value constrained elsewhere (it sits
    under ``not``, ``if`` ..., or is a union branch of a parent that constrains or narrows).
    ``root``: the whole schema, which its ``$ref``s name subschemas of (default: ``schema``)."""
    root = schema if root is None else root
    # The outermost call checks, once the walk is done, what only the whole walk knows.
    outermost = refs is None
    refs = _References(root) if refs is None else refs
    if depth > MAX_SCHEMA_DEPTH:
        yield SchemaProblem(pointer, f"subschemas nest more than {MAX_SCHEMA_DEPTH} deep, too "
                            "deep to compile a validator for; flatten the schema, or move a "
                            "level into $defs and $ref it")
        return
    if isinstance(schema, bool):
        # `true` accepts anything, including open objects; `false` is closed but useless.
        if schema is True:
            yield SchemaProblem(pointer, "the schema `true` accepts anything; describe the value")
        return
    if not isinstance(schema, Mapping):
        yield SchemaProblem(pointer, "a schema must be a JSON object")
        return
    if pointer == "" and "$schema" in schema and schema["$schema"] not in SUPPORTED_DIALECTS:
        yield SchemaProblem("/$schema", f"unsupported dialect {schema['$schema']!r}")
    refs.walked.add(id(schema))
    if not narrows:
        refs.describing.add(id(schema))
    ref = schema.get("$ref")
    if ref is not None and (not isinstance(ref, str) or not ref.startswith("#")):
        yield SchemaProblem(f"{pointer}/$ref", "remote $ref is not allowed; use a local #/$defs")
    elif ref is not None and refs.fragment(ref)[:1] not in ("", "/"):
        # fastjsonschema looks `#name` up among the $ids it filed, a 2020-12 validator among
        # the $anchors: the two can name different subschemas.
        yield SchemaProblem(f"{pointer}/$ref", "a $ref names a JSON pointer (#/$defs/<name>), "
                            "not a plain-name fragment")
    elif ref is not None:
        refs.named.append((pointer, ref))
    if schema is not root and _schema_id(schema) is not None:
        # fastjsonschema resolves the $refs inside such a subschema against its $id, not
        # against the schema step 5 walked.
        yield SchemaProblem(pointer, "an $id below the top level changes what the $refs "
                            "inside it name; remove it")
    for key in sorted(_DIALECT_SENSITIVE & schema.keys()):
        yield SchemaProblem(f"{pointer}/{key}", f"{key} differs between draft-07 and 2020-12")
    for key in sorted(_OPENING.keys() & schema.keys()):
        yield SchemaProblem(f"{pointer}/{key}", _OPENING[key])
    if isinstance(schema.get("items"), list):
        yield SchemaProblem(f"{pointer}/items", "tuple (array-form) items differs between "
                            "dialects; use one items schema")
    elif _is_array_level(schema) and "items" not in schema:
        yield SchemaProblem(pointer, "an array schema must say what its items are (items)")
    branches_narrow = narrows or _constrains_itself(schema, refs)
    for sub, sub_pointer, key in _subschemas(schema, pointer):
        if key in _UNIONS and branches_narrow:
            continue
        if key in _DESCRIBES and isinstance(sub, Mapping) and not _constrains(sub, refs):
            alone = " (not alone admits every other value)" if "not" in sub else ""
            yield SchemaProblem(sub_pointer,
                                f"accepts any value{alone}; give {_DESCRIBES[key]} a type")
    if "default" in schema and ("$ref" in schema or _under_definitions(pointer)):
        # fastjsonschema applies no default reached through a $ref, so step 4 would silently
        # skip it: put the default on the property itself.
        yield SchemaProblem(pointer, "a default beside a $ref or inside $defs is never applied")
    elif "default" in schema and _under_union(pointer):
        # fastjsonschema fills a branch's default in before it knows the branch fails, so the
        # arguments change though another branch matched: default the property itself.
        yield SchemaProblem(pointer, "a default inside anyOf or oneOf is filled in even when "
                            "its branch fails; put the default on the property itself")
    beside = sorted(_SKIPPED_BESIDE_REF & schema.keys()) if "$ref" in schema else []
    if beside:
        them = "it" if len(beside) == 1 else "them"
        yield SchemaProblem(pointer, f"{', '.join(beside)} beside a $ref "
                            f"{'is' if len(beside) == 1 else 'are'} never applied: the validator "
                            f"reads the $ref alone (draft-07); put {them} in the definition it "
                            f"names, or write allOf: [{{$ref}}, {{a type and {them}}}]")
    if _is_object_level(schema) and schema.get("additionalProperties") is not False:
        yield SchemaProblem(pointer, "object schema must set additionalProperties: false")
    for key in _ANNOTATIONS:
        # tools/list carries them to the model as it does the tool's description (D537). Text
        # with no UTF-8 form is the not-JSON refusal's, whose remedy says so.
        text = schema.get(key)
        if isinstance(text, str) and has_utf8(text) and (why := not_printable(text)) is not None:
            yield SchemaProblem(pointer, f"{key} {why}", PRINTABLE_REMEDY.format(
                "the schema's descriptions and titles", "their"))
    yield from _name_problems(schema, pointer)
    yield from _value_problems(schema, pointer)
    for sub, sub_pointer, key in _subschemas(schema, pointer):
        # A boolean additionalProperties is the object level's closing (refused above when
        # not false); where a subschema only narrows, `true` adds no condition and `false`
        # refuses every value (under not, the other way round): neither admits one.
        sub_narrows = key in _NARROWS or (key in _UNIONS and branches_narrow)
        if isinstance(sub, bool) and (key == "additionalProperties" or sub_narrows):
            continue
        yield from schema_problems(sub, sub_pointer, depth + 1, narrows=sub_narrows, root=root,
                                   refs=refs)
    if outermost:
        yield from refs.unchecked()
        for shadowing in _shadowing_ids(root, refs.walked):
            yield SchemaProblem(shadowing, "an $id naming the schema's own address makes the "
                                "validator resolve its $refs here; remove it")


def subschema_at(schema: Mapping[str, Any], pointer: str) -> Mapping[str, Any] | None:
    """The subschema that validates the arguments at ``pointer`` (``/options/limit``),
    following ``properties`` only; None if the schema names no such property."""
    node: Any = schema
    for name in pointer.split("/")[1:] if pointer.startswith("/") else [None]:
        properties = node.get("properties") if isinstance(node, Mapping) else None
        if name is None or not isinstance(properties, Mapping) or name not in properties:
            return None
        node = properties[name]
    return node if isinstance(node, Mapping) else None


#: An integer position's step into an array's items (a property name is a step by its name).
ITEMS = 0

#: A path from the arguments' top level to a value the schema types as integer.
IntegerPosition = tuple[str | int, ...]


def integer_positions(schema: Mapping[str, Any]) -> tuple[IntegerPosition, ...]:
    """Where the schema says a value is an integer, through ``properties`` and ``items`` from
    its top level: there step 4 hands the body an int for a whole-number float (JSON Schema's
    ``integer`` admits ``3.0``; D404). A position reached through ``$ref`` or a union is not
    followed: what the value is there depends on which branch matched."""
    found: list[IntegerPosition] = []

    def walk(node: Any, path: IntegerPosition) -> None:
        if not isinstance(node, Mapping):
            return
        kinds = node.get("type")
        kinds = [kinds] if isinstance(kinds, str) else kinds
        if isinstance(kinds, list) and "integer" in kinds and "number" not in kinds:
            found.append(path)
            return
        properties = node.get("properties")
        if isinstance(properties, Mapping):
            for name, sub in properties.items():
                walk(sub, (*path, name))
        walk(node.get("items"), (*path, ITEMS))

    walk(schema, ())
    return tuple(found)


def defaults_below_top(schema: Mapping[str, Any]) -> bool:
    """Whether validating with defaults may fill one in below the arguments' top level: the
    schema names a ``default`` anywhere but as a top-level property's own, or refers to a
    subschema at all (``{"$ref": "#"}`` fills the root's defaults in one level down). Where it
    does not, step 4 copies the arguments' top level alone for the validator to fill in
    (D333)."""
    if _names(schema, _REFERENCES):
        return True
    for key, value in schema.items():
        if key == "properties" and isinstance(value, Mapping):
            for sub in value.values():
                own = sub.items() if isinstance(sub, Mapping) else [("", sub)]
                if any(_names(v, ("default",)) for k, v in own if k != "default"):
                    return True
        elif key == "default" or _names(value, ("default",)):
            return True
    return False


#: The keywords by which a schema reuses another of its subschemas.
_REFERENCES = ("$ref", "$dynamicRef", "$recursiveRef")


def _names(node: Any, keys: tuple[str, ...]) -> bool:
    """Whether any mapping in ``node`` has one of ``keys``."""
    if isinstance(node, Mapping):
        return any(key in keys or _names(value, keys) for key, value in node.items())
    if isinstance(node, (list, tuple)):
        return any(_names(value, keys) for value in node)
    return False


def is_json(schema: Mapping[str, Any]) -> bool:
    """Whether the schema is a JSON value: no NaN or infinity (which Python's and pydantic's
    parsers accept), no text with no UTF-8 form, no value JSON has no form for. Nesting is for
    ``schema_problems`` and the compiler to judge, so a value too deep to encode here is not
    counted against it."""
    try:
        canonical_text(schema).encode("utf-8")  # a lone surrogate has no UTF-8 form (D393)
    except RecursionError:
        return True
    except (TypeError, ValueError):
        return False
    return True


def not_json_at(schema: Mapping[str, Any]) -> str:
    """The pointer of the first value in ``schema`` JSON has no form for (NaN, an infinity, an
    integer too long to write out, text with no UTF-8 form, a key or value of no JSON type),
    for a schema ``is_json`` refused; ``""`` (the top) where none is found within the depth a
    walk can take."""
    stack: list[tuple[Any, str]] = [(schema, "")]
    while stack:
        value, pointer = stack.pop()
        if isinstance(value, Mapping):
            items = list(value.items())
            if any(not isinstance(key, str) or not has_utf8(key) for key, _ in items):
                return pointer
            stack.extend((sub, f"{pointer}/{key}") for key, sub in reversed(items))
        elif isinstance(value, (list, tuple)):
            stack.extend((sub, f"{pointer}/{i}") for i, sub in reversed(list(enumerate(value))))
        elif not _json_scalar(value):
            return pointer
    return ""


def _json_scalar(value: Any) -> bool:
    if isinstance(value, str):
        return has_utf8(value)
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, int | float):
        return not_json_number(value) is None
    return False


def compile_schema(schema: Mapping[str, Any], *, apply_defaults: bool = True,
                   cache: ValidatorCache | None = None) -> Validator:
    """Compile a checked schema. Raises SchemaProblem if fastjsonschema refuses it.

    With ``apply_defaults`` the validator fills ``default`` values into the data it is given
    (pipeline step 4, input schemas); without it the data is never modified (output schemas,
    which the pipeline can then validate without a defensive copy). With ``cache`` the code
    generated for the same schema by the same generator at an earlier start is reused.
    """
    key = cache.key(schema, apply_defaults=apply_defaults) if cache is not None else None
    code = cache.get(key) if cache is not None and key is not None else None
    if code is None:
        # Imported here: a start whose every schema is cached does not load fastjsonschema.
        import fastjsonschema

        try:
            # Generating the code is where fastjsonschema finds a bad definition, so it
            # happens here, at registration; running the code to make the function waits
            # for the first validation.
            # On a copy: fastjsonschema rewrites each $ref it resolves in place, joined to
            # the schema's $id, and the spec's schema must stay as written (D334).
            code = fastjsonschema.compile_to_code(copy.deepcopy(dict(schema)),
                                                  handlers=_NoRemote(),
                                                  use_default=apply_defaults)
        except SchemaProblem:
            raise
        except RecursionError:
            raise SchemaProblem("", _TOO_DEEP) from None
        except fastjsonschema.JsonSchemaDefinitionException as exc:
            raise SchemaProblem("", f"does not compile: {exc}") from None
        except Exception:  # fastjsonschema's own, for a $ref it cannot walk
            raise SchemaProblem("", "does not compile: a $ref that names nothing in the "
                                "schema, or a definition fastjsonschema cannot read") from None
        # Python compiles the generated code here, without running it: code nested past
        # Python's limits (blocks, indentation, parentheses) would otherwise fail every call
        # (D353). Only new code: a cached entry compiled when it was generated.
        try:
            compiled = compile(code, _FILENAME, "exec")
        except (SyntaxError, RecursionError, MemoryError):
            raise SchemaProblem("", _TOO_DEEP) from None
        if cache is not None and key is not None:
            cache.put(key, code)
        return _CompiledOnFirstUse(code, compiled)
    return _CompiledOnFirstUse(code)


_FILENAME = "<toolhost schema>"
_TOO_DEEP = ("does not compile: nested too deeply for Python to compile its validator; "
             "flatten the schema, or move a level into $defs and $ref it")


class _NoRemote(dict[str, Callable[[str], Any]]):
    """fastjsonschema's handlers, claiming every URI scheme: a reference that does not resolve
    within the schema (an ``$id`` elsewhere, or one with a fragment) would otherwise be fetched
    with urllib, which follows redirects, reads file:// and waits without end. Registration
    reaches no network and no file (D334)."""

    def __contains__(self, scheme: object) -> bool:
        return True

    def __getitem__(self, scheme: str) -> Callable[[str], Any]:
        return _refuse_remote


def _refuse_remote(uri: str) -> Any:
    raise SchemaProblem("", "refers outside itself: a $ref resolves to another document")


#: The generated module's first function is the schema's root validator (the others, if any,
#: are what its local ``$ref``s call).
_FIRST_FUNCTION = re.compile(r"^def (\w+)\(", re.MULTILINE)


class _CompiledOnFirstUse:
    """A validator whose generated code is executed when it first validates."""

    __slots__ = ("_code", "_compiled", "_validate")

    def __init__(self, code: str, compiled: CodeType | None = None) -> None:
        self._code = code
        self._compiled = compiled
        self._validate: Validator | None = None

    def __call__(self, data: Any) -> Any:
        validate = self._validate
        if validate is None:
            namespace: dict[str, Any] = {}
            compiled = self._compiled or compile(self._code, _FILENAME, "exec")
            self._compiled = None  # the function holds what it needs
            # fastjsonschema's own generated code, as its compile() would run it.
            exec(compiled, namespace)
            match = _FIRST_FUNCTION.search(self._code)
            if match is None:
                raise RuntimeError("fastjsonschema generated no validation function")
            validate = self._validate = namespace[match.group(1)]
        return validate(data)
