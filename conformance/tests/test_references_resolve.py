"""``references_resolve``: a ``call=``/``build=``/``describe=`` reference that names nothing
fails the suite, though registration (which imports no body) lets it through."""

from __future__ import annotations

import pytest
from conftest import failed_ids, write_suite

from toolhost.testing import Harness

MISSING = {"fx-describe-missing": "fx_describe_missing"}


def test_registration_lets_the_references_through() -> None:
    import fx_describe_missing

    with Harness.over({"fx-describe-missing": fx_describe_missing}) as harness:
        assert {r.spec.name for r in harness.host.registry} == {"unnamed.echo", "unnamed.box"}


def test_a_reference_that_names_nothing_fails_with_a_line_naming_it(
    pytester: pytest.Pytester,
) -> None:
    write_suite(pytester, MISSING)
    result = pytester.runpytest("-p", "no:cacheprovider", "-k", "references_resolve")
    assert failed_ids(result) == {"test_references_resolve[tool=unnamed.echo@1.0.0]",
                                  "test_references_resolve[tool=unnamed.box@1.0.0]"}
    result.stdout.fnmatch_lines([
        "unnamed.echo@1.0.0 from fx-describe-missing: describe= "
        "'fx_describe_missing:no_such_describer' does not resolve: 'fx_describe_missing' has "
        "no 'no_such_describer'",
        "  define that name in that module, or name the one that exists*",
        "unnamed.box@1.0.0 from fx-describe-missing: build= "
        "'fx_describe_missing:no_such_factory' does not resolve: 'fx_describe_missing' has "
        "no 'no_such_factory'",
    ])
    assert "Traceback" not in result.stdout.str()


@pytest.mark.parametrize("plugins", [{"fx-references": "fx_references"}, {"fx-good": "fx_good"}],
                         ids=["references", "functions"])
def test_references_that_resolve_and_functions_pass(pytester: pytest.Pytester,
                                                    plugins: dict[str, str]) -> None:
    write_suite(pytester, plugins)
    result = pytester.runpytest("-p", "no:cacheprovider", "-k", "references_resolve")
    assert failed_ids(result) == set()
    assert result.ret == 0
