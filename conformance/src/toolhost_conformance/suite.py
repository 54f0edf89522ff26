"""The conformance suite: an abstract test class a plugin team subclasses in a few lines.

::

    from toolhost_conformance import ConformanceSuite

    class TestConformance(ConformanceSuite):
        distributions = ("toolhost-math",)

Every check is one test method, selectable with ``pytest -k`` (``-k property_run``). Checks
that hold per tool are parametrized per registered (name, version), with ids like
``tool=math.calculate@1.0.0``; checks per distribution with ids like ``dist=toolhost-math``.
A spec's classification decides which checks apply: the property run invokes only the target
kinds in ``property_run_targets`` (``in_process`` unless a subclass adds one), and says so (a
skip with its reason) for the others.

Registration is the one source of its rules: ``registration`` reports every problem
``toolhost.testing.registration_problems`` finds, and ``schemas_closed``,
``parallel_only_read_only``, ``forced_trust``, ``reasons`` and ``messages_static`` each report
their share of that list (by step, tool and distribution). None of them re-implements a step.

The distributions under test come from, in order: the class's ``distributions`` and
``plugins`` attributes, else the ``toolhost_distributions`` fixture (``--toolhost-dist``, or a
conftest override). They are loaded at collection, because the per-tool parametrization is
what the plugins return.
"""

from __future__ import annotations

import asyncio
import copy
import datetime as _dt
import inspect
import json
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

import attrs
import fastjsonschema
import hypothesis
import pytest
from hypothesis import HealthCheck, given
from hypothesis.errors import HypothesisWarning

from toolhost import (
    Clock,
    Outcome,
    OutcomeStatus,
    Principal,
    Settings,
    TargetKind,
    ToolValidationError,
    Trust,
)
from toolhost.testing import DEFAULT_INSTANT, FixedClock, RegistrationStep
from toolhost_conformance import _known
from toolhost_conformance._subject import Subject, ToolUnderTest
from toolhost_conformance.ambient import find_ambient_reads
from toolhost_conformance.pytest_plugin import (
    DEFAULT_EXAMPLES,
    known_failures_from_options,
    settings_from_options,
)
from toolhost_conformance.strategies import UnsupportedSchema, from_schema

if TYPE_CHECKING:
    from toolhost import ToolSpec
    from toolhost.testing import Host, Registered, RegistrationProblem, Run

__all__ = ["CHECKS", "ConformanceSuite"]


#: What a host-owned code means when a property run meets it. These codes are the host's
#: model-facing contract (documented with the pipeline); a code missing here only loses its
#: explanation, not the check.
_HOST_CODES = {
    "tool.internal.unexpected": "an exception escaped the tool body (or its build)",
    "tool.internal.undeclared_reason_code": "the tool raised a reason code it did not declare",
    "tool.output_invalid.schema": "the tool returned output that does not match output_schema",
    ToolValidationError.REASON_CODE: "the host rejected arguments generated from input_schema",
    "tool.timeout.deadline": "the tool did not finish within its declared timeout_s",
    "tool.timeout.deadline_may_have_taken_effect": "the tool (not safe to repeat) did not "
    "finish within its declared timeout_s",
    "tool.output_too_large.hard_ceiling": "the output exceeded the host's 8 MiB ceiling",
    "tool.permission_denied.not_enabled": "the run did not enable the tool (make_run must "
    "enable it)",
    "tool.permission_denied.missing_scope": "the run lacks a required scope (make_run must "
    "grant it)",
    "tool.invalid_arguments.unknown_tool": "the host could not resolve the tool",
    "tool.invalid_arguments.unknown_version": "the host could not resolve the pinned version",
}
_APPROVER = "toolhost-conformance"


# ---------------------------------------------------------------------------- check registry


@attrs.frozen
class _Check:
    name: str
    per: str  # "run" (once), "dist" (per distribution) or "tool" (per registration)
    #: For a per-tool check: None if it applies to this spec under this suite class, else why
    #: not (a skip reason).
    applies: Callable[[Any, Any], str | None] | None = None


def _check(
    per: str, applies: Callable[[Any, Any], str | None] | None = None
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    def mark(fn: Callable[..., None]) -> Callable[..., None]:
        fn._toolhost_check = _Check(fn.__name__.removeprefix("test_"), per, applies)  # type: ignore[attr-defined]
        return fn

    return mark


def _property_run_target(spec: Any, suite: Any) -> str | None:
    target = getattr(spec, "target_kind", None)
    if isinstance(target, TargetKind) and target not in suite.property_run_targets:
        return (f"target_kind {target.value}: the property run invokes in-process tools only "
                f"(add it to property_run_targets to run generated arguments through it)")
    return None


def _fail(lines: Sequence[str]) -> NoReturn:
    __tracebackhide__ = True
    pytest.fail("\n".join(lines), pytrace=False)


def _report(
    subject: ToolUnderTest | str, what: str, problems: Sequence[RegistrationProblem]
) -> None:
    """Fail with registration's own problems, each in the line the host refuses with."""
    __tracebackhide__ = True
    if problems:
        who = subject if isinstance(subject, str) else (
            f"{subject.identity} from {subject.distribution}"
        )
        _fail([f"{who}: {what}:", *(f"  {p}" for p in problems)])


def _json(value: Any, limit: int = 600) -> str:
    try:
        text = json.dumps(value, ensure_ascii=True, sort_keys=True, default=repr)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


# ---------------------------------------------------------------------------- the suite


class ConformanceSuite:
    """The checks every toolhost plugin distribution must pass. Subclass it to run them.

    Class attributes a subclass sets (all optional but one of the first two, or
    ``--toolhost-dist``):

    ``distributions``
        Installed distribution names under test, e.g. ``("toolhost-math",)``. Only these are
        loaded, not every installed plugin.
    ``plugins``
        ``{distribution name: plugin object}`` for plugins that are not installed (a test's
        fixture module); registered as ``Host.from_plugins`` does.
    ``settings``
        The environment ``toolhost_tools(settings)`` sees, e.g.
        ``{"AGENT_EMAIL_MODE_ENABLED": "1"}``: the registry, not the roster, is what is checked,
        so turn on the conditional tools you ship. ``--toolhost-setting NAME=VALUE`` adds to it.
    ``known_failures``
        ``{"check": "reason"}`` or ``{"check[tool=x.y@1.0.0]": "reason"}``: a strict xfail with
        that reason. A reason-less entry is a collection error.
    ``max_examples`` / ``derandomize``
        Property-run examples per tool (default 50) and hypothesis derandomization; the
        ``--toolhost-examples`` / ``--toolhost-derandomize`` options override them.
    ``clock_at``
        The instant of the host's FixedClock.
    ``property_run_targets``
        The target kinds the property run invokes (default: ``in_process`` only). Generated
        arguments reach the tool's body for real, so a team adds another kind (``sandbox``)
        only where that body runs them in an isolation its CI has.

    Methods a subclass may override: ``make_run`` (the run, and so the context, a property-run
    invocation gets: e.g. a workspace for a workspace tool) and ``make_clock``.
    """

    distributions: ClassVar[Sequence[str]] = ()
    plugins: ClassVar[Mapping[str, object]] = {}
    settings: ClassVar[Mapping[str, str]] = {}
    known_failures: ClassVar[Mapping[str, str]] = {}
    max_examples: ClassVar[int | None] = None
    derandomize: ClassVar[bool | None] = None
    clock_at: ClassVar[_dt.datetime] = DEFAULT_INSTANT
    property_run_targets: ClassVar[frozenset[TargetKind]] = frozenset({TargetKind.IN_PROCESS})

    # ------------------------------------------------------------------ overridable seams

    @classmethod
    def make_clock(cls) -> Clock:
        """The host's clock: fixed, so a property run is a pure function of its arguments."""
        return FixedClock(cls.clock_at)

    def make_run(self, host: Host, spec: ToolSpec) -> Run:
        """The run each property-run invocation belongs to (called once per example).

        The default enables exactly this tool, grants exactly its ``required_scopes`` (so
        the pipeline's steps 2 and 3 pass and nothing else is granted) and has a fresh, empty
        workspace, discarded when the example ends. Override it to give a workspace tool a
        prepared one (``host.start_run(..., workspace=directory)``).

        :param host: the host under test.
        :param spec: the tool being invoked.
        :return: a ``toolhost.testing.Run``.
        """
        return host.start_run(
            principal=Principal("toolhost-conformance", frozenset(spec.required_scopes)),
            enabled_tools=[spec.name],
            run_id="conformance-run",
        )

    # ------------------------------------------------------------------ collection

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        """Parametrize each check by what the plugins under test return.

        A class-level hook (pytest calls it for this class's tests only), so the suite
        parametrizes itself even if the pytest11 plugin's own hooks are not loaded.
        """
        info: _Check | None = getattr(metafunc.function, "_toolhost_check", None)
        if info is None:
            return
        subject = _subject_for(metafunc)
        if info.per == "tool":
            metafunc.parametrize("toolhost_tool", _tool_params(subject, info, metafunc.cls))
        elif info.per == "dist":
            metafunc.parametrize(
                "toolhost_dist",
                [pytest.param(d, id=f"dist={d}") for d in subject.dist_names],
            )

    @pytest.fixture(autouse=True)
    def _toolhost_known_failure(self, request: pytest.FixtureRequest) -> None:
        # Applied at setup rather than collection so that the un-parametrized checks get it
        # too; pytest evaluates xfail marks again at call time when setup found none.
        info: _Check | None = getattr(request.function, "_toolhost_check", None)
        if info is None:
            return
        callspec = getattr(request.node, "callspec", None)
        entries = _known_failures(request.config, type(self))
        reason = _known.lookup(entries, info.name, callspec.id if callspec else None)
        if reason is not None:
            request.applymarker(
                pytest.mark.xfail(reason=f"known failure: {reason}", strict=True)
            )

    # ------------------------------------------------------------------ checks: the whole set
    #
    # Registration is the one source of the rules: every check below reports a share of the
    # problems ``registration_problems`` finds (by step, tool and distribution), in the line
    # the host refuses to start with. None re-implements a step.

    @_check("run")
    def test_registration(self, toolhost_subject: Subject) -> None:
        """Registration (the seven steps, then the reasons check) accepts everything the
        plugins return. A refusal lists every problem registration finds, not just the
        first one the host stops at."""
        problems = toolhost_subject.problems
        if problems:
            count = f"{len(problems)} problem{'s' if len(problems) != 1 else ''}"
            _fail(
                [
                    f"registration finds {count} in {toolhost_subject.label} (the host "
                    f"refuses to start at the first; fix them all):",
                    *(f"  {p}" for p in problems),
                ]
            )
        if toolhost_subject.host() is None:
            exc = toolhost_subject.refusal()
            line = toolhost_subject.refusal_line()
            if exc is not None and line and line.startswith("registration crashed"):
                raise AssertionError(line) from exc  # a crash deserves its traceback
            _fail([line or "registration refused"])

    # ------------------------------------------------------------------ checks: per distribution

    @_check("dist")
    def test_tools_registered(self, toolhost_subject: Subject, toolhost_dist: str) -> None:
        """The distribution registers at least one tool under the suite's settings: else
        every per-tool check of it is skipped and the run passes having checked nothing (a
        plugin whose tools are all conditional, tested without its setting). Per distribution,
        so a known failure for one that really ships no tool covers that one alone."""
        if any(tool.distribution == toolhost_dist for tool in toolhost_subject.tools):
            return
        if toolhost_subject.load_error is not None:
            # Unknown is not a pass: with ``registration`` a known failure, a plugin that
            # does not load must still fail here.
            _fail([f"{toolhost_dist}: no tool of it is checked: {toolhost_subject.load_error}"])
        host = toolhost_subject.host()
        declared = host.declared_settings if host is not None else {}
        activating = [spec for spec in declared.get(toolhost_dist, ()) if spec.activates]
        _fail([
            f"{toolhost_dist} registers no tool under the suite's settings, so no tool of it "
            "is checked" + (":" if activating else ""),
            *(f"  {spec.name} registers {', '.join(spec.activates)}" for spec in activating),
            "turn its tools on with the suite's settings = {NAME: value} (or "
            "--toolhost-setting NAME=VALUE)",
        ])

    @_check("dist")
    def test_messages_static(self, toolhost_subject: Subject, toolhost_dist: str) -> None:
        """Every Reason the distribution's tools declare is static text of its own: the
        reasons-check problems of its tools (a message is rendered byte for byte, so it
        carries the remedy, never the input)."""
        _report(
            toolhost_dist, "reasons whose messages are not static, or otherwise refused",
            toolhost_subject.problems_at(
                RegistrationStep.MESSAGE_TABLE, distribution=toolhost_dist
            ),
        )

    @_check("dist")
    def test_no_ambient_reads(self, toolhost_subject: Subject, toolhost_dist: str) -> None:
        """No module reads ambient time or makes ids: tools take the Clock from Services."""
        try:
            files = toolhost_subject.files(toolhost_dist)
        except Exception as exc:  # PackageNotFoundError, or a broken installation
            _fail([f"{toolhost_dist}: cannot locate its modules: {type(exc).__name__}: {exc}"])
        if not files:
            _fail([f"{toolhost_dist}: cannot locate any module of it to scan"])
        found = find_ambient_reads(files)
        if found:
            _fail(
                [
                    f"{toolhost_dist} reads ambient time or makes ids; take the Clock from "
                    f"Services (services.clock.now()) and ids from the arguments or context:",
                    *(f"  {line}" for line in found),
                ]
            )

    # ------------------------------------------------------------------ checks: per tool

    @_check("tool")
    def test_reasons(self, toolhost_subject: Subject, toolhost_tool: ToolUnderTest) -> None:
        """The tool's reasons pass registration's reasons check: each code well formed, not
        the host's, declared once, with one static message, and every schema rule it maps
        present in the input schema."""
        _report(
            toolhost_tool, "registration refuses its reasons",
            toolhost_subject.problems_at(RegistrationStep.MESSAGE_TABLE, tool=toolhost_tool),
        )

    @_check("tool")
    def test_schemas_closed(self, toolhost_subject: Subject, toolhost_tool: ToolUnderTest) -> None:
        """Both schemas pass step 5: objects, closed at every object level, every property
        and array item typed, $ref local, dialect-neutral, and they compile."""
        _report(
            toolhost_tool, "registration refuses its schemas (step 5)",
            toolhost_subject.problems_at(RegistrationStep.SCHEMA_VALIDITY, tool=toolhost_tool),
        )

    @_check("tool")
    def test_parallel_only_read_only(
        self, toolhost_subject: Subject, toolhost_tool: ToolUnderTest
    ) -> None:
        """allow_parallel only where idempotency is READ_ONLY: step 6's problems with the
        tool's allow_parallel."""
        _report(
            toolhost_tool, "registration refuses its allow_parallel (step 6)",
            [
                p for p in toolhost_subject.problems_at(
                    RegistrationStep.FIELD_COMPLETENESS, tool=toolhost_tool
                )
                if p.problem.startswith("allow_parallel ")
            ],
        )

    @_check("tool")
    def test_forced_trust(self, toolhost_subject: Subject, toolhost_tool: ToolUnderTest) -> None:
        """Sandbox/device targets and MCP/DEVICE sources declare EXTERNAL_UNTRUSTED (step 7)."""
        _report(
            toolhost_tool, "registration refuses its output_trust (step 7)",
            toolhost_subject.problems_at(RegistrationStep.FORCED_TRUST, tool=toolhost_tool),
        )

    @_check("tool")
    def test_references_resolve(self, toolhost_subject: Subject,
                                toolhost_tool: ToolUnderTest) -> None:
        """Every ``call=``, ``build=`` and ``describe=`` given as ``"package.module:name"``
        names a callable. The host imports it only when it first builds the tool, or (a
        describer) first shows an approval: a name that resolves to nothing would fail there,
        or show the approver the fallback line, not here. So this check imports each one."""
        lines = [
            f"{toolhost_tool.identity} from {toolhost_tool.distribution}: {which}= {problem}"
            for which, problem in _unresolved_references(toolhost_tool.tool)
        ]
        if lines:
            _fail([*lines, "  define that name in that module, or name the one that exists "
                           "('package.module:function')"])

    @_check("tool", applies=_property_run_target)
    def test_property_run(
        self, toolhost_subject: Subject, toolhost_tool: ToolUnderTest, pytestconfig: pytest.Config
    ) -> None:
        """Arguments generated from input_schema, invoked through the host's pipeline.

        Every outcome must be a success whose structured output is valid against
        output_schema, or a failure with a reason code the tool declared whose rendered
        message is its table entry byte for byte. A workspace tool's handle refusing a path
        the schema allows (pipeline step 9: ``tool.invalid_arguments.schema`` with a
        ``workspace`` detail) is such a failure too. ``tool.internal.*`` (an exception
        escaped, or an undeclared code) fails the check and shows the operator detail; an
        exception escaping the pipeline fails it too.
        """
        host = toolhost_subject.host()
        if host is None:
            _fail([f"not run: {toolhost_subject.refusal_line()}"])
        # Registration passed, so the spec is a complete ToolSpec; the host's registration of
        # it carries the validators compiled at step 5 (the property run uses no other).
        registered = host.registry.resolve(toolhost_tool.spec.name, toolhost_tool.spec.version)
        spec = registered.spec
        try:
            strategy = from_schema(spec.input_schema)
        except UnsupportedSchema as exc:
            _fail(
                [
                    f"{toolhost_tool.identity}: the property run cannot generate arguments "
                    f"from input_schema: {exc}",
                    "  (declare a known failure with the reason if the schema must keep it)",
                ]
            )
        examples, derandomize = _hypothesis_options(pytestconfig, type(self))

        def valid(arguments: Any) -> bool:
            # Keeps only arguments the host accepts: an approximated schema costs examples,
            # never a false failure (a poor approximation trips filter_too_much instead).
            try:
                registered.validate_input(copy.deepcopy(arguments))
            except fastjsonschema.JsonSchemaValueException:
                return False
            return True

        with asyncio.Runner() as runner:

            def invoke(arguments: dict[str, Any]) -> None:
                __tracebackhide__ = True
                try:
                    outcome = runner.run(self._invoke(host, spec, arguments))
                except Exception as exc:
                    raise AssertionError(
                        f"{toolhost_tool.identity}: an exception escaped the pipeline: "
                        f"{type(exc).__name__}: {exc}"
                    ) from exc
                _check_outcome(registered, host.messages, arguments, outcome)

            # Distinct example-database keys per tool: one inner function serves them all.
            invoke._hypothesis_internal_add_digest = toolhost_tool.identity.encode()  # type: ignore[attr-defined]
            # Derandomized runs replay nothing from the example database: same examples, always.
            database: dict[str, Any] = {"database": None} if derandomize else {}
            run = hypothesis.settings(
                max_examples=examples,
                deadline=None,
                derandomize=derandomize,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
                **database,
            )(given(strategy.filter(valid))(invoke))
            with warnings.catch_warnings():
                # A failing example at a 1 MiB maxLength edge makes hypothesis warn that its
                # repr is large; under a team's filterwarnings=error that would replace the
                # real failure with the warning.
                warnings.filterwarnings(
                    "ignore", message="Generating overly large repr", category=HypothesisWarning
                )
                run()

    async def _invoke(self, host: Host, spec: ToolSpec, arguments: Any) -> Outcome:
        """One call through the pipeline; a call policy pauses for approval is approved.

        Approval is the operator's decision, not the tool's behaviour: approving here is what
        lets the property run reach the body of an EXTERNAL_WRITE tool at all.
        """
        run = self.make_run(host, spec)
        words = host.registry.resolve(spec.name, spec.version).tool.user_words
        if words is not None and run.user_turn is None and isinstance(
                arguments.get(words.arguments[0]), str):
            # As a host that asks the person does: their answer (here, the value generated for
            # the first named argument) is every named argument and the call's user turn.
            answer = arguments[words.arguments[0]]
            arguments = {**arguments, **dict.fromkeys(words.arguments, answer)}
            run = attrs.evolve(run, user_turn=answer)
        try:
            outcome = await host.invoke(spec.name, arguments, version=spec.version, run=run)
            if outcome.status is OutcomeStatus.AWAITING_APPROVAL and outcome.invocation_id:
                outcome = await host.pipeline.approve(outcome.invocation_id, _APPROVER)
        finally:
            # Each example's run ends, so its workspace (a fresh one by default) is discarded.
            host.end_run(run)
        return outcome


# ---------------------------------------------------------------------------- references


def _unresolved_references(tool: Any) -> list[tuple[str, str]]:
    """(keyword, why) for each reference of the tool that names nothing.
    A reference is told by its shape (its text and ``resolve``): the host's type for it is
    not part of the kit the suite runs on, and a function has neither."""
    found = []
    for which in ("call", "build", "describe"):
        value = getattr(tool, which, None)
        text, resolve = getattr(value, "text", None), getattr(value, "resolve", None)
        if not isinstance(text, str) or not callable(resolve):
            continue
        try:
            resolve()
        except Exception as exc:  # the module's own import error too: the host would meet it
            said = str(exc)  # the host's own error names the reference already
            found.append((which, said if text in said else
                          f"{text!r} does not resolve: {type(exc).__name__}: {said}"))
    return found


# ---------------------------------------------------------------------------- outcome check


def _structured_problems(registered: Registered, structured: Any) -> list[str]:
    """Checked again here, independently of the pipeline's step 10: the structured output must
    be JSON (what reaches the model) and valid against output_schema (the validator the host
    compiled at registration)."""
    try:
        data = json.loads(json.dumps(structured, allow_nan=False))
    except (TypeError, ValueError) as exc:
        return [f"structured output is not JSON: {exc}"]
    try:
        registered.validate_output(data)
    except fastjsonschema.JsonSchemaValueException as exc:
        return [f"structured output does not match output_schema: {exc.message}"]
    return []


def _workspace_refusal(code: str, detail: Mapping[str, Any]) -> bool:
    """Pipeline step 9: the run's workspace handle refused a path the input schema allows
    (an escape, say), which the host reports as its validation failure with the handle's
    reason under ``workspace``. A correct outcome for a workspace tool, not a host rejection
    of the generated arguments."""
    return code == ToolValidationError.REASON_CODE and "workspace" in detail


def _check_outcome(
    registered: Registered, table: Mapping[str, str], arguments: Any, outcome: Outcome
) -> None:
    __tracebackhide__ = True
    spec = registered.spec
    where = f"{spec.identity} with arguments {_json(arguments)}"
    if not isinstance(outcome, Outcome):
        raise AssertionError(f"{where}: the pipeline returned {type(outcome).__name__}")
    if outcome.status is OutcomeStatus.DENIED:
        raise AssertionError(
            f"{where}: policy denied the call (decision {_json(outcome.decision)}), so the "
            f"property run cannot reach the tool; loosen the suite's settings or declare a "
            f"known failure"
        )
    if outcome.ok:
        problems = []
        if not isinstance(outcome.content, str):
            problems.append("content is not text")
        if outcome.version != spec.version:
            problems.append(f"ran version {outcome.version}, not the pinned {spec.version}")
        if outcome.truncated:
            # Over maximum_output_bytes the host withholds structured (it validated it at
            # step 10) and hands the model an excerpt plus the whole as an artifact.
            if not outcome.artifacts:
                problems.append("truncated, but no artifact holds the whole output")
        else:
            problems += _structured_problems(registered, outcome.structured)
        trust = outcome.output_trust
        if isinstance(trust, Trust) and trust.rank > spec.output_trust.rank:
            problems.append(
                f"output_trust {trust.name} is above the declared {spec.output_trust.name}"
            )
        if problems:
            raise AssertionError(
                f"{where} succeeded, but: {'; '.join(problems)} "
                f"(structured: {_json(outcome.structured)})"
            )
        return
    if outcome.status is not OutcomeStatus.FAILED:
        raise AssertionError(f"{where}: ended {outcome.status.value}, neither succeeded nor failed")
    failure = outcome.failure
    if failure is None:
        raise AssertionError(f"{where}: a failed outcome without failure information")
    code = failure.reason_code
    declared = code in registered.tool.reason_codes and not code.startswith("tool.internal.")
    if not declared and not _workspace_refusal(code, failure.detail):
        meaning = _HOST_CODES.get(code) or (
            "a failure the host produced" if code in table
            else "a reason code the tool did not declare"
        )
        raise AssertionError(
            f"{where} failed with {code}: {meaning}. Operator detail: {_json(failure.detail)}"
        )
    expected = table.get(code)
    if outcome.content != expected or failure.message != expected:
        raise AssertionError(
            f"{where} failed with {code}, but the rendered message {outcome.content!r} is not "
            f"its table entry {expected!r} byte for byte"
        )


# ---------------------------------------------------------------------------- collection helpers

_SUBJECTS = pytest.StashKey[dict[type, Subject]]()
_KNOWN = pytest.StashKey[dict[type, dict[str, str]]]()


def _subjects(config: pytest.Config) -> dict[type, Subject]:
    return config.stash.setdefault(_SUBJECTS, {})


def _known_failures(config: pytest.Config, cls: type[ConformanceSuite]) -> dict[str, str]:
    """The class's entries, then the command line's (which win), validated once per class."""
    cache = config.stash.setdefault(_KNOWN, {})
    if cls not in cache:
        entries = _known.validate(
            dict(cls.known_failures), CHECKS, f"{cls.__qualname__}.known_failures"
        )
        entries.update(known_failures_from_options(config))
        cache[cls] = entries
    return cache[cls]


def _settings(config: pytest.Config, cls: type[ConformanceSuite]) -> Settings:
    return Settings(env={**dict(cls.settings), **settings_from_options(config)})


def _load_subject(
    config: pytest.Config, cls: type[ConformanceSuite], names: Sequence[str]
) -> Subject:
    distributions = cls.distributions
    if isinstance(distributions, str):  # ("toolhost-math") without the comma
        distributions = (distributions,)
    from_class = bool(distributions) or bool(cls.plugins)
    subject = Subject(
        distributions=tuple(distributions) if from_class else tuple(names),
        plugins=cls.plugins if from_class else {},
        settings=_settings(config, cls),
        clock=cls.make_clock(),
        origin="class" if from_class else "fixture",
    )
    _subjects(config)[cls] = subject
    return subject


def subject_for_class(
    config: pytest.Config, cls: type[ConformanceSuite], names: Sequence[str]
) -> Subject:
    """The subject collected for ``cls`` (loaded now if collection did not), checked against
    the ``toolhost_distributions`` value the fixture has at run time."""
    subject = _subjects(config).get(cls)
    if subject is None:
        subject = _load_subject(config, cls, tuple(names))
    if subject.origin == "fixture" and tuple(names) != subject.distributions:
        pytest.fail(
            f"toolhost_distributions is {tuple(names)!r} now but was "
            f"{subject.distributions!r} at collection; it must not depend on other fixtures",
            pytrace=False,
        )
    return subject


def _subject_for(metafunc: pytest.Metafunc) -> Subject:
    cls = metafunc.cls
    assert cls is not None and issubclass(cls, ConformanceSuite)
    try:
        _known_failures(metafunc.config, cls)  # a reason-less entry stops collection here
    except _known.KnownFailureError as exc:
        raise pytest.Collector.CollectError(str(exc)) from None
    subject = _subjects(metafunc.config).get(cls)
    if subject is None:
        names: tuple[str, ...] = ()
        if not cls.distributions and not cls.plugins:
            names = _distributions_at_collection(metafunc)
            if not names:
                raise pytest.Collector.CollectError(
                    f"{cls.__qualname__}: no distributions under test; set distributions = "
                    f'("your-dist",) on the class, or pass --toolhost-dist NAME'
                )
        subject = _load_subject(metafunc.config, cls, names)
    return subject


def _distributions_at_collection(metafunc: pytest.Metafunc) -> tuple[str, ...]:
    """The ``toolhost_distributions`` fixture's value, evaluated at collection time.

    Per-tool parametrization needs the names before any fixture runs, so the closest
    definition of the fixture (a conftest override, or the plugin's default) is called here
    directly. It may request only ``pytestconfig``. pytest has no public API for a test's
    fixture definitions; ``Metafunc._arg2fixturedefs`` has been stable since pytest 3, and
    without it the command-line option is used.
    """
    config = metafunc.config
    defs = getattr(metafunc, "_arg2fixturedefs", {}).get("toolhost_distributions")
    if not defs:
        return tuple(config.getoption("toolhost_dists", None) or ())
    fixturedef = defs[-1]
    unsupported = [a for a in fixturedef.argnames if a != "pytestconfig"]
    if unsupported:
        raise pytest.Collector.CollectError(
            f"the toolhost_distributions fixture may request only pytestconfig (it requests "
            f"{', '.join(unsupported)}): the suite evaluates it at collection time"
        )
    value = fixturedef.func(**{a: config for a in fixturedef.argnames})
    if inspect.isgenerator(value):
        generator, value = value, next(value)
        generator.close()
    if isinstance(value, str):
        value = (value,)
    return tuple(value)


def _tool_params(subject: Subject, info: _Check, suite: Any) -> list[Any]:
    tools = subject.tools
    if not tools:
        why = f"not loaded: {subject.load_error}" if subject.load_error else "no tools registered"
        return [pytest.param(None, id="tool=none", marks=pytest.mark.skip(reason=why))]
    params = []
    for tool in tools:
        reason = info.applies(tool.spec, suite) if info.applies else None
        marks = [pytest.mark.skip(reason=reason)] if reason else []
        params.append(pytest.param(tool, id=f"tool={tool.identity}", marks=marks))
    return params


def _hypothesis_options(config: pytest.Config, cls: type[ConformanceSuite]) -> tuple[int, bool]:
    """Examples per tool and derandomization: the command line, else the class, else defaults."""
    examples = config.getoption("toolhost_examples", None)
    if examples is None:
        examples = cls.max_examples if cls.max_examples is not None else DEFAULT_EXAMPLES
    derandomize = bool(config.getoption("toolhost_derandomize", False))
    if not derandomize and cls.derandomize is not None:
        derandomize = cls.derandomize
    return int(examples), derandomize

#: Every check's name, as ``-k`` and ``known_failures`` spell it.
CHECKS = tuple(
    fn._toolhost_check.name
    for fn in vars(ConformanceSuite).values()
    if callable(fn) and hasattr(fn, "_toolhost_check")
)
