"""The pytest11 plugin: the suite's command-line options and the distributions fixture.

Installed with toolhost-conformance and loaded by pytest automatically (entry point
``toolhost_conformance``; with ``PYTEST_DISABLE_PLUGIN_AUTOLOAD`` set, pass
``-p toolhost_conformance``). It imports nothing of the suite itself, so a pytest run that uses
no ConformanceSuite pays for five options and two fixtures.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import pytest

from toolhost_conformance import _known

if TYPE_CHECKING:
    from toolhost_conformance._subject import Subject

__all__ = [
    "DEFAULT_EXAMPLES",
    "known_failures_from_options",
    "pytest_addoption",
    "pytest_configure",
    "settings_from_options",
    "toolhost_distributions",
    "toolhost_subject",
]

#: Property-run examples per tool: enough to find the edges, few enough for every CI run.
DEFAULT_EXAMPLES = 50

_KNOWN_OPTION = pytest.StashKey[dict[str, str]]()
_SETTINGS_OPTION = pytest.StashKey[dict[str, str]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add the ``--toolhost-*`` options (group "toolhost-conformance")."""
    group = parser.getgroup("toolhost-conformance", "toolhost plugin conformance suite")
    group.addoption(
        "--toolhost-dist",
        action="append",
        default=[],
        dest="toolhost_dists",
        metavar="NAME",
        help="a distribution under test (repeatable); the default of the "
        "toolhost_distributions fixture",
    )
    group.addoption(
        "--toolhost-known-failure",
        action="append",
        default=[],
        dest="toolhost_known_failures",
        metavar="CHECK=REASON",
        help="allow CHECK (or CHECK[case id]) to fail, as a strict xfail with REASON "
        "(repeatable); a reason is required",
    )
    group.addoption(
        "--toolhost-examples",
        type=int,
        default=None,
        dest="toolhost_examples",
        metavar="N",
        help=f"property-run examples per tool (default {DEFAULT_EXAMPLES}, or the suite's "
        "max_examples)",
    )
    group.addoption(
        "--toolhost-derandomize",
        action="store_true",
        default=False,
        dest="toolhost_derandomize",
        help="derandomize the property run (the same examples every run)",
    )
    group.addoption(
        "--toolhost-setting",
        action="append",
        default=[],
        dest="toolhost_settings",
        metavar="NAME=VALUE",
        help="an environment setting toolhost_tools(settings) sees (repeatable), e.g. a "
        "flag that turns conditional tools on",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Validate the options once, so a reason-less known failure stops the run at once."""
    raw = config.getoption("toolhost_known_failures", None) or []
    entries: dict[str, str] = {}
    if raw:
        # Imported only when the option is used: a run with no suite does not load it.
        from toolhost_conformance.suite import CHECKS

        try:
            entries = _known.validate(_known.parse_option(raw), CHECKS, "--toolhost-known-failure")
        except _known.KnownFailureError as exc:
            raise pytest.UsageError(str(exc)) from None
    config.stash[_KNOWN_OPTION] = entries
    settings: dict[str, str] = {}
    for value in config.getoption("toolhost_settings", None) or []:
        name, sep, setting = value.partition("=")
        if not sep or not name.strip():
            raise pytest.UsageError(f"--toolhost-setting {value!r}: use NAME=VALUE")
        settings[name.strip()] = setting
    config.stash[_SETTINGS_OPTION] = settings
    examples = config.getoption("toolhost_examples", None)
    if examples is not None and examples < 1:
        raise pytest.UsageError("--toolhost-examples must be at least 1")


def known_failures_from_options(config: pytest.Config) -> dict[str, str]:
    """The validated ``--toolhost-known-failure`` entries, ``{check: reason}``."""
    entries: dict[str, str] = config.stash.get(_KNOWN_OPTION, {})
    return dict(entries)


def settings_from_options(config: pytest.Config) -> dict[str, str]:
    """The ``--toolhost-setting`` values, ``{name: value}``."""
    settings: dict[str, str] = config.stash.get(_SETTINGS_OPTION, {})
    return dict(settings)


@pytest.fixture(scope="class")
def toolhost_subject(
    request: pytest.FixtureRequest,
    toolhost_distributions: Sequence[str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Subject]:
    """The plugins under test for the requesting ConformanceSuite class, loaded once per class
    (at collection, which parametrizes the checks by them).

    Defined here rather than on the suite class: pytest deprecates class-scoped fixtures
    written as instance methods.
    """
    from toolhost_conformance.suite import ConformanceSuite, subject_for_class

    cls = request.cls
    if cls is None or not issubclass(cls, ConformanceSuite):
        pytest.fail("toolhost_subject is for ConformanceSuite subclasses", pytrace=False)
    subject = subject_for_class(request.config, cls, toolhost_distributions)
    if subject.data_dir is None:
        # The host's invocation and artifact stores go in pytest's temporary directory rather
        # than one of the host's own that nothing would clean up.
        subject.data_dir = tmp_path_factory.mktemp("toolhost-data")
    yield subject
    subject.close()


@pytest.fixture(scope="session")
def toolhost_distributions(pytestconfig: pytest.Config) -> Sequence[str]:
    """The distributions under test: the ``--toolhost-dist`` values.

    Override it in a conftest to name them there. The suite evaluates it at collection time
    (it parametrizes per tool), so an override may request only ``pytestconfig``::

        @pytest.fixture(scope="session")
        def toolhost_distributions():
            return ("toolhost-math",)

    A suite class's own ``distributions`` or ``plugins`` attribute takes precedence.
    """
    return tuple(pytestconfig.getoption("toolhost_dists", None) or ())
