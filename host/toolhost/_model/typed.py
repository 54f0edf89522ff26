"""``toolhost.tool``: a Tool from an ordinary typed function.

The signature gives the closed input schema (``typed_schema``), the docstring the description,
the return annotation the output: an attrs class is a closed object (the content is its
``__str__`` when the class defines one, else the result's JSON), ``str`` is a text result
(``{"text": ...}``), and a body that returns ``ToolOutput`` itself states ``output_schema=``.
The safety fields are required keywords with no default: what a call may do is never
inferred. What comes out is an ordinary ``Tool`` with an ordinary ``ToolSpec``, so every
registration refusal and the conformance suite apply to it unchanged.

At a call the arguments reach the body already structured (cattrs, imported at the first call
that needs it, D296): attrs fields by their aliases, a whole-number float where an ``int`` is
annotated as an ``int``, a union's member picked as ``typed_schema.union_tag`` says, a field
left out of a union's branch given its default's JSON form as the validator fills one in
outside a union. A value the schema admitted but that does not structure (an attrs validator
refuses it, a number too large for a float) fails as ``tool.invalid_arguments.value_refused``,
cattrs' account of it in the operator detail. A parameter annotated ``ToolExecutionContext``
receives the call's context, and one annotated ``Services`` the host services (the Tool is
then built with them, once, like any ``build=`` factory). The decorated function stays
reachable as ``Tool.function``, to unit-test the body without a host.
"""

from __future__ import annotations

import functools
import inspect
import json
import re
import sys
import types
import typing
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from toolhost._model.spec import (
    Describe,
    Idempotency,
    Kind,
    Reason,
    Risk,
    SideEffect,
    Source,
    TargetKind,
    Tool,
    ToolSpec,
    Trust,
    UserWords,
)
from toolhost._model.typed_schema import (
    argument_default,
    closed_object,
    field_hints,
    hints_of,
    json_default,
    object_schema,
    schema_of,
    strip_annotated,
    union_members,
    union_tag,
    wire_name,
    with_default,
)

if TYPE_CHECKING:
    import cattrs

    from toolhost._model.context import Services, ToolExecutionContext
    from toolhost._model.outcome import ToolOutput

__all__ = ["TEXT_OUTPUT_SCHEMA", "tool"]

#: The output of a body that returns ``str``: the text, as ``structured["text"]`` and content.
TEXT_OUTPUT_SCHEMA: Mapping[str, Any] = object_schema({"text": {"type": "string"}}, ["text"])

_PASSED_AS_IS = frozenset({str, bool})


def tool(
    name: str,
    version: str,
    *,
    side_effect: SideEffect,
    risk: Risk,
    idempotency: Idempotency,
    output_trust: Trust,
    required_scopes: Iterable[str],
    timeout_s: float,
    maximum_output_bytes: int,
    reasons: Iterable[Reason],
    description: str | None = None,
    output_schema: Mapping[str, Any] | None = None,
    allow_parallel: bool | None = None,
    kind: Kind = Kind.CAPABILITY,
    source: Source = Source.BUILTIN,
    target_kind: TargetKind = TargetKind.IN_PROCESS,
    server_id: str | None = None,
    deprecated: bool = False,
    default_enabled: bool = True,
    checked_scopes: Iterable[str] = (),
    user_words: UserWords | None = None,
    always_requires_approval: bool = False,
    describe: Describe | str | None = None,
) -> Callable[[Callable[..., Any]], Tool]:
    """Declare the decorated function as the tool ``name@version``; the decorator returns the
    ``Tool`` (return it from ``toolhost_tools``).

    Every safety field is a required keyword (``reasons=()`` for a body with no failure of
    its own). ``description`` defaults to the docstring, its paragraphs kept and the lines
    within each joined; ``allow_parallel`` to whether the tool is READ_ONLY; the rest to a
    first-party in-process tool's values.
    """

    required = _scopes(required_scopes, "required_scopes")
    checked = _scopes(checked_scopes, "checked_scopes")
    declared = tuple(reasons)  # once: a generator would serve only the first function

    def decorate(function: Callable[..., Any]) -> Tool:
        plan = _Plan.of(function, output_schema)
        spec = ToolSpec.builtin(
            name, version,
            description=description if description is not None else _docstring(function),
            input_schema=plan.input_schema, output_schema=plan.output_schema,
            side_effect=side_effect, risk=risk, idempotency=idempotency,
            output_trust=output_trust, required_scopes=required,
            timeout_s=timeout_s, maximum_output_bytes=maximum_output_bytes,
            allow_parallel=allow_parallel, deprecated=deprecated,
        )
        if (kind, source, target_kind, server_id) != (spec.kind, spec.source, spec.target_kind,
                                                      spec.server_id):
            spec = attrs.evolve(spec, kind=kind, source=source, target_kind=target_kind,
                                server_id=server_id)
        extras: dict[str, Any] = {"reasons": declared, "default_enabled": default_enabled,
                                  "checked_scopes": checked, "user_words": user_words,
                                  "always_requires_approval": always_requires_approval,
                                  "describe": describe, "function": function}
        if plan.services is not None:
            return Tool(spec, build=plan.factory(function), **extras)
        return Tool(spec, call=plan.body(function, None), **extras)

    return decorate


def _scopes(scopes: Iterable[str], keyword: str) -> tuple[str, ...]:
    # A spec is byte-stable: a set has no order, and an iterator would serve one function only.
    if not isinstance(scopes, tuple | list) or not all(isinstance(s, str) for s in scopes):
        raise TypeError(f"{keyword}: scopes are a tuple of names: {keyword}=(\"demo.write\",), "
                        f"not {type(scopes).__name__}")
    return tuple(scopes)


def _docstring(function: Callable[..., Any]) -> str:
    text = inspect.getdoc(function)
    if not text:
        raise TypeError(f"{function.__qualname__}: a tool needs a description: write a "
                        "docstring, or pass description=")
    paragraphs = re.split(r"\n\s*\n", text.strip())
    return "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)


class _Plan:
    """What one decorated function needs at a call, worked out once at decoration. A plain
    class, like the tuples in ``parameters``: a class per plugin module load is startup."""

    __slots__ = ("context", "input_schema", "output_schema", "own_str", "parameters",
                 "returns", "services")

    def __init__(self, parameters: tuple[tuple[str, Any], ...], context: str | None,
                 services: str | None, input_schema: Mapping[str, Any],
                 output_schema: Mapping[str, Any], returns: str, own_str: bool) -> None:
        #: (name, what cattrs structures the argument to, or None for a value passed as is).
        self.parameters = parameters
        self.context = context
        self.services = services
        self.input_schema = input_schema
        self.output_schema = output_schema
        #: "text", "object" or "output": how a result becomes a ToolOutput.
        self.returns = returns
        self.own_str = own_str

    @classmethod
    def of(cls, function: Callable[..., Any], output_schema: Mapping[str, Any] | None) -> _Plan:
        from toolhost._model.context import Services, ToolExecutionContext

        where = function.__qualname__
        hints = hints_of(function)
        parameters: list[tuple[str, Any]] = []
        properties: dict[str, Any] = {}
        required: list[str] = []
        context = services = None
        for p in inspect.signature(function).parameters.values():
            if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
                raise TypeError(f"{where}: parameter {p.name!r} must be an ordinary named one "
                                "(no *args, **kwargs or positional-only)")
            if p.name not in hints:
                raise TypeError(f"{where}: parameter {p.name!r} has no annotation")
            hint = hints[p.name]
            if hint is ToolExecutionContext or hint is Services:
                # The host gives each to one parameter: a second would never be passed.
                given: str | None = context if hint is ToolExecutionContext else services
                if given is not None:
                    raise TypeError(f"{where}: parameters {given!r} and {p.name!r} are both "
                                    f"{hint.__name__}, which the host gives to one parameter; "
                                    "keep one")
                if hint is ToolExecutionContext:
                    context = p.name
                else:
                    services = p.name
                continue
            schema = schema_of(hint, f"{where}({p.name})")
            if p.default is p.empty:
                required.append(p.name)
            else:
                with_default(schema, p.default, f"{where}({p.name})")
            properties[p.name] = schema
            bare = strip_annotated(hint)
            parameters.append((p.name, None if bare in _PASSED_AS_IS else bare))
        returns, out_schema, own_str = _returns(hints.get("return"), output_schema, where)
        return cls(tuple(parameters), context, services, object_schema(properties, required),
                   out_schema, returns, own_str)

    def body(self, function: Callable[..., Any], services: Services | None) -> Callable[..., Any]:
        """The ToolCallable: structure the arguments, call, make the ToolOutput."""

        def arguments_of(arguments: Mapping[str, Any],
                         context: ToolExecutionContext) -> dict[str, Any]:
            kwargs: dict[str, Any] = {}
            for name, to in self.parameters:
                if name in arguments:
                    try:
                        kwargs[name] = _structure(arguments[name], to)
                    except Exception as exc:  # the schema admitted it; the value did not hold
                        raise _refused(name, exc) from None
            if self.context is not None:
                kwargs[self.context] = context
            if self.services is not None:
                kwargs[self.services] = services
            return kwargs

        if inspect.iscoroutinefunction(function):

            @functools.wraps(function)
            async def run_async(arguments: Mapping[str, Any],
                                context: ToolExecutionContext) -> ToolOutput:
                return self.output(await function(**arguments_of(arguments, context)))

            return run_async

        @functools.wraps(function)
        def run(arguments: Mapping[str, Any],
                context: ToolExecutionContext) -> ToolOutput | Awaitable[ToolOutput]:
            result = function(**arguments_of(arguments, context))
            if inspect.isawaitable(result):
                # A sync wrapper of an async def (functools.wraps over a coroutine function):
                # the pipeline awaits what a sync body returns, as for a hand-written one.
                return self._awaited(result)
            return self.output(result)

        return run

    async def _awaited(self, result: Awaitable[Any]) -> ToolOutput:
        return self.output(await result)

    def factory(self, function: Callable[..., Any]) -> Callable[[Services], Any]:
        def build(services: Services) -> Callable[..., Any]:
            return self.body(function, services)

        return build

    def output(self, result: Any) -> ToolOutput:
        from toolhost._model.outcome import ToolOutput

        if self.returns == "output":
            if not isinstance(result, ToolOutput):
                raise TypeError(f"the tool body returned {type(result).__name__}, not ToolOutput")
            return result
        if self.returns == "text":
            if not isinstance(result, str):
                raise TypeError(f"the tool body returned {type(result).__name__}, not str")
            text = str.__str__(result)  # exactly a str: a str Enum's member is its value
            return ToolOutput(structured={"text": text}, content=text)
        from toolhost._model import host_reasons
        from toolhost._model.outcome import ToolFailure

        structured = _converter().unstructure(result)
        try:
            content = json.dumps(structured, ensure_ascii=False, allow_nan=False)
        except ValueError as exc:  # no JSON carries it, so no output schema holds
            raise ToolFailure(host_reasons.OUTPUT_SCHEMA, detail={
                "problem": _unwritable(structured, exc)}) from None
        if self.own_str:  # exactly a str, whatever the class's __str__ returns
            return ToolOutput(structured=structured, content=str.__str__(str(result)))
        return ToolOutput(structured=structured, content=content)


def _unwritable(structured: Any, exc: ValueError) -> str:
    """Why a result has no JSON: NaN or an infinity (JSON has no word for them), or what else
    ``json`` refused (an integer past Python's digit limit for int-to-str conversion)."""
    try:
        json.dumps(structured, ensure_ascii=False, allow_nan=True)
    except ValueError:
        return f"the result cannot be written as JSON ({exc})"
    return "the result holds NaN or an infinity, which JSON cannot carry"


def _returns(hint: Any, explicit: Mapping[str, Any] | None,
             where: str) -> tuple[str, Mapping[str, Any], bool]:
    # Not imported to compare: a hint that is ToolOutput has loaded its module already.
    outcome = sys.modules.get("toolhost._model.outcome")
    if outcome is not None and hint is outcome.ToolOutput:
        if explicit is None:
            raise TypeError(f"{where}: a body that returns ToolOutput states its output "
                            "schema: pass output_schema=")
        return "output", explicit, False
    if explicit is not None:
        raise TypeError(f"{where}: output_schema= is for a body that returns ToolOutput; this "
                        "one's schema comes from its return annotation")
    if hint is str:
        return "text", TEXT_OUTPUT_SCHEMA, False
    if isinstance(hint, type) and attrs.has(hint):
        return ("object", closed_object(hint, f"{where} result", output=True),
                hint.__str__ is not object.__str__)
    raise TypeError(f"{where}: annotate the return as an attrs class, str, or ToolOutput "
                    "(with output_schema=)")


def _structure(value: Any, to: Any) -> Any:
    if to is None:
        return value
    if to is int:
        return _whole(value)
    if to is float:  # JSON's 1 is an int; the schema's number admits it
        return float(value)
    return _converter().structure(value, to)


def _whole(value: Any) -> int:
    # JSON Schema's integer admits 2.0; the body annotated int gets 2, at every depth.
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError(f"{value!r} is not a whole number")
        return int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{value!r} is not an integer")
    return value


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{value!r} is not a boolean")
    return value


def _refused(name: str, exc: Exception) -> Exception:
    from toolhost._model import host_reasons
    from toolhost._model.outcome import ToolFailure

    cattrs = sys.modules.get("cattrs")
    if cattrs is not None and isinstance(exc, cattrs.BaseValidationError):
        def explain(error: BaseException, to: Any) -> str:  # cattrs' words, and the error's
            return f"{cattrs.v.format_exception(error, to)} ({type(error).__name__}: {error})"

        problem = "; ".join(cattrs.transform_error(exc, path=name, format_exception=explain))
    else:
        problem = f"{name}: {type(exc).__name__}: {exc}"
    return ToolFailure(host_reasons.VALUE_REFUSED, detail={"problem": problem})


def _is_union(hint: Any) -> bool:
    return typing.get_origin(hint) in (types.UnionType, typing.Union)


def _wide_union(hint: Any) -> bool:
    """A union of two or more values (``T | None`` is cattrs' own)."""
    return _is_union(hint) and sum(
        member is not type(None) for member in typing.get_args(hint)) > 1


def _same(a: Any, b: Any) -> bool:
    return isinstance(a, bool) == isinstance(b, bool) and a == b


def _is_literal(hint: Any) -> bool:
    return typing.get_origin(hint) is typing.Literal


def _literal_structure(hint: Any) -> Callable[[Any, Any], Any]:
    """A Literal's own value for the JSON that equals it (``Literal[2]`` given ``2.0`` is 2)."""
    values = typing.get_args(hint)

    def structure(value: Any, _: Any) -> Any:
        for literal in values:
            if _same(value, literal):
                return literal
        raise ValueError(f"{value!r} is none of {values!r}")

    return structure


def _union_structure(union: Any, converter: cattrs.Converter) -> Callable[[Any, Any], Any]:
    """Structure a union the schema's ``anyOf`` admitted: a scalar or a Literal as it is (a
    whole float as an int where only an int fits, an int as a float where a float does), an
    object as the attrs class ``union_tag`` picks (checked at decoration, so it holds here).
    cattrs hands an attrs field's union over with its members' ``Annotated`` kept: the
    markers are the schema's, so the members are compared without them."""
    bare = strip_annotated(union)  # may leave one member: Annotated[int, A] | Annotated[int, B]
    members = typing.get_args(bare) if _is_union(bare) else (bare,)
    where = repr(bare)
    classes = union_members(tuple(m for m in members if m is not type(None)), where)
    tag, unique = union_tag(classes, where) if len(classes) > 1 else (None, {})
    by_tag: list[tuple[Any, type]] = []
    if tag is not None:
        for cls in classes:
            field = next(f for f in attrs.fields(cls) if wire_name(f) == tag)
            hint = strip_annotated(field_hints(cls, where)[field.name])
            by_tag += [(value, cls) for value in typing.get_args(hint)]
    literals = [v for m in members if typing.get_origin(m) is typing.Literal
                for v in typing.get_args(m)]
    plain = set(members)

    def pick(value: Mapping[str, Any]) -> type:
        if len(classes) == 1:
            return classes[0]
        if tag is not None:
            found = [cls for v, cls in by_tag if tag in value and _same(value[tag], v)]
        else:
            found = [cls for cls in classes if unique[cls] in value] or [
                cls for cls in classes if unique[cls] is None]
        if not found:
            raise ValueError(f"the object is none of {', '.join(c.__qualname__ for c in classes)}")
        return found[0]

    def structure(value: Any, _: Any) -> Any:
        for literal in literals:
            if _same(value, literal):
                return literal
        if value is None and type(None) in plain:
            return None
        if isinstance(value, bool):
            if bool in plain:
                return value
        elif isinstance(value, str):
            if str in plain:
                return value
        elif isinstance(value, int):
            if int in plain:
                return value
            if float in plain:
                return float(value)
        elif isinstance(value, float):
            if float in plain:
                return value
            if int in plain and value.is_integer():
                return int(value)
        elif isinstance(value, Mapping) and classes:
            return converter.structure(value, pick(value))
        raise ValueError(f"{value!r} is none of {where}")

    return structure


def _with_defaults(cls: type, structure: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """``structure``, each field the object leaves out given first as its default's JSON form,
    as the validator fills in a schema's defaults. Only a union's branch leaves one out (no
    default is written there): attrs would put in the default as written, and an ``int``
    field's ``2.0`` or an Enum field's ``"red"`` would reach the body as a float or a str,
    where outside a union it is ``2`` or the member."""
    where = cls.__qualname__
    defaults = {wire_name(f): json_default(d, where) for f in attrs.fields(cls) if f.init
                and (d := argument_default(f)) is not attrs.NOTHING}
    if not defaults:
        return structure

    def filled(value: Any, to: Any) -> Any:
        if isinstance(value, Mapping):
            missing = {name: d for name, d in defaults.items() if name not in value}
            if missing:
                value = {**value, **missing}
        return structure(value, to)

    return filled


@functools.cache
def _converter() -> cattrs.Converter:
    # Made at the first call that needs it (D296): loading a plugin never imports cattrs.
    import cattrs
    from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn

    converter = cattrs.Converter()
    converter.register_structure_hook(int, lambda value, _: _whole(value))
    # Its own hook: bool is a subclass of int, so the int hook above would otherwise take it.
    converter.register_structure_hook(bool, lambda value, _: _boolean(value))
    # Fields by their aliases, as the schema names them (cattrs >= 23.2); a result's
    # init=False fields are output too, as its schema says.
    converter.register_structure_hook_factory(attrs.has, lambda cls: _with_defaults(
        cls, make_dict_structure_fn(cls, converter, _cattrs_use_alias=True)))
    converter.register_unstructure_hook_factory(attrs.has, lambda cls: make_dict_unstructure_fn(
        cls, converter, _cattrs_use_alias=True, _cattrs_include_init_false=True))
    converter.register_structure_hook_factory(
        _wide_union, lambda union: _union_structure(union, converter))
    converter.register_structure_hook_factory(_is_literal, _literal_structure)
    return converter
