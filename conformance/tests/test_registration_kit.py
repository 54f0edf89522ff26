"""``toolhost.testing``'s registration kit, the only host API the suite is built on.

Loading distributions as the host does, calling their hooks, listing every problem
registration finds with its step, and building a host over the loaded plugins: each through
its public name, so a host refactor that keeps these keeps every plugin team's CI.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import fx_duplicate
import fx_good
import fx_mcp_domain
import fx_shared_a
import fx_shared_b
import pytest
from conftest import INSTALLABLE_GOOD, INSTALLABLE_MCP, install_fake_plugin

from toolhost import Domain, Settings, Tool, hookimpl
from toolhost.testing import (
    Contribution,
    Host,
    PluginError,
    PluginSource,
    Registered,
    RegistrationRefused,
    RegistrationStep,
    contributions_of,
    host_for,
    load_plugins,
    registration_problems,
)


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two distributions installed as pip lays them out: one that conforms, one refused."""
    site = tmp_path / "site"
    install_fake_plugin(site, "fx-kit-good", "fx_kit_good", INSTALLABLE_GOOD)
    install_fake_plugin(site, "fx-kit-mcp", "fx_kit_mcp", INSTALLABLE_MCP)
    monkeypatch.syspath_prepend(str(site))


# ---------------------------------------------------------------------------- load_plugins


@pytest.mark.usefixtures("installed")
def test_load_plugins_loads_exactly_the_named_distributions() -> None:
    # fx-kit-mcp is installed too (and would be refused); it is not loaded.
    sources = load_plugins(["FX_Kit.Good"])  # PEP 503: the same name as fx-kit-good
    plugin = importlib.import_module("fx_kit_good")
    assert sources == [PluginSource(distribution="fx-kit-good", name="fx_kit_good", plugin=plugin)]


@pytest.mark.usefixtures("installed")
def test_one_name_may_be_a_string() -> None:
    assert load_plugins("fx-kit-good") == load_plugins(["fx-kit-good"])


@pytest.mark.usefixtures("installed")
def test_plugin_objects_follow_the_installed_ones() -> None:
    sources = load_plugins(["fx-kit-good"], {"fx-good": fx_good})
    assert [s.distribution for s in sources] == ["fx-kit-good", "fx-good"]
    assert sources[1] == PluginSource(distribution="fx-good", name="fx-good", plugin=fx_good)


def test_a_name_without_an_entry_point_is_the_hosts_one_line() -> None:
    with pytest.raises(PluginError) as raised:
        load_plugins(["fx-kit-absent"])
    assert raised.value.distribution == "fx-kit-absent"
    assert str(raised.value) == (
        "plugin fx-kit-absent: no toolhost.plugins entry point is installed for it "
        "(leave it out with TOOLHOST_PLUGINS, or fix and reinstall it)"
    )


# ---------------------------------------------------------------------------- contributions_of


class _Recording:
    """A plugin object that records the settings its toolhost_tools hook is called with."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    @hookimpl
    def toolhost_domains(self) -> list[Domain]:
        return [Domain("recorded")]

    @hookimpl
    def toolhost_tools(self, settings: Any) -> list[Tool]:
        self.seen.append(settings)
        return []


def test_contributions_are_what_each_distribution_returns() -> None:
    contributions = contributions_of(
        load_plugins(plugins={"fx-shared-a": fx_shared_a, "fx-shared-b": fx_shared_b})
    )
    assert [type(c) for c in contributions] == [Contribution, Contribution]
    assert [(c.distribution, [d.name for d in c.domains], [t.spec.name for t in c.tools])
            for c in contributions] == [
        ("fx-shared-a", ["shared"], ["shared.tool_a"]),
        ("fx-shared-b", ["shared"], ["shared.tool_b"]),
    ]


def test_the_hooks_see_the_settings_given() -> None:
    plugin = _Recording()
    settings = Settings(env={"AGENT_PEOPLE_ENABLED": "1"})
    contributions_of(load_plugins(plugins={"fx-recording": plugin}), settings)
    contributions_of(load_plugins(plugins={"fx-recording": plugin}))
    assert plugin.seen[0] is settings
    assert isinstance(plugin.seen[1], Settings) and plugin.seen[1] is not settings


def test_a_hook_that_raises_is_its_distributions_one_line() -> None:
    class Raising:
        @hookimpl
        def toolhost_domains(self) -> list[Domain]:
            raise RuntimeError("boom")

    with pytest.raises(PluginError) as raised:
        contributions_of(load_plugins(plugins={"fx-raising": Raising()}))
    assert str(raised.value) == (
        "plugin fx-raising: hook toolhost_domains raised RuntimeError: boom "
        "(leave it out with TOOLHOST_PLUGINS, or fix and reinstall it)"
    )


# ---------------------------------------------------------------------------- registration


def test_every_problem_is_listed_in_step_order_and_the_host_refuses_with_the_first() -> None:
    plugins = {"fx-duplicate": fx_duplicate, "fx-mcp-domain": fx_mcp_domain}
    problems = registration_problems(contributions_of(load_plugins(plugins=plugins)))
    assert [(p.step, p.tool, p.distribution) for p in problems] == [
        (RegistrationStep.RESERVED_DOMAINS, "domain mcp", "fx-mcp-domain"),
        (RegistrationStep.RESERVED_DOMAINS, "mcp.lookup@1.0.0", "fx-mcp-domain"),
        (RegistrationStep.UNIQUENESS, "dup.same@1.0.0", "fx-duplicate"),
    ]
    with pytest.raises(RegistrationRefused) as refused:
        host_for(load_plugins(plugins=plugins))
    assert refused.value.problems == tuple(problems)
    assert str(refused.value) == str(problems[0])
    assert str(problems[0]).startswith(
        "registration refused at step 2 (reserved domains): domain mcp from distribution "
        "fx-mcp-domain: "
    )


def test_a_conforming_plugin_has_no_problems() -> None:
    assert registration_problems(contributions_of(load_plugins(plugins={"fx-good": fx_good}))) == []


# ---------------------------------------------------------------------------- host_for


@pytest.mark.usefixtures("installed")
def test_host_for_runs_the_loaded_plugins_through_the_pipeline() -> None:
    with host_for(load_plugins(["fx-kit-good"])) as host:
        assert isinstance(host, Host)
        assert host.registry.names() == ["hello.greet"]
        registered = host.registry.resolve("hello.greet", "1.0.0")
        assert isinstance(registered, Registered)
        assert registered.distribution == "fx-kit-good"
        outcome = host.invoke_sync("hello.greet", {"name": "Ada"})
    assert outcome.ok
    assert outcome.content == "Hello, Ada"


def test_host_for_names_what_it_takes_when_given_names() -> None:
    with pytest.raises(TypeError, match=r"host_for\(load_plugins\(names\)\)"):
        host_for(["fx-kit-good"])  # type: ignore[list-item]
