"""The tool specification model: the classification enums, ToolSpec, Domain, Reason and Tool.

Every field of ToolSpec is required (the spec has no optional fields), and registration step 6
is what says so: a spec built without a field holds ``MISSING`` there and is refused with the
field, the tool@version and the distribution named, rather than failing as a TypeError at
import time that names nobody. Step 6 also refuses classification fields that are strings
rather than enum members.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import attrs

if TYPE_CHECKING:
    from toolhost._model.context import Services, ToolCallable

#: ``Tool(describe=...)``: the arguments a call was recorded with, the tool's Services and the
#: principal the call was made for (whose data the body would read), to the lines an approval
#: shows of what the call will do.
Describe = Callable[[Mapping[str, Any], "Services", str], Sequence[str]]

__all__ = [
    "MISSING",
    "Domain",
    "Idempotency",
    "Kind",
    "Reason",
    "Risk",
    "SchemaRule",
    "SideEffect",
    "Source",
    "TargetKind",
    "Tool",
    "ToolSpec",
    "Trust",
]


class Kind(enum.Enum):
    CAPABILITY = "CAPABILITY"
    CONTROL = "CONTROL"


class Source(enum.Enum):
    BUILTIN = "BUILTIN"
    MCP = "MCP"
    DEVICE = "DEVICE"


class TargetKind(enum.Enum):
    IN_PROCESS = "in_process"
    SANDBOX = "sandbox"
    DEVICE = "device"


class SideEffect(enum.Enum):
    NONE = "NONE"
    WORKSPACE_READ = "WORKSPACE_READ"
    WORKSPACE_WRITE = "WORKSPACE_WRITE"
    CODE_EXECUTION = "CODE_EXECUTION"
    EXTERNAL_WRITE = "EXTERNAL_WRITE"


class Risk(enum.Enum):
    LOW = "LOW"
    MEDIUM = "MEDIUM"
    HIGH = "HIGH"


class Idempotency(enum.Enum):
    READ_ONLY = "READ_ONLY"
    IDEMPOTENT = "IDEMPOTENT"
    CONDITIONALLY_IDEMPOTENT = "CONDITIONALLY_IDEMPOTENT"
    NON_IDEMPOTENT = "NON_IDEMPOTENT"


class Trust(enum.Enum):
    """Output trust. ``rank`` orders them: USER > INTERNAL_TOOL > MEMORY > EXTERNAL_UNTRUSTED."""

    USER = "USER"
    INTERNAL_TOOL = "INTERNAL_TOOL"
    MEMORY = "MEMORY"
    EXTERNAL_UNTRUSTED = "EXTERNAL_UNTRUSTED"

    @property
    def rank(self) -> int:
        return _TRUST_RANK[self]

    @staticmethod
    def lower(a: Trust, b: Trust) -> Trust:
        """The less trusted of the two (trust may only be lowered, never raised)."""
        return a if a.rank <= b.rank else b


_TRUST_RANK = {
    Trust.EXTERNAL_UNTRUSTED: 0,
    Trust.MEMORY: 1,
    Trust.INTERNAL_TOOL: 2,
    Trust.USER: 3,
}


class _Missing:
    """The value of a ToolSpec field the plugin did not set (registration step 6 refuses it)."""

    _instance: _Missing | None = None

    def __new__(cls) -> _Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


#: Typed ``Any`` so a ToolSpec field can default to it; ``spec.field is MISSING`` tests it.
MISSING: Final[Any] = _Missing()


@attrs.frozen(kw_only=True)
class ToolSpec:
    """One registered (name, version): what the model sees and what policy sorts on.

    Fields are deliberately not validated here, and a field left out is ``MISSING`` rather
    than a constructor error: registration is the one place that refuses a bad spec, so that
    the refusal names the step, the tool and the distribution.
    """

    name: str = MISSING
    version: str = MISSING
    description: str = MISSING
    input_schema: Mapping[str, Any] = MISSING
    output_schema: Mapping[str, Any] = MISSING
    kind: Kind = MISSING
    source: Source = MISSING
    target_kind: TargetKind = MISSING
    server_id: str | None = MISSING
    side_effect: SideEffect = MISSING
    risk: Risk = MISSING
    idempotency: Idempotency = MISSING
    output_trust: Trust = MISSING
    required_scopes: tuple[str, ...] = MISSING
    timeout_s: float = MISSING
    maximum_output_bytes: int = MISSING
    allow_parallel: bool = MISSING
    deprecated: bool = MISSING

    @classmethod
    def builtin(
        cls,
        name: str,
        version: str,
        *,
        description: str,
        input_schema: Mapping[str, Any],
        output_schema: Mapping[str, Any],
        side_effect: SideEffect,
        risk: Risk,
        idempotency: Idempotency,
        output_trust: Trust,
        required_scopes: tuple[str, ...],
        timeout_s: float,
        maximum_output_bytes: int,
        allow_parallel: bool | None = None,
        deprecated: bool = False,
    ) -> ToolSpec:
        """A plugin's own tool, run in the host's process: ``kind`` CAPABILITY, ``source``
        BUILTIN, ``target_kind`` IN_PROCESS, no ``server_id``, not deprecated unless said;
        ``allow_parallel`` defaults to whether the tool is READ_ONLY. Every other field,
        each safety field included, is a required keyword: what a call may do is never
        defaulted. The result is an ordinary spec, refused or registered as any other."""
        return cls(
            name=name, version=version, description=description,
            input_schema=input_schema, output_schema=output_schema,
            kind=Kind.CAPABILITY, source=Source.BUILTIN, target_kind=TargetKind.IN_PROCESS,
            server_id=None, side_effect=side_effect, risk=risk, idempotency=idempotency,
            output_trust=output_trust, required_scopes=required_scopes, timeout_s=timeout_s,
            maximum_output_bytes=maximum_output_bytes,
            allow_parallel=(idempotency is Idempotency.READ_ONLY if allow_parallel is None
                            else allow_parallel),
            deprecated=deprecated)

    @property
    def domain(self) -> str:
        """The namespace before the first dot: ``math`` for ``math.calculate``."""
        return self.name.split(".", 1)[0] if isinstance(self.name, str) else ""

    @property
    def identity(self) -> str:
        """``name@version``, the form every refusal and log line uses."""
        return f"{self.name}@{self.version}"


@attrs.frozen
class Domain:
    """A namespace a plugin owns. Each domain has exactly one owning distribution."""

    name: str
    description: str = ""


@attrs.frozen
class SchemaRule:
    """One rule of a tool's own input schema: the keyword at a property of the arguments.

    ``pointer`` is a JSON pointer into the arguments (``/expression``; nested objects as
    ``/options/limit``); ``keyword`` is the schema keyword that failed there (``maxLength``).
    """

    pointer: str
    keyword: str


@attrs.frozen
class Reason:
    """A reason code a tool may end with, declared once with its static model-facing message.

    ``code`` reads ``tool.<failure kind in lower case>.<code>``; ``message`` is rendered to the
    model byte for byte, so it carries the remedy and never the input (no placeholders).
    ``schema_rules`` maps rules of the tool's own input schema to this code: a call that breaks
    one fails at pipeline step 4 with this reason instead of the host's generic schema failure
    (math.calculate: ``SchemaRule("/expression", "maxLength")`` is ``expression_too_long``).
    """

    code: str
    message: str
    schema_rules: tuple[SchemaRule, ...] = attrs.field(default=(), kw_only=True)

    @classmethod
    def from_table(
        cls, messages: Mapping[str, str], *codes: str,
        schema_rules: Mapping[str, Iterable[SchemaRule]] | None = None,
    ) -> tuple[Reason, ...]:
        """The Reasons of ``codes``, in that order, each with its message from ``messages``:
        the one way a plugin declares reasons. A plugin keeps one table, ``MESSAGES = {code:
        message}``, with each code a constant its bodies raise (``ToolFailure(CODE)``); each
        tool takes the codes it may end with. ``schema_rules`` maps a code to the input-schema
        rules that fail with it (``{TOO_LONG: [SchemaRule("/text", "maxLength")]}``); one map
        may serve every tool of the plugin: a code a tool does not take is skipped.
        """
        if not codes:
            raise ValueError("name the codes this tool may end with: from_table(MESSAGES, "
                             "CODE, ...); a tool with none passes reasons=()")
        if not all(isinstance(code, str) for code in codes):
            raise TypeError("codes are separate arguments: from_table(MESSAGES, *codes), not "
                            "one list")
        rules: dict[str, tuple[SchemaRule, ...]] = {}
        for code, listed in (schema_rules or {}).items():
            # One map serves every tool of the plugin: an iterator would serve the first only.
            if iter(listed) is listed:
                raise TypeError(f"schema_rules[{code!r}] is an iterator, read by the first "
                                "tool only: give a tuple or a list")
            rules[code] = tuple(listed)
        if unknown := sorted(set(rules) - set(messages)):
            raise ValueError(f"schema_rules name codes the table does not have: {unknown}")
        missing = [code for code in codes if code not in messages]
        if missing:
            raise ValueError(f"no message in the table for {missing}")
        return tuple(cls(code, messages[code], schema_rules=rules.get(code, ()))
                     for code in codes)


def _scope_tuple(scopes: Iterable[str]) -> tuple[str, ...]:
    # A spec is byte-stable (a set has no order) and a Tool may be read twice (an iterator).
    if not isinstance(scopes, tuple | list):
        raise TypeError(f"scopes and argument names are a tuple of strings, not "
                        f"{type(scopes).__name__}")
    return tuple(scopes)


@attrs.frozen
class UserWords:
    """String arguments whose value must be the person's own words: the one input at USER
    trust (``ToolExecutionContext.user_turn``), never text the model wrote.

    Where the run has a user turn (``toolhost call --user-turn TEXT``), the body checks these
    arguments against it. Where it has none, a host that can ask the person (an MCP client
    with form elicitation) shows ``prompt`` and the first argument's value to accept or edit;
    the person's text becomes every argument named here and the call's ``user_turn``. A host
    that cannot ask fails the call (``tool.permission_denied.needs_user``) without running it.
    ``prompt`` is static, like a reason's message: the host adds the tool and the value.
    """

    prompt: str
    arguments: tuple[str, ...] = attrs.field(converter=_scope_tuple)


def _references() -> Any:
    # Imported when a reference is first met: a plugin that passes functions never loads it.
    from toolhost._model import references

    return references


def _call_of(value: ToolCallable | str | None) -> ToolCallable | None:
    return _references().CallReference(value) if isinstance(value, str) else value


def _build_of(
    value: Callable[[Services], ToolCallable] | str | None,
) -> Callable[[Services], ToolCallable] | None:
    return _references().BuildReference(value) if isinstance(value, str) else value


def _describe_of(value: Describe | str | None) -> Describe | None:
    return _references().DescribeReference(value) if isinstance(value, str) else value


@attrs.frozen
class Tool:
    """What ``toolhost_tools`` returns: the spec, how to run it, and its reasons.

    How to run it is exactly one of ``call`` (the tool body itself, for a tool that needs no
    host service) and ``build`` (a factory ``build(services) -> body``, called once, after
    registration passed, never before). Either may be a reference, ``"package.module:name"``,
    imported when the host first builds the tool: loading the plugin then imports the spec and
    not the body (``toolhost check`` runs no body). ``toolhost.tool`` makes a Tool from a typed
    function. ``reasons`` declares every reason code the body may raise, each once, with its
    static message (``Reason.from_table``); codes the host produces (schema, timeout,
    cancelled, internal, ...) are the host's and are never declared by a plugin.
    ``default_enabled`` False keeps a registered tool out of the default roster (a run's
    explicit ``enabled_tools`` may still name it), as workspace.list_files is.
    ``checked_scopes`` are scopes the body itself requires of some calls only (media 1.1.0's
    references need ``artifact.read``; people.history 1.1.0's source read ``email.read``): not
    required to call the tool, but granted with the required ones wherever a host grants
    "what the tools need" (the CLI's operator, ``toolhost serve``'s default principal).
    ``user_words`` names the arguments that must be the person's own words (``UserWords``).
    ``always_requires_approval`` True makes every call wait for a person's approval, whatever
    the operator's policy loosened (the spec's email.unsubscribe); a denying policy still
    denies.
    ``describe`` (or a reference to it), ``describe(arguments, services, principal_id) ->
    lines``, says in a few lines what a call with these arguments, made for that principal,
    will do, read from data the plugin owns (never from the model's words): every approval
    surface shows them beside the arguments, so a person approving opaque ids
    (email.unsubscribe's) sees what they stand for. The host escapes and bounds the lines; a
    describer that raises shows one static line, never its exception.
    ``function`` is the function ``toolhost.tool`` decorated, as written (None for a Tool made
    by hand): call it in a unit test without a host.
    """

    spec: ToolSpec
    call: ToolCallable | None = attrs.field(default=None, kw_only=True, converter=_call_of)
    build: Callable[[Services], ToolCallable] | None = attrs.field(
        default=None, kw_only=True, converter=_build_of)
    reasons: tuple[Reason, ...] = attrs.field(default=(), kw_only=True)
    default_enabled: bool = attrs.field(default=True, kw_only=True)
    checked_scopes: tuple[str, ...] = attrs.field(
        default=(), kw_only=True, converter=_scope_tuple,
        validator=attrs.validators.deep_iterable(attrs.validators.instance_of(str)))
    user_words: UserWords | None = attrs.field(default=None, kw_only=True)
    always_requires_approval: bool = attrs.field(default=False, kw_only=True)
    describe: Describe | None = attrs.field(default=None, kw_only=True, converter=_describe_of)
    function: Callable[..., Any] | None = attrs.field(default=None, kw_only=True, eq=False,
                                                      repr=False)

    @property
    def scopes(self) -> frozenset[str]:
        """Every scope a call of this tool may need: required and checked."""
        return frozenset(self.spec.required_scopes) | frozenset(self.checked_scopes)

    @property
    def reason_codes(self) -> tuple[str, ...]:
        """Every declared reason code, in declaration order."""
        return tuple(r.code for r in self.reasons if isinstance(r, Reason))

    def callable_for(self, services: Services) -> ToolCallable:
        """The body the pipeline runs: ``call`` as given, or what ``build(services)`` returns."""
        if self.call is not None:
            # A reference hands over the function itself: the pipeline tells async from sync.
            call = self.call
            return call.resolve() if isinstance(call, _references().CallReference) else call
        if self.build is None:
            raise TypeError("a Tool needs call= or build=")
        return self.build(services)
