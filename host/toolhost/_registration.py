"""Registration: the seven ordered refusals, then the message table.

Exactly the spec's steps 1-7, each run over every registered (name, version) before the next
begins, pure, with nothing else constructed (no tool is built). The first step that finds a
problem refuses, and the process does not start. A refusal names the step, the tool and
version, the distribution that contributed it, and what to change.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs

from toolhost._outcome import REASON_CODE_PATTERN
from toolhost._plugins import Contribution
from toolhost._schema import SchemaProblem, Validator, compile_schema, schema_problems
from toolhost._spec import (
    Idempotency,
    Kind,
    Risk,
    SideEffect,
    Source,
    TargetKind,
    Tool,
    ToolSpec,
    Trust,
)

__all__ = [
    "FORCED_TRUST_SOURCES",
    "FORCED_TRUST_TARGETS",
    "HARD_OUTPUT_CEILING",
    "MAX_NAME_LENGTH",
    "NAME_PATTERN",
    "PLACEHOLDER_PATTERN",
    "RESERVED_DOMAINS",
    "Registered",
    "RegistrationRefused",
    "Step",
    "register",
    "trust_is_forced",
]

#: Global output ceiling: past it a result is OUTPUT_TOO_LARGE (pipeline step 12).
HARD_OUTPUT_CEILING = 8 * 1024 * 1024
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
    #: Not one of the spec's seven: hard gate 9 checked at startup, after them.
    MESSAGE_TABLE = 8

    @property
    def title(self) -> str:
        return self.name.lower().replace("_", " ")


class RegistrationRefused(Exception):
    """The host refuses to start. ``str()`` is the one line an operator reads."""

    def __init__(
        self, step: Step, tool: str, distribution: str, problem: str, remedy: str
    ) -> None:
        label = f"step {step.value}" if step <= Step.FORCED_TRUST else "message table check"
        super().__init__(
            f"registration refused at {label} ({step.title}): {tool} from distribution "
            f"{distribution}: {problem}. To fix: {remedy}"
        )
        self.step = step
        self.tool = tool
        self.distribution = distribution
        self.problem = problem
        self.remedy = remedy


@attrs.frozen
class Registered:
    """A (name, version) that passed every step, with its validators compiled once."""

    spec: ToolSpec
    tool: Tool
    distribution: str
    validate_input: Validator
    validate_output: Validator


@attrs.frozen
class _Entry:
    tool: Tool
    distribution: str

    @property
    def spec(self) -> ToolSpec:
        return self.tool.spec

    @property
    def label(self) -> str:
        spec = self.tool.spec
        return f"{getattr(spec, 'name', '?')}@{getattr(spec, 'version', '?')}"


def _entries(contributions: Sequence[Contribution]) -> list[_Entry]:
    return [_Entry(tool, c.distribution) for c in contributions for tool in c.tools]


# ---------------------------------------------------------------------------- step 1


def _step_name_grammar(entries: Sequence[_Entry], _: Sequence[Contribution]) -> None:
    for e in entries:
        name, version = e.spec.name, e.spec.version
        if not isinstance(name, str) or not NAME_PATTERN.match(name):
            raise RegistrationRefused(
                Step.NAME_GRAMMAR, e.label, e.distribution,
                f"name {name!r} does not match {NAME_PATTERN.pattern}",
                "use a lower-case dotted name domain.tool, e.g. math.calculate",
            )
        if len(name) > MAX_NAME_LENGTH:
            raise RegistrationRefused(
                Step.NAME_GRAMMAR, e.label, e.distribution,
                f"name is {len(name)} characters, over {MAX_NAME_LENGTH}",
                f"shorten the name to at most {MAX_NAME_LENGTH} characters",
            )
        if not isinstance(version, str) or not VERSION_PATTERN.match(version):
            raise RegistrationRefused(
                Step.NAME_GRAMMAR, e.label, e.distribution,
                f"version {version!r} is not MAJOR.MINOR.PATCH",
                'use a semantic version such as "1.0.0"',
            )


# ---------------------------------------------------------------------------- step 2


def _step_reserved_domains(entries: Sequence[_Entry], contribs: Sequence[Contribution]) -> None:
    for c in contribs:
        for d in c.domains:
            if d.name in RESERVED_DOMAINS:
                raise RegistrationRefused(
                    Step.RESERVED_DOMAINS, f"domain {d.name}", c.distribution,
                    f"domain {d.name!r} is reserved for tools the host attaches itself",
                    "declare a domain other than mcp or device",
                )
    for e in entries:
        if e.spec.domain in RESERVED_DOMAINS:
            raise RegistrationRefused(
                Step.RESERVED_DOMAINS, e.label, e.distribution,
                f"domain {e.spec.domain!r} is reserved",
                "rename the tool into a domain your plugin declares (not mcp or device)",
            )


# ---------------------------------------------------------------------------- step 3


def _step_domain_membership(entries: Sequence[_Entry], contribs: Sequence[Contribution]) -> None:
    owner: dict[str, str] = {}
    for c in contribs:
        for d in c.domains:
            if d.name in owner and owner[d.name] != c.distribution:
                raise RegistrationRefused(
                    Step.DOMAIN_MEMBERSHIP, f"domain {d.name}", c.distribution,
                    f"domain {d.name!r} is already owned by distribution {owner[d.name]}",
                    "each domain has exactly one owner; pick another domain or merge plugins",
                )
            owner[d.name] = c.distribution
    for e in entries:
        if owner.get(e.spec.domain) != e.distribution:
            where = f"owned by {owner[e.spec.domain]}" if e.spec.domain in owner else "undeclared"
            raise RegistrationRefused(
                Step.DOMAIN_MEMBERSHIP, e.label, e.distribution,
                f"its domain {e.spec.domain!r} is not declared by this plugin ({where})",
                f"declare Domain({e.spec.domain!r}) in this plugin's toolhost_domains",
            )


# ---------------------------------------------------------------------------- step 4


def _step_uniqueness(entries: Sequence[_Entry], _: Sequence[Contribution]) -> None:
    seen: dict[tuple[str, str], str] = {}
    for e in entries:
        key = (e.spec.name, e.spec.version)
        if key in seen:
            raise RegistrationRefused(
                Step.UNIQUENESS, e.label, e.distribution,
                f"{e.label} is already registered (by {seen[key]})",
                "give the new registration a different version; duplicates are never renamed",
            )
        seen[key] = e.distribution


# ---------------------------------------------------------------------------- step 5


def _check_schema(e: _Entry, which: str, schema: Any, *, apply_defaults: bool) -> Validator:
    def refuse(problem: str) -> RegistrationRefused:
        return RegistrationRefused(
            Step.SCHEMA_VALIDITY, e.label, e.distribution, f"{which}: {problem}",
            "fix the schema at the pointer shown: close every object level with "
            "additionalProperties: false, keep $ref local, use draft-07-compatible keywords",
        )

    if not isinstance(schema, Mapping):
        raise refuse("a schema must be a JSON object")
    if schema.get("type") != "object":
        raise refuse('the top level must be {"type": "object"}')
    for problem in schema_problems(schema):
        raise refuse(str(problem))
    try:
        return compile_schema(schema, apply_defaults=apply_defaults)
    except SchemaProblem as exc:
        raise refuse(str(exc)) from None


def _step_schema_validity(
    entries: Sequence[_Entry], _: Sequence[Contribution]
) -> list[tuple[Validator, Validator]]:
    """Check and compile both schemas; the compiled validators are the ones the host keeps."""
    return [
        (
            _check_schema(e, "input_schema", e.spec.input_schema, apply_defaults=True),
            _check_schema(e, "output_schema", e.spec.output_schema, apply_defaults=False),
        )
        for e in entries
    ]


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


def _field_problems(spec: ToolSpec) -> Iterator[tuple[str, str]]:
    for field, enum_type in _ENUM_FIELDS:
        value = getattr(spec, field)
        if not isinstance(value, enum_type):
            yield (
                f"{field} is {value!r}, not a {enum_type.__name__} member",
                f"set {field} to a {enum_type.__name__} member, e.g. "
                f"{enum_type.__name__}.{next(iter(enum_type)).name}",
            )
    if not isinstance(spec.description, str) or not spec.description.strip():
        yield "description is empty", "describe what the tool does for the model"
    scopes = spec.required_scopes
    if not isinstance(scopes, tuple) or not all(isinstance(s, str) and s for s in scopes):
        yield "required_scopes is not a tuple of scope names", "use a tuple, () for none"
    timeout = spec.timeout_s
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        yield f"timeout_s is {timeout!r}", "set timeout_s to a positive number of seconds"
    limit = spec.maximum_output_bytes
    if isinstance(limit, bool) or not isinstance(limit, int) or not 0 < limit < HARD_OUTPUT_CEILING:
        yield (
            f"maximum_output_bytes is {limit!r}, not under the {HARD_OUTPUT_CEILING}-byte ceiling",
            f"set maximum_output_bytes to a positive integer under {HARD_OUTPUT_CEILING}",
        )
    for flag in ("allow_parallel", "deprecated"):
        if not isinstance(getattr(spec, flag), bool):
            yield f"{flag} is not a bool", f"set {flag} to True or False"
    if spec.source is Source.MCP:
        if not isinstance(spec.server_id, str) or not spec.server_id:
            yield "server_id is missing for an MCP tool", "set server_id to the MCP server's id"
    elif spec.server_id is not None:
        yield "server_id is set on a tool whose source is not MCP", "set server_id to None"


def _step_field_completeness(entries: Sequence[_Entry], _: Sequence[Contribution]) -> None:
    for e in entries:
        for problem, remedy in _field_problems(e.spec):
            raise RegistrationRefused(Step.FIELD_COMPLETENESS, e.label, e.distribution, problem, remedy)


# ---------------------------------------------------------------------------- step 7

FORCED_TRUST_SOURCES = frozenset({Source.MCP, Source.DEVICE})
FORCED_TRUST_TARGETS = frozenset({TargetKind.SANDBOX, TargetKind.DEVICE})


def trust_is_forced(spec: ToolSpec) -> bool:
    """Whether step 7 forces EXTERNAL_UNTRUSTED on this spec (the conformance suite asks too)."""
    return spec.source in FORCED_TRUST_SOURCES or spec.target_kind in FORCED_TRUST_TARGETS


def _step_forced_trust(entries: Sequence[_Entry], _: Sequence[Contribution]) -> None:
    # Hard gate 2 widened over target_kind: a builtin running in a sandbox returns bytes
    # produced by code we did not write, exactly what EXTERNAL_UNTRUSTED is for.
    for e in entries:
        spec = e.spec
        if trust_is_forced(spec) and spec.output_trust is not Trust.EXTERNAL_UNTRUSTED:
            raise RegistrationRefused(
                Step.FORCED_TRUST, e.label, e.distribution,
                f"source {spec.source.value} / target_kind {spec.target_kind.value} forces "
                f"output_trust EXTERNAL_UNTRUSTED, but it declares {spec.output_trust.value}",
                "set output_trust=Trust.EXTERNAL_UNTRUSTED",
            )


# ---------------------------------------------------------------------------- message table


def assemble_messages(contribs: Sequence[Contribution]) -> dict[str, str]:
    """One outcome message table from every plugin; a code has one owner and static text."""
    table: dict[str, str] = {}
    owner: dict[str, str] = {}
    for c in contribs:
        for code, message in c.messages.items():
            label = f"reason code {code}"
            if not REASON_CODE_PATTERN.match(code):
                raise RegistrationRefused(
                    Step.MESSAGE_TABLE, label, c.distribution, "malformed reason code",
                    "use tool.<failure kind in lower case>.<code>",
                )
            if code in table and table[code] != message:
                raise RegistrationRefused(
                    Step.MESSAGE_TABLE, label, c.distribution,
                    f"already has a different message from {owner[code]}",
                    "use a reason code of your own",
                )
            if not message.strip() or PLACEHOLDER_PATTERN.search(message):
                raise RegistrationRefused(
                    Step.MESSAGE_TABLE, label, c.distribution,
                    "its message is empty or has a placeholder; messages are static",
                    "write a fixed message that carries the remedy, never the input",
                )
            table[code] = message
            owner[code] = c.distribution
    return table


def _check_declared_codes(entries: Sequence[_Entry], table: Mapping[str, str]) -> None:
    for e in entries:
        codes = e.tool.reason_codes
        if not isinstance(codes, tuple):
            raise RegistrationRefused(
                Step.MESSAGE_TABLE, e.label, e.distribution, "reason_codes is not a tuple",
                "declare reason_codes as a tuple of reason codes",
            )
        for code in codes:
            if code not in table:
                raise RegistrationRefused(
                    Step.MESSAGE_TABLE, e.label, e.distribution,
                    f"declares reason code {code!r} with no message",
                    "return a static message for it from toolhost_messages",
                )


# ---------------------------------------------------------------------------- the whole check

def register(contributions: Sequence[Contribution]) -> tuple[list[Registered], dict[str, str]]:
    """Run the seven steps in order, then the message table check.

    :return: every registration with its validators (compiled once, in step 5), and the
        message table.
    :raises RegistrationRefused: at the first step that refuses.
    """
    entries = _entries(contributions)
    for e in entries:
        if not isinstance(e.tool.spec, ToolSpec):
            raise RegistrationRefused(
                Step.FIELD_COMPLETENESS, e.label, e.distribution, "Tool.spec is not a ToolSpec",
                "build the spec with toolhost.ToolSpec",
            )
    _step_name_grammar(entries, contributions)
    _step_reserved_domains(entries, contributions)
    _step_domain_membership(entries, contributions)
    _step_uniqueness(entries, contributions)
    validators = _step_schema_validity(entries, contributions)
    _step_field_completeness(entries, contributions)
    _step_forced_trust(entries, contributions)
    table = assemble_messages(contributions)
    _check_declared_codes(entries, table)
    registered = [
        Registered(
            spec=e.spec,
            tool=e.tool,
            distribution=e.distribution,
            validate_input=validate_input,
            validate_output=validate_output,
        )
        for e, (validate_input, validate_output) in zip(entries, validators, strict=True)
    ]
    return registered, table
