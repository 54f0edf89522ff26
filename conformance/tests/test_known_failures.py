"""Known failures: allowed only with a written reason, and then a strict xfail."""

from __future__ import annotations

import pytest
from conftest import failed_ids, write_suite

from toolhost_conformance import CHECKS, KnownFailureError
from toolhost_conformance._known import lookup, parse_option, validate

NO_CACHE = ("-p", "no:cacheprovider")


def test_a_known_failure_with_a_reason_is_a_strict_xfail(pytester: pytest.Pytester) -> None:
    write_suite(
        pytester,
        {"fx-parallel": "fx_parallel"},
        body='''
        known_failures = {
            "registration": "parallel appends land in 2.0; tracked in #12",
            "parallel_only_read_only": "the batch API needs it; tracked in #12",
            "property_run[tool=parallel.append@1.0.0]": "not run until registration passes",
            "test_property_run[tool=parallel.read@1.0.0]": "not run until registration passes",
        }
        ''',
    )
    result = pytester.runpytest(*NO_CACHE, "-rx", "--toolhost-examples", "5")
    # parallel_only_read_only passes for parallel.read: a check-wide entry is a strict xfail
    # for every case, so that one XPASSes and fails; per-case keys are the precise tool.
    result.assert_outcomes(passed=11, xfailed=4, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*XFAIL*test_registration*known failure: parallel appends land in 2.0*",
            "*XFAIL*test_parallel_only_read_only[[]tool=parallel.append@1.0.0[]]*"
            "known failure: the batch API needs it; tracked in #12*",
            "*XFAIL*parallel.append*known failure: not run until registration passes*",
        ],
        consecutive=False,
    )
    result.stdout.fnmatch_lines(["*[[]XPASS(strict)[]] known failure: the batch API*"])


def test_a_case_key_leaves_the_other_cases_alone(pytester: pytest.Pytester) -> None:
    write_suite(
        pytester,
        {"fx-parallel": "fx_parallel"},
        body='''
        known_failures = {
            "parallel_only_read_only[tool=parallel.append@1.0.0]": "tracked in #12",
        }
        ''',
    )
    result = pytester.runpytest(*NO_CACHE, "-k", "parallel_only_read_only")
    result.assert_outcomes(passed=1, xfailed=1)


#: A plugin whose tools hook raises: the host refuses to start with it.
CRASHING = """
from toolhost import Domain, hookimpl


@hookimpl
def toolhost_domains():
    return [Domain("crash")]


@hookimpl
def toolhost_tools(settings):
    raise RuntimeError("credential store unreachable")
"""


def test_a_known_failure_for_a_distribution_without_tools_hides_no_other_crash(
        pytester: pytest.Pytester) -> None:
    # The entry a team writes for a distribution that really ships no tool covers that
    # distribution's tools_registered alone: registration still fails for another's crash.
    body = 'known_failures = {"tools_registered[dist=fx-conditional]": "ships its tool with a key"}'
    write_suite(pytester, {"fx-good": "fx_good", "fx-conditional": "fx_conditional"}, body=body)
    result = pytester.runpytest(*NO_CACHE, "-k", "registration or tools_registered")
    result.assert_outcomes(passed=2, xfailed=1)
    assert result.ret == 0
    pytester.makepyfile(fx_crash=CRASHING)
    write_suite(pytester, {"fx-conditional": "fx_conditional", "fx-crash": "fx_crash"}, body=body)
    result = pytester.runpytest(*NO_CACHE)
    assert failed_ids(result) == {"test_registration", "test_tools_registered[dist=fx-crash]"}
    result.stdout.fnmatch_lines(
        ["*plugin fx-crash: hook toolhost_tools raised RuntimeError: credential store "
         "unreachable*"]
    )
    assert result.ret != 0


def test_the_command_line_option_is_the_same(pytester: pytest.Pytester) -> None:
    write_suite(pytester, {"fx-ambient": "fx_ambient"})
    result = pytester.runpytest(
        *NO_CACHE, "-k", "no_ambient_reads", "-rx",
        "--toolhost-known-failure", "no_ambient_reads=vendored timer, removal in #7",
    )
    result.assert_outcomes(xfailed=1)
    result.stdout.fnmatch_lines(["*known failure: vendored timer, removal in #7*"])


@pytest.mark.parametrize("value", ["no_ambient_reads", "no_ambient_reads=", "no_ambient_reads=  "])
def test_a_reasonless_option_is_a_usage_error(pytester: pytest.Pytester, value: str) -> None:
    write_suite(pytester, {"fx-ambient": "fx_ambient"})
    result = pytester.runpytest(*NO_CACHE, "--toolhost-known-failure", value)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*known failure 'no_ambient_reads' in --toolhost-known-failure "
                                 "has no reason*"])


@pytest.mark.parametrize("reason", ['""', '"   "', "None"])
def test_a_reasonless_class_entry_is_an_error(pytester: pytest.Pytester, reason: str) -> None:
    body = f"known_failures = {{'property_run': {reason}}}"
    write_suite(pytester, {"fx-good": "fx_good"}, body=body)
    result = pytester.runpytest(*NO_CACHE)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*known failure 'property_run' in TestConformance.known_failures has no reason*"]
    )
    assert "Traceback" not in result.stdout.str()


def test_an_entry_naming_no_check_is_an_error(pytester: pytest.Pytester) -> None:
    write_suite(pytester, {"fx-good": "fx_good"}, body="known_failures = {'propery_run': 'typo'}")
    result = pytester.runpytest(*NO_CACHE)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*known failure 'propery_run' in * names no check*"])


def test_an_entry_naming_a_renamed_check_names_the_new_one() -> None:
    with pytest.raises(KnownFailureError, match="reason_codes_have_messages, which is now reasons"):
        validate({"reason_codes_have_messages[tool=a.b@1.0.0]": "why"}, CHECKS, "here")
    assert validate({"reasons[tool=a.b@1.0.0]": "why"}, CHECKS, "here") == {
        "reasons[tool=a.b@1.0.0]": "why"
    }


# ---------------------------------------------------------------------------- the parser


def test_validate_canonicalizes_keys() -> None:
    entries = validate(
        {"test_property_run[tool=a.b@1.0.0]": " why ", "registration": "because"},
        CHECKS,
        "here",
    )
    assert entries == {"property_run[tool=a.b@1.0.0]": "why", "registration": "because"}


def test_lookup_prefers_the_case_entry() -> None:
    entries = {"property_run": "all", "property_run[tool=a.b@1.0.0]": "this one"}
    assert lookup(entries, "property_run", "tool=a.b@1.0.0") == "this one"
    assert lookup(entries, "property_run", "tool=c.d@1.0.0") == "all"
    assert lookup(entries, "registration", None) is None


def test_parse_option_keeps_a_missing_reason_for_validate_to_refuse() -> None:
    assert parse_option(["a=b=c", "d"]) == {"a": "b=c", "d": ""}
    with pytest.raises(KnownFailureError, match="has no reason"):
        validate(parse_option(["registration"]), CHECKS, "--toolhost-known-failure")
