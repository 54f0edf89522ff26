"""Each negative fixture is refused at the right step, with the right message pieces.

Asserted twice: directly against the host (``Host.from_plugins``), and through the suite's
``registration`` check, which must fail with that one line and no traceback.
"""

from __future__ import annotations

import importlib

import pytest
from conftest import write_suite

from toolhost._host import Host
from toolhost._registration import RegistrationRefused, Step

#: (plugins {distribution: module}, step, pieces the one-line message must contain)
REFUSALS = {
    "mcp-domain": (
        {"fx-mcp-domain": "fx_mcp_domain"},
        Step.RESERVED_DOMAINS,
        ["step 2", "domain mcp", "distribution fx-mcp-domain", "reserved",
         "To fix: declare a domain other than mcp or device"],
    ),
    "mcp-tool": (
        {"fx-mcp-tool": "fx_mcp_tool"},
        Step.RESERVED_DOMAINS,
        ["step 2", "mcp.search@1.0.0", "distribution fx-mcp-tool", "To fix: rename the tool"],
    ),
    "shared-domain": (
        {"fx-shared-a": "fx_shared_a", "fx-shared-b": "fx_shared_b"},
        Step.DOMAIN_MEMBERSHIP,
        ["step 3", "domain shared", "distribution fx-shared-b",
         "already owned by distribution fx-shared-a", "To fix: each domain has exactly one owner"],
    ),
    "duplicate": (
        {"fx-duplicate": "fx_duplicate"},
        Step.UNIQUENESS,
        ["step 4", "dup.same@1.0.0", "distribution fx-duplicate", "already registered",
         "To fix: give the new registration a different version"],
    ),
    "open-schema": (
        {"fx-open-schema": "fx_open_schema"},
        Step.SCHEMA_VALIDITY,
        ["step 5", "open.nested@1.0.0", "distribution fx-open-schema", "input_schema",
         "/properties/options", "additionalProperties: false"],
    ),
    "sandbox-trusted": (
        {"fx-sandbox-trusted": "fx_sandbox_trusted"},
        Step.FORCED_TRUST,
        ["step 7", "box.run@1.0.0", "distribution fx-sandbox-trusted", "target_kind sandbox",
         "INTERNAL_TOOL", "To fix: set output_trust=Trust.EXTERNAL_UNTRUSTED"],
    ),
    "interpolating-message": (
        {"fx-interpolating": "fx_interpolating"},
        Step.MESSAGE_TABLE,
        ["message table check", "tool.not_found.no_such_text", "distribution fx-interpolating",
         "placeholder", "To fix: write a fixed message"],
    ),
}


def _plugins(modules: dict[str, str]) -> dict[str, object]:
    return {dist: importlib.import_module(module) for dist, module in modules.items()}


@pytest.mark.parametrize(("modules", "step", "pieces"), REFUSALS.values(), ids=REFUSALS.keys())
def test_the_host_refuses_at_the_right_step(
    modules: dict[str, str], step: Step, pieces: list[str]
) -> None:
    with pytest.raises(RegistrationRefused) as refused:
        Host.from_plugins(_plugins(modules))
    assert refused.value.step is step
    message = str(refused.value)
    assert "\n" not in message  # one line for an operator
    for piece in pieces:
        assert piece in message


@pytest.mark.parametrize(("modules", "step", "pieces"), REFUSALS.values(), ids=REFUSALS.keys())
def test_the_registration_check_fails_with_the_refusal_line(
    pytester: pytest.Pytester, modules: dict[str, str], step: Step, pieces: list[str]
) -> None:
    write_suite(pytester, modules)
    result = pytester.runpytest("-p", "no:cacheprovider", "-k", "registration")
    result.assert_outcomes(failed=1)
    refusal = next(line for line in result.outlines if "registration refused at" in line)
    for piece in pieces:
        assert piece in refusal
    assert "Traceback" not in result.stdout.str()


def test_the_suite_names_the_check_each_refusal_breaks(pytester: pytest.Pytester) -> None:
    # Beyond registration, the suite's own per-tool checks point at the same defect.
    write_suite(
        pytester,
        {"fx-open-schema": "fx_open_schema"},
        name="test_open",
    )
    write_suite(pytester, {"fx-sandbox-trusted": "fx_sandbox_trusted"}, name="test_box")
    write_suite(pytester, {"fx-interpolating": "fx_interpolating"}, name="test_interp")
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "-k", "schemas_closed or forced_trust or messages_static"
    )
    result.assert_outcomes(passed=6, failed=3)
    failed = {r.nodeid.split("::")[-1] for r in result.reprec.getfailures()}  # type: ignore[attr-defined]
    assert failed == {
        "test_schemas_closed[tool=open.nested@1.0.0]",
        "test_forced_trust[tool=box.run@1.0.0]",
        "test_messages_static[dist=fx-interpolating]",
    }
    result.stdout.fnmatch_lines(["*input_schema /properties/options: object schema must set*"])
    result.stdout.fnmatch_lines(["*placeholder '{text}'*"])


def test_a_refused_registration_fails_the_property_run_instead_of_skipping_it(
    pytester: pytest.Pytester,
) -> None:
    write_suite(pytester, {"fx-sandbox-trusted": "fx_sandbox_trusted"})
    result = pytester.runpytest("-p", "no:cacheprovider", "-k", "property_run", "-rs")
    # box.run is a sandbox tool: skipped for its classification, not run on a refused host.
    result.assert_outcomes(skipped=1)
    write_suite(pytester, {"fx-interpolating": "fx_interpolating"})
    result = pytester.runpytest("-p", "no:cacheprovider", "-k", "property_run")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*not run: registration refused at message table check*"])
