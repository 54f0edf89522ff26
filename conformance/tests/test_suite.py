"""The suite end to end, run with pytester on fixture plugins: what passes, what fails, how."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    FIXTURES,
    INSTALLABLE_GOOD,
    INSTALLABLE_MCP,
    failed_ids,
    install_fake_plugin,
    write_suite,
)

from toolhost import (
    FailureInfo,
    Outcome,
    OutcomeStatus,
    ToolFailureKind,
    ToolValidationError,
)
from toolhost.testing import Harness
from toolhost_conformance.suite import _check_outcome

NO_CACHE = ("-p", "no:cacheprovider")


# ---------------------------------------------------------------------------- a conforming plugin


def test_a_conforming_plugin_passes_every_check(pytester: pytest.Pytester) -> None:
    write_suite(pytester, {"fx-good": "fx_good"})
    result = pytester.runpytest(*NO_CACHE, "-rs")
    # 1 registration + 3 per distribution + 6 per tool x 6 tools; the sandbox tool's
    # property run is skipped for its classification, with the reason.
    result.assert_outcomes(passed=39, skipped=1)
    result.stdout.fnmatch_lines(
        ["*SKIPPED*target_kind sandbox: the property run invokes in-process tools only*"]
    )


def test_a_suite_that_adds_the_sandbox_target_runs_its_property_run(
        pytester: pytest.Pytester) -> None:
    # A team whose CI has the isolation its tool runs in opts in (toolhost-sandbox does).
    write_suite(pytester, {"fx-good": "fx_good"}, body="""
        from toolhost import TargetKind
        property_run_targets = frozenset({TargetKind.IN_PROCESS, TargetKind.SANDBOX})
    """)
    result = pytester.runpytest(*NO_CACHE, "-rs", "-k", "property_run and good.shell")
    result.assert_outcomes(passed=1)


def test_every_check_is_one_test_with_per_tool_ids(pytester: pytest.Pytester) -> None:
    write_suite(pytester, {"fx-good": "fx_good"})
    result = pytester.runpytest(*NO_CACHE, "--collect-only", "-q")
    result.stdout.fnmatch_lines(
        [
            "test_subject.py::TestConformance::test_registration",
            "test_subject.py::TestConformance::test_tools_registered[[]dist=fx-good[]]",
            "test_subject.py::TestConformance::test_messages_static[[]dist=fx-good[]]",
            "test_subject.py::TestConformance::test_no_ambient_reads[[]dist=fx-good[]]",
            "test_subject.py::TestConformance::test_reasons[[]tool=good.echo@1.0.0[]]",
            "test_subject.py::TestConformance::test_schemas_closed[[]tool=good.echo@2.0.0[]]",
            "test_subject.py::TestConformance::test_parallel_only_read_only[[]tool=good.stats@1.0.0[]]",
            "test_subject.py::TestConformance::test_forced_trust[[]tool=good.shell@1.0.0[]]",
            "test_subject.py::TestConformance::test_property_run[[]tool=good.clock@1.0.0[]]",
        ],
        consecutive=False,
    )


@pytest.mark.parametrize(
    ("expression", "count"),
    [("schemas_closed", 6), ("registration", 1), ("property_run and echo", 2),
     ("no_ambient_reads", 1), ("tools_registered", 1)],
)
def test_k_selects_checks(pytester: pytest.Pytester, expression: str, count: int) -> None:
    write_suite(pytester, {"fx-good": "fx_good"})
    result = pytester.runpytest(*NO_CACHE, "-k", expression)
    result.assert_outcomes(passed=count, deselected=40 - count)


def test_settings_turn_on_conditional_tools(pytester: pytest.Pytester) -> None:
    write_suite(pytester, {"fx-good": "fx_good"}, body='settings = {"GOOD_EXTRA_ENABLED": "1"}')
    result = pytester.runpytest(*NO_CACHE, "--collect-only", "-q", "-k", "schemas_closed")
    result.stdout.fnmatch_lines(["*test_schemas_closed[[]tool=good.extra@1.0.0[]]"])
    write_suite(pytester, {"fx-good": "fx_good"})
    result = pytester.runpytest(*NO_CACHE, "-k", "extra", "--toolhost-setting",
                                "GOOD_EXTRA_ENABLED=yes")
    result.assert_outcomes(passed=6)


def test_a_plugin_that_registers_no_tool_under_the_suites_settings_fails(
        pytester: pytest.Pytester) -> None:
    # Its tools are all conditional: without the setting every per-tool check would be
    # skipped and the run would pass having checked nothing.
    # Its own check, per distribution: registration itself accepts what it returns.
    write_suite(pytester, {"fx-conditional": "fx_conditional"})
    result = pytester.runpytest(*NO_CACHE)
    assert failed_ids(result) == {"test_tools_registered[dist=fx-conditional]"}
    result.assert_outcomes(passed=3, failed=1, skipped=6)
    result.stdout.fnmatch_lines([
        "*fx-conditional registers no tool under the suite's settings, so no tool of it is "
        "checked:",
        "*  COND_ENABLED registers cond.echo",
        "*turn its tools on with the suite's settings = {NAME: value} (or --toolhost-setting "
        "NAME=VALUE)",
    ])
    write_suite(pytester, {"fx-conditional": "fx_conditional"},
                body='settings = {"COND_ENABLED": "1"}')
    pytester.runpytest(*NO_CACHE).assert_outcomes(passed=10)


# ---------------------------------------------------------------------------- what it catches


def test_an_undeclared_reason_code_fails_the_property_run(pytester: pytest.Pytester) -> None:
    write_suite(pytester, {"fx-undeclared": "fx_undeclared"})
    result = pytester.runpytest(*NO_CACHE, "--toolhost-examples", "10")
    assert failed_ids(result) == {"test_property_run[tool=undeclared.find@1.0.0]"}
    result.assert_outcomes(passed=9, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*undeclared.find@1.0.0 with arguments * failed with "
            "tool.internal.undeclared_reason_code: the tool raised a reason code it did not "
            'declare. Operator detail: *"reason_code": "tool.not_found.nothing_here"*',
        ]
    )


def test_the_property_run_catches_what_registration_lets_through(
    pytester: pytest.Pytester,
) -> None:
    write_suite(pytester, {"fx-misbehaving": "fx_misbehaving"})
    result = pytester.runpytest(*NO_CACHE, "--toolhost-examples", "10")
    assert failed_ids(result) == {
        "test_property_run[tool=misbehaving.crash@1.0.0]",
        "test_property_run[tool=misbehaving.shape@1.0.0]",
    }
    result.assert_outcomes(passed=20, failed=2)
    output = result.stdout.str()
    assert "failed with tool.internal.unexpected: an exception escaped the tool body" in output
    assert '"exception": "KeyError"' in output
    assert "failed with tool.output_invalid.schema" in output


def test_a_workspace_refusal_of_a_schema_valid_path_is_an_accepted_outcome(
    pytester: pytest.Pytester,
) -> None:
    # Every path ws.peek's schema admits escapes the workspace or names nothing: pipeline
    # step 9's tool.invalid_arguments.schema (with a "workspace" detail) is a correct outcome.
    write_suite(pytester, {"fx-workspace": "fx_workspace"})
    result = pytester.runpytest(*NO_CACHE, "-k", "property_run", "--toolhost-derandomize")
    result.assert_outcomes(passed=1)


def test_the_registration_check_lists_every_problem(pytester: pytest.Pytester) -> None:
    write_suite(
        pytester,
        {"fx-open-property": "fx_open_property", "fx-parallel": "fx_parallel",
         "fx-sandbox-trusted": "fx_sandbox_trusted", "fx-interpolating": "fx_interpolating"},
    )
    result = pytester.runpytest(*NO_CACHE, "-k", "registration")
    result.assert_outcomes(failed=1)
    # The failure report only: under CI=true pytest's short test summary repeats the whole
    # message, which must not count twice.
    report = result.stdout.str().split("short test summary info", 1)[0].splitlines()
    refusals = [line.strip() for line in report if "registration refused at" in line]
    # In step order, each once, each in the line the host refuses with.
    assert [line.split(":")[0] for line in refusals] == [
        "registration refused at step 5 (schema validity)",
        "registration refused at step 6 (field completeness)",
        "registration refused at step 7 (forced trust)",
        "registration refused at reasons check (declared reasons)",
    ]
    assert "anyvalue.echo@1.0.0 from distribution fx-open-property" in refusals[0]
    assert "parallel.append@1.0.0 from distribution fx-parallel" in refusals[1]
    assert "box.run@1.0.0 from distribution fx-sandbox-trusted" in refusals[2]
    assert "interp.find@1.0.0 from distribution fx-interpolating" in refusals[3]
    result.stdout.fnmatch_lines(["*registration finds 4 problems in fx-open-property, "
                                 "fx-parallel, fx-sandbox-trusted, fx-interpolating*"])
    assert "Traceback" not in result.stdout.str()


def test_ambient_reads_fail_the_determinism_check(pytester: pytest.Pytester) -> None:
    write_suite(pytester, {"fx-ambient": "fx_ambient"})
    result = pytester.runpytest(*NO_CACHE, "-k", "no_ambient_reads")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*fx-ambient reads ambient time*", "*fx_ambient.py:16: time.time()"]
    )


def test_a_schema_the_generator_cannot_read_fails_loudly(pytester: pytest.Pytester) -> None:
    pytester.syspathinsert(FIXTURES)
    pytester.makepyfile(
        test_subject='''
        from fx_common import TEXT_OUT, echo_build, spec
        from toolhost import Domain, Tool, hookimpl
        from toolhost_conformance import ConformanceSuite

        class Host:
            @hookimpl
            def toolhost_domains(self):
                return [Domain("net")]

            @hookimpl
            def toolhost_tools(self, settings):
                schema = {"type": "object", "additionalProperties": False, "required": ["text"],
                          "properties": {"text": {"type": "string", "format": "hostname"}}}
                return [Tool(spec=spec("net.ping", input_schema=schema), build=echo_build)]

        class TestConformance(ConformanceSuite):
            plugins = {"fx-net": Host()}
        '''
    )
    result = pytester.runpytest(*NO_CACHE, "-k", "property_run")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*net.ping@1.0.0: the property run cannot generate arguments from input_schema: "
         "/properties/text/format: format 'hostname' is not supported*"]
    )


# ---------------------------------------------------------------------------- the property run

COUNTER = '''
import json
from fx_common import spec
from toolhost import Domain, SideEffect, Idempotency, Tool, ToolOutput, hookimpl
from toolhost_conformance import ConformanceSuite

class Counter:
    """Records every call's arguments in calls.jsonl (cwd is pytester's directory)."""

    def __init__(self, side_effect=SideEffect.NONE):
        self.side_effect = side_effect

    @hookimpl
    def toolhost_domains(self):
        return [Domain("count")]

    @hookimpl
    def toolhost_tools(self, settings):
        def build(services):
            def run(arguments, context):
                with open("calls.jsonl", "a") as f:
                    f.write(json.dumps({"args": arguments, "run": context.run_id}) + "\\n")
                return ToolOutput(structured={"text": arguments["text"]}, content="ok")
            return run
        extra = {}
        if self.side_effect is not SideEffect.NONE:
            extra = dict(idempotency=Idempotency.NON_IDEMPOTENT, allow_parallel=False)
        return [Tool(spec=spec("count.echo", side_effect=self.side_effect, **extra), build=build)]
'''


def _calls(pytester: pytest.Pytester) -> list[dict[str, object]]:
    path = Path(pytester.path, "calls.jsonl")
    calls = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    path.unlink(missing_ok=True)
    return calls


def _counter_suite(pytester: pytest.Pytester, body: str = "", plugin: str = "Counter()") -> None:
    pytester.syspathinsert(FIXTURES)
    source = COUNTER + textwrap.dedent(f'''
    class TestConformance(ConformanceSuite):
        plugins = {{"fx-count": {plugin}}}
    ''') + textwrap.indent(textwrap.dedent(body), "    ")
    pytester.makepyfile(test_subject=source)


def test_example_count_comes_from_the_option_then_the_class(pytester: pytest.Pytester) -> None:
    _counter_suite(pytester, body="max_examples = 4\n")
    pytester.runpytest(*NO_CACHE, "-k", "property_run").assert_outcomes(passed=1)
    assert 1 <= len(_calls(pytester)) <= 4
    pytester.runpytest(*NO_CACHE, "-k", "property_run", "--toolhost-examples", "30")
    assert 4 < len(_calls(pytester)) <= 30


def test_derandomized_runs_are_identical(pytester: pytest.Pytester) -> None:
    _counter_suite(pytester)
    args = (*NO_CACHE, "-k", "property_run", "--toolhost-derandomize", "--toolhost-examples", "15")
    pytester.runpytest(*args).assert_outcomes(passed=1)
    first = _calls(pytester)
    pytester.runpytest(*args).assert_outcomes(passed=1)
    assert first and _calls(pytester) == first
    # Edge values are in the mix: the empty string and the 16-character maximum.
    texts = {c["args"]["text"] for c in first}  # type: ignore[index]
    assert "" in texts or any(len(t) == 16 for t in texts)


def test_a_call_policy_pauses_is_approved_and_runs(pytester: pytest.Pytester) -> None:
    _counter_suite(pytester, plugin="Counter(SideEffect.EXTERNAL_WRITE)")
    result = pytester.runpytest(*NO_CACHE, "-k", "property_run", "--toolhost-examples", "5")
    result.assert_outcomes(passed=1)
    assert _calls(pytester)  # the body ran: approval reached it


def test_make_run_is_the_seam_for_context(pytester: pytest.Pytester) -> None:
    _counter_suite(
        pytester,
        body='''
        def make_run(self, host, spec):
            return host.start_run(enabled_tools=[spec.name], run_id="team-run")
        ''',
    )
    pytester.runpytest(*NO_CACHE, "-k", "property_run", "--toolhost-examples", "3")
    assert {c["run"] for c in _calls(pytester)} == {"team-run"}


# ---------------------------------------------------------------------------- naming the subject


def _install(pytester: pytest.Pytester) -> None:
    site = pytester.path / "site"
    install_fake_plugin(site, "fx-installed", "fx_installed", INSTALLABLE_GOOD)
    install_fake_plugin(site, "fx-installed-mcp", "fx_installed_mcp", INSTALLABLE_MCP)
    pytester.syspathinsert(site)


BARE_SUITE = """
from toolhost_conformance import ConformanceSuite

class TestConformance(ConformanceSuite):
    pass
"""


def test_distributions_from_the_option_and_only_those(pytester: pytest.Pytester) -> None:
    _install(pytester)
    pytester.makepyfile(test_subject=BARE_SUITE)
    # fx-installed-mcp is installed too, and would be refused; it is not loaded.
    result = pytester.runpytest(*NO_CACHE, "--toolhost-dist", "fx-installed")
    result.assert_outcomes(passed=10)
    result = pytester.runpytest(
        *NO_CACHE, "--toolhost-dist", "fx-installed", "--toolhost-dist", "fx-installed-mcp",
        "-k", "registration",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*registration refused at step 2*fx-installed-mcp*"])


def test_distributions_from_the_class_attribute(pytester: pytest.Pytester) -> None:
    _install(pytester)
    pytester.makepyfile(
        test_subject=BARE_SUITE.replace("pass", 'distributions = ("fx-installed",)')
    )
    pytester.runpytest(*NO_CACHE).assert_outcomes(passed=10)


def test_distributions_from_a_conftest_fixture(pytester: pytest.Pytester) -> None:
    _install(pytester)
    pytester.makeconftest(
        """
        import pytest

        @pytest.fixture(scope="session")
        def toolhost_distributions():
            return ("fx-installed",)
        """
    )
    pytester.makepyfile(test_subject=BARE_SUITE)
    pytester.runpytest(*NO_CACHE).assert_outcomes(passed=10)


def test_a_fixture_that_needs_other_fixtures_is_an_error(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        import pytest

        @pytest.fixture
        def toolhost_distributions(tmp_path):
            return ("fx-installed",)
        """
    )
    pytester.makepyfile(test_subject=BARE_SUITE)
    result = pytester.runpytest(*NO_CACHE)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*may request only pytestconfig (it requests tmp_path)*"])


def test_no_distributions_is_a_collection_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_subject=BARE_SUITE)
    result = pytester.runpytest(*NO_CACHE)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*TestConformance: no distributions under test*"])
    assert "Traceback" not in result.stdout.str()


def test_a_distribution_that_is_not_installed_fails_registration(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_subject=BARE_SUITE)
    result = pytester.runpytest(*NO_CACHE, "--toolhost-dist", "not-a-dist", "-rs")
    result.stdout.fnmatch_lines(
        ["*plugin not-a-dist: no toolhost.plugins entry point is installed for it*"]
    )
    # Nothing loaded, so nothing per tool to run (skipped, saying why), and whether it
    # registers a tool is unknown (a failure, not a pass); the distribution's modules cannot
    # be found either. messages_static passes: it contributed none.
    assert failed_ids(result) == {"test_registration", "test_no_ambient_reads[dist=not-a-dist]",
                                   "test_tools_registered[dist=not-a-dist]"}
    result.assert_outcomes(failed=3, passed=1, skipped=6)
    result.stdout.fnmatch_lines(["*SKIPPED*not loaded: plugin not-a-dist*"])
    result.stdout.fnmatch_lines(["*not-a-dist: no tool of it is checked: plugin not-a-dist: no "
                                 "toolhost.plugins entry point*"])


def test_a_hook_that_raises_fails_registration_in_one_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_subject='''
        from toolhost import Domain, hookimpl
        from toolhost_conformance import ConformanceSuite

        class Broken:
            @hookimpl
            def toolhost_domains(self):
                return [Domain("broken")]

            @hookimpl
            def toolhost_tools(self, settings):
                raise RuntimeError("credential store unreachable")

        class TestConformance(ConformanceSuite):
            plugins = {"fx-broken": Broken()}
        '''
    )
    result = pytester.runpytest(*NO_CACHE, "-k", "registration")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*plugin fx-broken: hook toolhost_tools raised RuntimeError: credential store "
         "unreachable (leave it out with TOOLHOST_PLUGINS, or fix and reinstall it)*"]
    )
    assert "Traceback" not in result.stdout.str()


# ---------------------------------------------------------------------------- the outcome rule


def _schema_failure(detail: dict[str, str]) -> tuple[Any, dict[str, str], Outcome]:
    import fx_workspace

    with Harness.over({"fx-workspace": fx_workspace}) as harness:
        registered = harness.host.registry.resolve("ws.peek", "1.0.0")
        table = dict(harness.host.messages)
    code = ToolValidationError.REASON_CODE
    failure = FailureInfo(kind=ToolFailureKind.INVALID_ARGUMENTS, reason_code=code,
                          message=table[code], retryable=False, detail=detail)
    outcome = Outcome(tool="ws.peek", version="1.0.0", status=OutcomeStatus.FAILED,
                      content=table[code], failure=failure)
    return registered, table, outcome


def test_the_schema_code_is_accepted_only_for_a_workspace_refusal() -> None:
    registered, table, outcome = _schema_failure({"workspace": "absolute path"})
    _check_outcome(registered, table, {"path": "/etc/passwd"}, outcome)  # step 9: accepted
    registered, table, outcome = _schema_failure({"problem": "'x' is not one of [...]"})
    with pytest.raises(AssertionError, match=(
        r"failed with tool.invalid_arguments.schema: the host rejected arguments generated "
        r"from input_schema\. Operator detail: .*is not one of"
    )):
        _check_outcome(registered, table, {"path": "x"}, outcome)


def test_a_tool_failing_with_its_own_timeout_or_cancellation_passes(
        pytester: pytest.Pytester) -> None:
    # Registration admits these kinds (an upstream times out), so the property run must too:
    # the suite and the host never disagree (D354). The host's INTERNAL kind is refused at
    # registration instead (test_refusals' internal-reason).
    write_suite(pytester, {"fx-upstream-timeout": "fx_upstream_timeout"},
                body="max_examples = 3")
    result = pytester.runpytest(*NO_CACHE, "-k", "property_run or reasons or registration")
    result.assert_outcomes(passed=5)
