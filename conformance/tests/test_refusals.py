"""Each negative fixture is refused at the right step, with the right message pieces.

Asserted three times: directly against the host (``Harness.over`` builds it as startup
does), through the suite's ``registration`` check, which must fail with that line and no
traceback, and through the one per-tool or per-distribution check that reports the step.
"""

from __future__ import annotations

import importlib

import pytest
from conftest import write_suite

from toolhost.testing import Harness, RegistrationRefused
from toolhost.testing import RegistrationStep as Step

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
    "open-property": (
        {"fx-open-property": "fx_open_property"},
        Step.SCHEMA_VALIDITY,
        ["step 5", "anyvalue.echo@1.0.0", "distribution fx-open-property", "input_schema",
         "/properties/extra", "accepts any value; give the property a type"],
    ),
    "missing-field": (
        {"fx-missing-field": "fx_missing_field"},
        Step.FIELD_COMPLETENESS,
        ["step 6", "partial.echo@1.0.0", "distribution fx-missing-field",
         "ToolSpec field deprecated is missing", "To fix: set deprecated"],
    ),
    "parallel-writer": (
        {"fx-parallel": "fx_parallel"},
        Step.FIELD_COMPLETENESS,
        ["step 6", "parallel.append@1.0.0", "distribution fx-parallel",
         "allow_parallel is True but idempotency is NON_IDEMPOTENT",
         "To fix: set allow_parallel=False"],
    ),
    "interpolating-message": (
        {"fx-interpolating": "fx_interpolating"},
        Step.MESSAGE_TABLE,
        ["reasons check", "interp.find@1.0.0", "tool.not_found.no_such_text",
         "distribution fx-interpolating", "placeholder", "To fix: write a fixed message"],
    ),
    "user-trust": (
        {"fx-user-trust": "fx_user_trust"},
        Step.FORCED_TRUST,
        ["step 7", "usr.echo@1.0.0", "distribution fx-user-trust",
         "output_trust is USER, above INTERNAL_TOOL",
         "To fix: set output_trust=Trust.INTERNAL_TOOL"],
    ),
    "internal-reason": (
        {"fx-internal-reason": "fx_internal_reason"},
        Step.MESSAGE_TABLE,
        ["reasons check", "boom.echo@1.0.0", "distribution fx-internal-reason",
         "tool.internal.boom is in the failure kind INTERNAL, which is the host's"],
    ),
    "open-branch": (
        {"fx-open-branch": "fx_open_branch"},
        Step.SCHEMA_VALIDITY,
        ["step 5", "branch.echo@1.0.0", "distribution fx-open-branch", "output_schema",
         "/properties/text/anyOf/0", "accepts any value; give the branch a type"],
    ),
    "ref-to-unchecked": (
        {"fx-ref-hidden": "fx_ref_hidden"},
        Step.SCHEMA_VALIDITY,
        ["step 5", "hidden.echo@1.0.0", "distribution fx-ref-hidden", "input_schema",
         "/properties/options/$ref", "names a part of the schema step 5 does not check"],
    ),
    "keyword-beside-ref": (
        {"fx-ref-sibling": "fx_ref_sibling"},
        Step.SCHEMA_VALIDITY,
        ["step 5", "sibling.echo@1.0.0", "distribution fx-ref-sibling", "input_schema",
         "/properties/text: maxLength beside a $ref is never applied"],
    ),
    "control-writer": (
        {"fx-control-writer": "fx_control_writer"},
        Step.FIELD_COMPLETENESS,
        ["step 6", "steer.send@1.0.0", "distribution fx-control-writer",
         "a CONTROL tool has side_effect NONE and target_kind in_process",
         "To fix: set side_effect=SideEffect.NONE"],
    ),
    "description-control": (
        {"fx-description-control": "fx_description_control"},
        Step.FIELD_COMPLETENESS,
        ["step 6", "ctl.echo@1.0.0", "distribution fx-description-control",
         "description line 1 has U+001B, which does not print",
         "To fix: write the description as printable"],
    ),
}


def _plugins(modules: dict[str, str]) -> dict[str, object]:
    return {dist: importlib.import_module(module) for dist, module in modules.items()}


@pytest.mark.parametrize(("modules", "step", "pieces"), REFUSALS.values(), ids=REFUSALS.keys())
def test_the_host_refuses_at_the_right_step(
    modules: dict[str, str], step: Step, pieces: list[str]
) -> None:
    with pytest.raises(RegistrationRefused) as refused:
        Harness.over(_plugins(modules)).close()
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


#: The check (beside ``registration``) that reports each fixture's refusal, with its case id;
#: None where only ``registration`` does (steps 1-4, and step 6 but for allow_parallel).
REPORTED_BY = {
    "mcp-domain": None,
    "mcp-tool": None,
    "shared-domain": None,
    "duplicate": None,
    "open-schema": ["test_schemas_closed[tool=open.nested@1.0.0]"],
    "sandbox-trusted": ["test_forced_trust[tool=box.run@1.0.0]"],
    "open-property": ["test_schemas_closed[tool=anyvalue.echo@1.0.0]"],
    "missing-field": None,
    "parallel-writer": ["test_parallel_only_read_only[tool=parallel.append@1.0.0]"],
    "interpolating-message": [
        "test_messages_static[dist=fx-interpolating]",
        "test_reasons[tool=interp.find@1.0.0]",
    ],
    "user-trust": ["test_forced_trust[tool=usr.echo@1.0.0]"],
    "internal-reason": [
        "test_messages_static[dist=fx-internal-reason]",
        "test_reasons[tool=boom.echo@1.0.0]",
    ],
    "open-branch": ["test_schemas_closed[tool=branch.echo@1.0.0]"],
    "ref-to-unchecked": ["test_schemas_closed[tool=hidden.echo@1.0.0]"],
    "keyword-beside-ref": ["test_schemas_closed[tool=sibling.echo@1.0.0]"],
    "control-writer": None,
    "description-control": None,
}
#: Every check that reports a share of registration's problems, besides registration.
SHARE_CHECKS = (
    "schemas_closed or parallel_only_read_only or forced_trust or reasons or messages_static"
)


@pytest.mark.parametrize(("modules", "step", "pieces"), REFUSALS.values(), ids=REFUSALS.keys())
def test_the_check_that_owns_the_step_reports_the_same_problem(
    pytester: pytest.Pytester,
    request: pytest.FixtureRequest,
    modules: dict[str, str],
    step: Step,
    pieces: list[str],
) -> None:
    expected = REPORTED_BY[request.node.callspec.id]
    write_suite(pytester, modules)
    result = pytester.runpytest("-p", "no:cacheprovider", "-k", SHARE_CHECKS)
    failed = {r.nodeid.split("::")[-1] for r in result.reprec.getfailures()}  # type: ignore[attr-defined]
    assert failed == set(expected or ())
    if expected:
        # The registration problem itself, verbatim: the check has no rule of its own.
        refusal = next(line for line in result.outlines if "registration refused at" in line)
        for piece in pieces:
            assert piece in refusal


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
    result.stdout.fnmatch_lines(["*not run: registration refused at reasons check*"])
