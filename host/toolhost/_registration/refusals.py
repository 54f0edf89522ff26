"""Registration: the seven ordered refusals, then the reasons check.

Exactly the spec's steps 1-7, each run over every registered (name, version) before the next
begins, pure, with nothing else constructed (no tool is built). Registration is the one source
of these rules: ``registration_problems`` lists every problem it finds, in step order, each
naming the step, the tool and version, the distribution that contributed it, and what to
change; ``register`` refuses on the first, and the process does not start. The conformance
suite reports the same list rather than re-implementing any step.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from toolhost._model.errors import ToolhostError
from toolhost._model.host_reasons import MESSAGES as HOST_MESSAGES
from toolhost._model.outcome import HARD_OUTPUT_CEILING, REASON_CODE_PATTERN
from toolhost._model.runs import MAX_DEADLINE_S
from toolhost._model.spec import (
    MISSING,
    Idempotency,
    Kind,
    Reason,
    Risk,
    SchemaRule,
    SideEffect,
    Source,
    TargetKind,
    Tool,
    ToolSpec,
    Trust,
    UserWords,
)
from toolhost._registration.discovery import Contribution
from toolhost._registration.schema import (
    PRINTABLE_REMEDY,
    IntegerPosition,
    SchemaProblem,
    Validator,
    compile_schema,
    defaults_below_top,
    integer_positions,
    is_json,
    not_json_at,
    not_printable,
    not_text,
    schema_problems,
    subschema_at,
)

if TYPE_CHECKING:
    from toolhost._registration.validator_cache import ValidatorCache

__all__ = [
    "FORCED_TRUST_SOURCES",
    "FORCED_TRUST_TARGETS",
    "HARD_OUTPUT_CEILING",
    "MAX_NAME_LENGTH",
    "NAME_PATTERN",
    "PLACEHOLDER_PATTERN",
    "RESERVED_DOMAINS",
    "TRUST_CEILING",
    "Registered",
    "RegistrationProblem",
    "RegistrationRefused",
    "Step",
    "register",
    "registration_problems",
    "trust_is_forced",
]

MAX_NAME_LENGTH = 96
#: ``domain.tool``: lower-case segments, one dot. The domain is the first segment.
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$")
#: Semantic version, MAJOR.MINOR.PATCH, no leading zeros, no pre-release.
VERSION_PATTERN = re.compile(r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$")
RESERVED_DOMAINS = frozenset({"mcp", "device"})

#: Placeholders of every common templating style: {x}, %s, %(x)s, ${x}, $x. A message matching
#: it is not static (hard gate 9); the conformance suite applies the same pattern.
PLACEHOLDER_PATTERN = re.compile(r"\{[^{}]*\}|%\(|%[-+ #0]*\d*(?:\.\d+)?[sdifrxXeEgGc]|\$\{|\$[A-Za-z_]")


class Step(enum.IntEnum):
    NAME_GRAMMAR = 1
    RESERVED_DOMAINS = 2
    DOMAIN_MEMBERSHIP = 3
    UNIQUENESS = 4
    SCHEMA_VALIDITY = 5
    FIELD_COMPLETENESS = 6
    FORCED_TRUST = 7
    #: Not one of the spec's seven: every declared reason has a static message of its own
    #: (hard gate 9), checked at startup after them.
    MESSAGE_TABLE = 8

    @property
    def title(self) -> str:
        if self is Step.MESSAGE_TABLE:
            return "declared reasons"
        return self.name.lower().replace("_", " ")


@attrs.frozen
class RegistrationProblem:
    """One thing registration refuses: the step, what it concerns (``name@version``, or
    ``domain x`` / ``reason code y``), the distribution that contributed it, the problem,
    and what to change."""

    step: Step
    tool: str
    distribution: str
    problem: str
    remedy: str

    def __str__(self) -> str:
        label = f"step {self.step.value}" if self.step <= Step.FORCED_TRUST else "reasons check"
        return (
            f"registration refused at {label} ({self.step.title}): {self.tool} from "
            f"distribution {self.distribution}: {self.problem}. To fix: {self.remedy}"
        )


class RegistrationRefused(ToolhostError):
    """The host refuses to start. ``str()`` is the one line an operator reads: the first
    problem, in step order. ``problems`` holds every problem registration found."""

    def __init__(self, problems: Sequence[RegistrationProblem]) -> None:
        first = problems[0]
        super().__init__(str(first))
        self.problems = tuple(problems)
        self.step = first.step
        self.tool = first.tool
        self.distribution = first.distribution
        self.problem = first.problem
        self.remedy = first.remedy


@attrs.frozen
class Registered:
    """A (name, version) that passed every step, with its validators compiled once and the
    schema rules it maps to reasons of its own (``(pointer, keyword) -> reason code``)."""

    spec: ToolSpec
    tool: Tool
    distribution: str
    validate_input: Validator
    validate_output: Validator
    schema_reasons: Mapping[tuple[str, str], str] = attrs.field(factory=dict)
    #: Whether input validation may fill a default in below the arguments' top level (step
    #: 4 then copies them whole; otherwise their top level alone).
    nested_defaults: bool = True
    #: Where a whole-number float is handed to the body as an int (D404).
    integer_positions: tuple[IntegerPosition, ...] = ()
    #: For a tool whose version does not change with it (an upstream MCP server's: the
    #: gateway's tools are all 1.0.0), a digest of its definition (input schema and
    #: description); an approval binds to it with the arguments (D441). None otherwise.
    definition: str | None = None


@attrs.frozen
class _Entry:
    tool: Tool
    distribution: str
    #: The host's own contribution (the MCP gateway's tools): the one way into ``mcp``.
    host_owned: bool = False

    @property
    def spec(self) -> ToolSpec:
        return self.tool.spec

    @property
    def label(self) -> str:
        spec = self.tool.spec
        return f"{getattr(spec, 'name', '?')}@{getattr(spec, 'version', '?')}"

    def problem(self, step: Step, problem: str, remedy: str) -> RegistrationProblem:
        return RegistrationProblem(step, self.label, self.distribution, problem, remedy)


Problems = Iterator[RegistrationProblem]


def _entries(contributions: Sequence[Contribution],
             gateway: Contribution | None = None) -> list[_Entry]:
    found = [_Entry(tool, c.distribution) for c in contributions for tool in c.tools]
    if gateway is not None:
        found += [_Entry(tool, gateway.distribution, host_owned=True) for tool in gateway.tools]
    return found


def _gateway_tool(e: _Entry) -> bool:
    """The one exception to step 2: a tool of the host's own gateway contribution, in the
    ``mcp`` domain, whose source is MCP. Plugins never reach it: ``host_owned`` is set only
    for the contribution ``register(gateway=...)`` is given by the composition root."""
    return e.host_owned and e.spec.domain == "mcp" and e.spec.source is Source.MCP


# ---------------------------------------------------------------------------- step 1


def _step_name_grammar(entries: Sequence[_Entry], _: Sequence[Contribution]) -> Problems:
    for e in entries:
        name, version = e.spec.name, e.spec.version
        # A field left out is step 6's to refuse, by name (D55), not a bad value here.
        if name is MISSING:
            pass
        elif not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
            yield e.problem(
                Step.NAME_GRAMMAR, f"name {name!r} does not match {NAME_PATTERN.pattern}",
                "use a lower-case dotted name domain.tool, e.g. math.calculate",
            )
        elif len(name) > MAX_NAME_LENGTH:
            yield e.problem(
                Step.NAME_GRAMMAR, f"name is {len(name)} characters, over {MAX_NAME_LENGTH}",
                f"shorten the name to at most {MAX_NAME_LENGTH} characters",
            )
        if version is not MISSING and (
            not isinstance(version, str) or not VERSION_PATTERN.fullmatch(version)
        ):
            yield e.problem(
                Step.NAME_GRAMMAR, f"version {version!r} is not MAJOR.MINOR.PATCH",
                'use a semantic version such as "1.0.0"',
            )


# ---------------------------------------------------------------------------- step 2


def _step_reserved_domains(entries: Sequence[_Entry], contribs: Sequence[Contribution]) -> Problems:
    for c in contribs:
        for d in c.domains:
            if d.name in RESERVED_DOMAINS:
                yield RegistrationProblem(
                    Step.RESERVED_DOMAINS, f"domain {d.name}", c.distribution,
                    f"domain {d.name!r} is reserved for tools the host attaches itself",
                    "declare a domain other than mcp or device",
                )
    for e in entries:
        if e.host_owned and not _gateway_tool(e):
            yield e.problem(
                Step.RESERVED_DOMAINS, "the host's gateway contributes only MCP-sourced tools "
                "in the mcp domain", "name it mcp.<server>__<tool> with source MCP")
        elif e.spec.domain in RESERVED_DOMAINS and not _gateway_tool(e):
            yield e.problem(
                Step.RESERVED_DOMAINS, f"domain {e.spec.domain!r} is reserved",
                "rename the tool into a domain your plugin declares (not mcp or device)",
            )


# ---------------------------------------------------------------------------- step 3


def _step_domain_membership(entries: Sequence[_Entry], contribs: Sequence[Contribution]) -> Problems:
    owner: dict[str, str] = {}
    for c in contribs:
        for d in c.domains:
            if d.name in owner and owner[d.name] != c.distribution:
                yield RegistrationProblem(
                    Step.DOMAIN_MEMBERSHIP, f"domain {d.name}", c.distribution,
                    f"domain {d.name!r} is already owned by distribution {owner[d.name]}",
                    "each domain has exactly one owner; pick another domain or merge plugins",
                )
                continue
            owner[d.name] = c.distribution
    for e in entries:
        domain = e.spec.domain
        if domain in RESERVED_DOMAINS or not domain or e.host_owned:
            continue  # already refused (or admitted, the gateway's) at step 1 or 2
        if owner.get(domain) != e.distribution:
            where = f"owned by {owner[domain]}" if domain in owner else "undeclared"
            yield e.problem(
                Step.DOMAIN_MEMBERSHIP,
                f"its domain {domain!r} is not declared by this plugin ({where})",
                f"declare Domain({domain!r}) in this plugin's toolhost_domains",
            )


# ---------------------------------------------------------------------------- step 4


def _step_uniqueness(entries: Sequence[_Entry], _: Sequence[Contribution]) -> Problems:
    seen: dict[tuple[Any, Any], str] = {}
    for e in entries:
        key = (e.spec.name, e.spec.version)
        try:
            duplicate = key in seen
        except TypeError:  # an unhashable name or version: refused at step 1
            continue
        if duplicate:
            yield e.problem(
                Step.UNIQUENESS, f"{e.label} is already registered (by {seen[key]})",
                "give the new registration a different version; duplicates are never renamed",
            )
        else:
            seen[key] = e.distribution


# ---------------------------------------------------------------------------- step 5

_SCHEMA_REMEDY = (
    "fix the schema at the pointer shown: close every object level with additionalProperties: "
    "false, give every property and every array's items a type, keep $ref local, and use "
    "draft-07-compatible keywords"
)


_NOT_JSON_REMEDY = (
    "write the value at the pointer shown as JSON can carry it: a finite number, an integer short "
    "enough to write out, text keys, text with no lone surrogate (or leave the keyword out)"
)


def _schema_problems(e: _Entry, which: str, schema: Any) -> list[RegistrationProblem]:
    def problem(text: str) -> RegistrationProblem:
        return e.problem(Step.SCHEMA_VALIDITY, f"{which}: {text}", _SCHEMA_REMEDY)

    if not isinstance(schema, Mapping):
        return [problem("a schema must be a JSON object")]
    if schema.get("type") != "object":
        return [problem('the top level must be {"type": "object"}')]
    found = [e.problem(Step.SCHEMA_VALIDITY, f"{which}: {p}", p.remedy or _SCHEMA_REMEDY)
             for p in schema_problems(schema)]
    if not found and not is_json(schema):
        # fastjsonschema writes a NaN bound as the name ``nan``: every call would raise (D401).
        # Pointed at, with a remedy of its own: closing objects has nothing to do with it.
        found.append(e.problem(
            Step.SCHEMA_VALIDITY,
            f"{which}: " + str(SchemaProblem(not_json_at(schema), "is not JSON: it holds NaN, "
                                             "an infinity, text with no UTF-8 form, or a value "
                                             "JSON has no form for")),
            _NOT_JSON_REMEDY))
    return found


def _compile(e: _Entry, which: str, schema: Mapping[str, Any], *, apply_defaults: bool,
             cache: ValidatorCache | None) -> Validator | RegistrationProblem:
    try:
        return compile_schema(schema, apply_defaults=apply_defaults, cache=cache)
    except SchemaProblem as exc:
        return e.problem(Step.SCHEMA_VALIDITY, f"{which}: {exc}", _SCHEMA_REMEDY)


def _step_schema_validity(
    entries: Sequence[_Entry], validators: dict[int, tuple[Validator, Validator]],
    cache: ValidatorCache | None = None,
) -> Problems:
    """Check and compile both schemas; the compiled validators are the ones the host keeps."""
    for index, e in enumerate(entries):
        compiled: list[Validator] = []
        for which, apply_defaults in (("input_schema", True), ("output_schema", False)):
            schema = getattr(e.spec, which)
            if schema is MISSING:
                continue  # step 6 names it
            found = _schema_problems(e, which, schema)
            if found:
                yield from found
                continue
            result = _compile(e, which, schema, apply_defaults=apply_defaults, cache=cache)
            if isinstance(result, RegistrationProblem):
                yield result
            else:
                compiled.append(result)
        if len(compiled) == 2:
            validators[index] = (compiled[0], compiled[1])


# ---------------------------------------------------------------------------- step 6

_ENUM_FIELDS: tuple[tuple[str, type[enum.Enum]], ...] = (
    ("kind", Kind),
    ("source", Source),
    ("target_kind", TargetKind),
    ("side_effect", SideEffect),
    ("risk", Risk),
    ("idempotency", Idempotency),
    ("output_trust", Trust),
)
_FIELDS = tuple(f.name for f in attrs.fields(ToolSpec))


def _field_problems(spec: ToolSpec) -> Iterator[tuple[str, str]]:
    missing = [name for name in _FIELDS if getattr(spec, name) is MISSING]
    for name in missing:
        yield (
            f"ToolSpec field {name} is missing",
            f"set {name}: ToolSpec has no optional fields (server_id=None unless source is MCP)",
        )
    for field, enum_type in _ENUM_FIELDS:
        value = getattr(spec, field)
        if value is not MISSING and not isinstance(value, enum_type):
            yield (
                f"{field} is {value!r}, not a {enum_type.__name__} member",
                f"set {field} to a {enum_type.__name__} member, e.g. "
                f"{enum_type.__name__}.{next(iter(enum_type)).name}",
            )
    if spec.description is not MISSING and (
        not isinstance(spec.description, str) or not spec.description.strip()
    ):
        yield "description is empty", "describe what the tool does for the model"
    elif isinstance(spec.description, str) and (
            why := not_printable(spec.description)) is not None:
        # Every tools/list carries it to the model, and `toolhost tools` to a terminal: an
        # escape, a carriage return or a direction mark there is a redrawn screen or a second
        # voice, as in a reason's message. Named, since most of them show as nothing.
        yield f"description {why}", PRINTABLE_REMEDY.format("the description", "its")
    if spec.kind is Kind.CONTROL and (
        (isinstance(spec.side_effect, SideEffect) and spec.side_effect is not SideEffect.NONE)
        or (isinstance(spec.target_kind, TargetKind)
            and spec.target_kind is not TargetKind.IN_PROCESS)
    ):
        # The spec's registration constraint on the kind (control tools "inherit side_effect:
        # NONE and target_kind: in_process"); a field left out or no member is named above.
        yield ("a CONTROL tool has side_effect NONE and target_kind in_process",
               "set side_effect=SideEffect.NONE and target_kind=TargetKind.IN_PROCESS, or "
               "make it kind=Kind.CAPABILITY")
    scopes = spec.required_scopes
    if scopes is not MISSING and (
        not isinstance(scopes, tuple) or not all(isinstance(s, str) and s for s in scopes)
    ):
        yield "required_scopes is not a tuple of scope names", "use a tuple, () for none"
    timeout = spec.timeout_s
    # Bounded by the longest run deadline (D352): a call's deadline is min(timeout_s, the
    # run's), and infinity or a huge integer overflows the clock arithmetic at every call.
    if timeout is not MISSING and (
        isinstance(timeout, bool) or not isinstance(timeout, (int, float))
        or not 0 < timeout <= MAX_DEADLINE_S
    ):
        # repr of an integer past 4300 digits raises; none that large needs showing whole.
        shown = ("an integer over 12 digits" if isinstance(timeout, int) and
                 abs(timeout) >= 10**12 else repr(timeout)[:40])
        yield (f"timeout_s is {shown}, not a number of seconds in (0, {MAX_DEADLINE_S}]",
               f"set timeout_s to a positive number of seconds, at most {MAX_DEADLINE_S} "
               "(30 days, the longest run deadline)")
    limit = spec.maximum_output_bytes
    if limit is not MISSING and (
        isinstance(limit, bool) or not isinstance(limit, int) or not 0 < limit < HARD_OUTPUT_CEILING
    ):
        yield (
            f"maximum_output_bytes is {limit!r}, not under the {HARD_OUTPUT_CEILING}-byte ceiling",
            f"set maximum_output_bytes to a positive integer under {HARD_OUTPUT_CEILING}",
        )
    for flag in ("allow_parallel", "deprecated"):
        value = getattr(spec, flag)
        if value is not MISSING and not isinstance(value, bool):
            yield f"{flag} is not a bool", f"set {flag} to True or False"
    if spec.allow_parallel is True and isinstance(spec.idempotency, Idempotency) and (
        spec.idempotency is not Idempotency.READ_ONLY
    ):
        # The pipeline runs a step's calls concurrently when every one allows it, so this
        # flag on a writer would let two writes race.
        yield (
            f"allow_parallel is True but idempotency is {spec.idempotency.value}",
            "set allow_parallel=False: only READ_ONLY tools may run in parallel",
        )
    if spec.server_id is not MISSING:
        if spec.source is Source.MCP:
            if not isinstance(spec.server_id, str) or not spec.server_id:
                yield "server_id is missing for an MCP tool", "set server_id to the MCP server's id"
        elif spec.server_id is not None:
            yield "server_id is set on a tool whose source is not MCP", "set server_id to None"


def _runner_problems(tool: Tool) -> Iterator[tuple[str, str]]:
    call, build = tool.call, tool.build
    if (call is None) == (build is None):
        yield (
            "the Tool has both call= and build=" if call is not None
            else "the Tool has neither call= nor build=",
            "give the Tool exactly one: call=body, or build=factory(services) -> body",
        )
    elif not callable(call if call is not None else build):
        yield "the Tool's call= or build= is not callable", "pass a function"


def _describe_problems(tool: Tool) -> Iterator[tuple[str, str]]:
    # A string was made a reference when the Tool was made; anything else must be callable,
    # or the first approval shown would be where it failed.
    if tool.describe is not None and not callable(tool.describe):
        yield ("the Tool's describe= is not callable",
               "pass a function describe(arguments, services, principal_id) -> lines, or "
               "'package.module:function'")


def _user_words_problems(tool: Tool) -> Iterator[tuple[str, str]]:
    words = tool.user_words
    if words is None:
        return
    if not isinstance(words, UserWords):
        yield "user_words is not a UserWords", "declare user_words=UserWords(prompt, arguments)"
        return
    if not isinstance(words.prompt, str) or not words.prompt.strip() or \
            PLACEHOLDER_PATTERN.search(words.prompt):
        yield ("the user_words prompt is empty or has a placeholder; it is static",
               "write a fixed sentence: the host shows the tool and the value beside it")
    properties = tool.spec.input_schema.get("properties", {}) if isinstance(
        tool.spec.input_schema, Mapping) else {}
    if not words.arguments:
        yield "user_words names no argument", "name the string arguments the person gives"
    for name in words.arguments:
        prop = properties.get(name) if isinstance(name, str) else None
        if not isinstance(prop, Mapping) or prop.get("type") != "string":
            yield (f"user_words names {name!r}, which is not a string property of the input "
                   "schema", "name top-level string properties only")


def _step_field_completeness(entries: Sequence[_Entry], _: Sequence[Contribution]) -> Problems:
    for e in entries:
        if not isinstance(e.tool.spec, ToolSpec):
            yield e.problem(Step.FIELD_COMPLETENESS, "Tool.spec is not a ToolSpec",
                            "build the spec with toolhost.ToolSpec")
            continue
        for problem, remedy in (*_field_problems(e.spec), *_runner_problems(e.tool),
                                *_user_words_problems(e.tool), *_describe_problems(e.tool)):
            yield e.problem(Step.FIELD_COMPLETENESS, problem, remedy)


# ---------------------------------------------------------------------------- step 7

FORCED_TRUST_SOURCES = frozenset({Source.MCP, Source.DEVICE})
FORCED_TRUST_TARGETS = frozenset({TargetKind.SANDBOX, TargetKind.DEVICE})


def trust_is_forced(spec: ToolSpec) -> bool:
    """Whether step 7 forces EXTERNAL_UNTRUSTED on this spec."""
    return spec.source in FORCED_TRUST_SOURCES or spec.target_kind in FORCED_TRUST_TARGETS


#: The most any tool may declare. USER is the current user turn's alone (DESIGN §2): a tool's
#: output read at USER trust would be the model taking a tool's words for the person's (D351).
TRUST_CEILING = Trust.INTERNAL_TOOL


def _step_forced_trust(entries: Sequence[_Entry], _: Sequence[Contribution]) -> Problems:
    # Hard gate 2 widened over target_kind: a builtin running in a sandbox returns bytes
    # produced by code we did not write, exactly what EXTERNAL_UNTRUSTED is for.
    for e in entries:
        spec = e.spec
        if trust_is_forced(spec) and spec.output_trust is not Trust.EXTERNAL_UNTRUSTED:
            yield e.problem(
                Step.FORCED_TRUST,
                f"source {getattr(spec.source, 'value', spec.source)} / target_kind "
                f"{getattr(spec.target_kind, 'value', spec.target_kind)} forces output_trust "
                f"EXTERNAL_UNTRUSTED, but it declares "
                f"{getattr(spec.output_trust, 'value', spec.output_trust)}",
                "set output_trust=Trust.EXTERNAL_UNTRUSTED",
            )
        elif isinstance(spec.output_trust, Trust) and spec.output_trust.rank > TRUST_CEILING.rank:
            yield e.problem(
                Step.FORCED_TRUST,
                f"output_trust is {spec.output_trust.value}, above {TRUST_CEILING.value}: USER "
                "trust is the user turn's alone, never a tool's output",
                f"set output_trust=Trust.{TRUST_CEILING.value}, or lower",
            )


# ---------------------------------------------------------------------------- reasons

#: The failure kind only the host's own reasons use.
_HOST_KIND = "tool.internal."

#: What either refusal of a message's text asks.
_MESSAGE_REMEDY = "write the message as one line of printable text"


def _reason_problems(e: _Entry, reason: Any) -> Iterator[tuple[str, str]]:
    if not isinstance(reason, Reason):
        yield f"reasons holds {reason!r}, not a Reason", "declare Reason(code, message)"
        return
    code, message = reason.code, reason.message
    if not isinstance(code, str) or not REASON_CODE_PATTERN.fullmatch(code):
        yield (f"reason code {code!r} is malformed",
               "use tool.<failure kind in lower case>.<code>, e.g. tool.not_found.no_such_path")
        return
    if code in HOST_MESSAGES:
        yield (f"reason code {code} is the host's own",
               "do not declare it: the host produces it with its own message")
    elif code.startswith(_HOST_KIND):
        # INTERNAL is the host's verdict on a call (an exception escaped, a row interrupted),
        # which the conformance suite fails on sight; a tool's own failure has a kind that
        # says what went wrong (D354). TIMEOUT and CANCELLED stay: an upstream times out.
        yield (f"reason code {code} is in the failure kind INTERNAL, which is the host's",
               "use the kind that says what failed, e.g. tool.upstream_unavailable.<code>; "
               "an exception that escapes is already tool.internal.unexpected")
    if not isinstance(message, str) or not message.strip() or PLACEHOLDER_PATTERN.search(message):
        yield (f"the message of {code} is empty or has a placeholder; messages are static",
               "write a fixed message that carries the remedy, never the input")
    elif not message.isprintable():
        # The message is what the model and the operator's terminal read: a newline, a
        # carriage return or an escape sequence in it is a second voice or a redrawn screen.
        yield (f"the message of {code} has a control character (a newline, tab, carriage "
               "return or escape) or other unprintable text",
               _MESSAGE_REMEDY)
    elif (why := not_text(message)) is not None:
        # A stray variation selector, which isprintable passes: the description's rule (D544).
        yield f"the message of {code} has {why}", _MESSAGE_REMEDY
    schema = e.spec.input_schema
    for rule in reason.schema_rules:
        sub = subschema_at(schema, rule.pointer) if isinstance(rule, SchemaRule) else None
        if not isinstance(sub, Mapping) or rule.keyword not in sub:
            yield (f"{code} maps schema rule {rule!r}, which the input schema does not have",
                   "name a property's JSON pointer (/expression) and a keyword set on it")


def _step_reasons(entries: Sequence[_Entry], _: Sequence[Contribution]) -> Problems:
    """Every reason declared once, static, not the host's; one message per code everywhere."""
    table: dict[str, tuple[str, str]] = {}
    for e in entries:
        reasons = e.tool.reasons
        if not isinstance(reasons, tuple):
            yield e.problem(Step.MESSAGE_TABLE, "reasons is not a tuple of Reason",
                            "declare reasons=(Reason(code, message), ...)")
            continue
        seen: set[str] = set()
        for reason in reasons:
            for problem, remedy in _reason_problems(e, reason):
                yield e.problem(Step.MESSAGE_TABLE, problem, remedy)
            code = getattr(reason, "code", None)
            if not isinstance(code, str):
                continue
            if code in seen:
                yield e.problem(Step.MESSAGE_TABLE, f"reason code {code} is declared twice",
                                "declare each reason once per tool")
            seen.add(code)
            earlier = table.get(code)
            if earlier is not None and earlier[1] != reason.message:
                yield e.problem(
                    Step.MESSAGE_TABLE,
                    f"reason code {code} already has a different message (from {earlier[0]})",
                    "use the same message for the same code, or a reason code of your own",
                )
            elif earlier is None:
                table[code] = (e.distribution, reason.message)


# ---------------------------------------------------------------------------- the whole check

_STEPS = (
    _step_name_grammar,
    _step_reserved_domains,
    _step_domain_membership,
    _step_uniqueness,
)
_LATER_STEPS = (_step_field_completeness, _step_forced_trust, _step_reasons)


def _check(
    contributions: Sequence[Contribution], cache: ValidatorCache | None = None,
    gateway: Contribution | None = None,
) -> tuple[list[RegistrationProblem], list[_Entry], dict[int, tuple[Validator, Validator]]]:
    entries = _entries(contributions, gateway)
    problems: list[RegistrationProblem] = []
    valid_specs = [e for e in entries if isinstance(e.tool.spec, ToolSpec)]
    if len(valid_specs) != len(entries):
        # Nothing can be said of a spec that is not a ToolSpec beyond that.
        problems += [e.problem(Step.FIELD_COMPLETENESS, "Tool.spec is not a ToolSpec",
                               "build the spec with toolhost.ToolSpec")
                     for e in entries if not isinstance(e.tool.spec, ToolSpec)]
        entries = valid_specs
    for step in _STEPS:
        problems += step(entries, contributions)
    validators: dict[int, tuple[Validator, Validator]] = {}
    problems += _step_schema_validity(entries, validators, cache)
    for later in _LATER_STEPS:
        problems += later(entries, contributions)
    problems.sort(key=lambda p: p.step)  # stable: within a step, registry order
    return problems, entries, validators


def registration_problems(contributions: Sequence[Contribution], *,
                          gateway: Contribution | None = None) -> list[RegistrationProblem]:
    """Every problem registration finds, in step order (the first is what startup refuses
    with). Empty when everything registers."""
    return _check(contributions, gateway=gateway)[0]


def register(
    contributions: Sequence[Contribution], *, cache: ValidatorCache | None = None,
    gateway: Contribution | None = None,
) -> tuple[list[Registered], dict[str, str]]:
    """Run the seven steps in order, then the reasons check. ``cache`` keeps the validators'
    generated code between starts (the host's data directory). ``gateway``: the host's own
    contribution of upstream MCP servers' tools, the only one that may use the reserved
    ``mcp`` domain (its tools' source must be MCP); it passes every other step as a plugin's.

    :return: every registration with its validators (compiled once, in step 5), and the
        message table (the host's messages and every tool's reasons).
    :raises RegistrationRefused: naming the first problem, in step order.
    """
    problems, entries, validators = _check(contributions, cache, gateway)
    if problems:
        raise RegistrationRefused(problems)
    table = dict(HOST_MESSAGES)
    registered = []
    for index, e in enumerate(entries):
        table.update({r.code: r.message for r in e.tool.reasons})
        validate_input, validate_output = validators[index]
        registered.append(Registered(
            spec=e.spec, tool=e.tool, distribution=e.distribution,
            validate_input=validate_input, validate_output=validate_output,
            schema_reasons={(rule.pointer, rule.keyword): r.code
                            for r in e.tool.reasons for rule in r.schema_rules},
            nested_defaults=defaults_below_top(e.spec.input_schema),
            integer_positions=integer_positions(e.spec.input_schema),
            definition=_definition(e.spec) if e.spec.source is Source.MCP else None,
        ))
    return registered, table


def _definition(spec: ToolSpec) -> str:
    """A digest of what a tool is besides its name and version: its input schema and its
    description, as the model and the person were shown them."""
    from toolhost._model.digest import canonical_json, sha256_digest

    return sha256_digest(canonical_json({"input_schema": spec.input_schema,
                                         "description": spec.description}))
