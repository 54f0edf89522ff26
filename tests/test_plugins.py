"""Discovery: entry points one at a time, the allow-list, and failures attributed to a plugin."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import make_plugin
from installed import GOOD_PLUGIN, install_fake_plugin

from toolhost import Reason
from toolhost._model.settings import Settings
from toolhost._registration.discovery import (
    PluginError,
    PluginSource,
    collect_contributions,
    discover,
    load_distributions,
    make_plugin_manager,
)


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "site"
    path.mkdir()
    sys.path.insert(0, str(path))
    yield path
    sys.path.remove(str(path))
    for name in [m for m in sys.modules if m.startswith("fake_")]:
        del sys.modules[name]


def only(settings_names: str) -> Settings:
    return Settings(env={"TOOLHOST_PLUGINS": settings_names})


def test_discovers_an_installed_plugin_by_entry_point(site: Path) -> None:
    install_fake_plugin(site, "fake-good", "fake_good", GOOD_PLUGIN)
    sources = discover(only("fake-good"))
    assert [(s.distribution, s.name) for s in sources] == [("fake-good", "fake_good")]


def test_allow_list_names_are_normalized(site: Path) -> None:
    install_fake_plugin(site, "fake-good", "fake_good", GOOD_PLUGIN)
    assert [s.distribution for s in discover(only(" Fake_Good ,"))] == ["fake-good"]


def test_allow_list_leaves_out_a_broken_plugin(site: Path) -> None:
    install_fake_plugin(site, "fake-good", "fake_good", GOOD_PLUGIN)
    install_fake_plugin(site, "fake-broken", "fake_broken", "raise ImportError('nope')\n")
    assert [s.distribution for s in discover(only("fake-good"))] == ["fake-good"]
    with pytest.raises(PluginError) as info:
        discover(only("fake-good,fake-broken"))
    assert str(info.value).startswith(
        "plugin fake-broken: entry point fake_broken = fake_broken failed to import: "
        "ImportError: nope"
    )
    assert "TOOLHOST_PLUGINS" in str(info.value)


def test_allow_list_naming_a_missing_distribution_is_an_error(site: Path) -> None:
    with pytest.raises(PluginError, match="plugin not-there: TOOLHOST_PLUGINS names it"):
        discover(only("not-there"))


def test_load_distributions_loads_only_those(site: Path) -> None:
    install_fake_plugin(site, "fake-good", "fake_good", GOOD_PLUGIN)
    install_fake_plugin(site, "fake-broken", "fake_broken", "raise ImportError('nope')\n")
    assert [s.distribution for s in load_distributions(["fake-good"])] == ["fake-good"]
    with pytest.raises(PluginError, match=r"no toolhost\.plugins entry point"):
        load_distributions(["fake-missing"])


def test_a_hook_that_raises_is_attributed(site: Path) -> None:
    install_fake_plugin(site, "fake-raises", "fake_raises", '''
from toolhost import hookimpl

@hookimpl
def toolhost_tools(settings):
    raise RuntimeError("boom")
''')
    pm = make_plugin_manager(discover(only("fake-raises")))
    with pytest.raises(PluginError) as info:
        collect_contributions(pm, Settings())
    assert str(info.value).startswith(
        "plugin fake-raises: hook toolhost_tools raised RuntimeError: boom"
    )


def test_a_misspelled_hookimpl_is_an_error_not_silence(site: Path) -> None:
    install_fake_plugin(site, "fake-typo", "fake_typo", '''
from toolhost import hookimpl

@hookimpl
def toolhost_tool(settings):
    return []
''')
    with pytest.raises(PluginError) as info:
        make_plugin_manager(discover(only("fake-typo")))
    assert "plugin fake-typo: implements a hook no hookspec declares" in str(info.value)


@pytest.mark.parametrize(
    ("hook", "value", "expected"),
    [
        ("toolhost_domains", ["math"], "must return a list of Domain"),
        ("toolhost_tools", {"a": 1}, "must return a list of Tool"),
        ("toolhost_tools", [object()], "must return a list of Tool"),
    ],
)
def test_a_hook_returning_the_wrong_type_is_attributed(hook: str, value: object,
                                                       expected: str) -> None:
    plugin = make_plugin()
    setattr(plugin, hook, _impl(hook, value))
    pm = make_plugin_manager([PluginSource("fx-dist", "fx", plugin)])
    with pytest.raises(PluginError, match=f"plugin fx-dist: hook {hook} {expected}"):
        collect_contributions(pm, Settings())


def _impl(hook: str, value: object) -> object:
    from toolhost import hookimpl

    if hook == "toolhost_tools":
        def fn(settings: object) -> object:
            return value
    else:
        def fn() -> object:  # type: ignore[misc]
            return value
    fn.__name__ = hook
    return hookimpl(fn)


def test_settings_reach_toolhost_tools() -> None:
    seen: list[Settings] = []
    plugin = make_plugin()

    def toolhost_tools(settings: Settings) -> list[object]:
        seen.append(settings)
        return []

    from toolhost import hookimpl

    plugin.toolhost_tools = hookimpl(toolhost_tools)  # type: ignore[attr-defined]
    settings = Settings(env={"AGENT_PEOPLE_ENABLED": "1"})
    collect_contributions(make_plugin_manager([PluginSource("fx-dist", "fx", plugin)]), settings)
    assert seen == [settings] and settings.flag("AGENT_PEOPLE_ENABLED")


def test_settings_redact_secrets_in_repr() -> None:
    settings = Settings(env={"TENSORSCALE_API_KEY": "sk-secret", "TOOLHOST_PLUGINS": "a"})
    assert "sk-secret" not in repr(settings)
    secret = settings.secret("TENSORSCALE_API_KEY")
    assert secret is not None and secret.reveal() == "sk-secret"


def test_a_distribution_with_two_entry_points_contributes_once(site: Path) -> None:
    install_fake_plugin(site, "fake-two", "fake_two_a", GOOD_PLUGIN)
    (site / "fake_two_b.py").write_text(TOOL_PLUGIN)
    info = site / "fake_two-0.1.dist-info" / "entry_points.txt"
    info.write_text(info.read_text() + "fake_two_b = fake_two_b\n")
    contributions = collect_contributions(make_plugin_manager(discover(only("fake-two"))),
                                          Settings())
    (mine,) = [c for c in contributions if c.distribution == "fake-two"]
    assert [d.name for d in mine.domains] == ["fake"]
    assert [t.spec.identity for t in mine.tools] == ["fake.thing@1.0.0"]
    assert mine.tools[0].reasons == (Reason("tool.not_found.thing", "No such thing."),)


TOOL_PLUGIN = """\
from toolhost import (hookimpl, Idempotency, Kind, Reason, Risk, SideEffect, Source, TargetKind,
                      Tool, ToolSpec, Trust)

SCHEMA = {"type": "object", "properties": {}, "required": [], "additionalProperties": False}
SPEC = ToolSpec(
    name="fake.thing", version="1.0.0", description="A thing.", input_schema=SCHEMA,
    output_schema=SCHEMA, kind=Kind.CAPABILITY, source=Source.BUILTIN,
    target_kind=TargetKind.IN_PROCESS, server_id=None, side_effect=SideEffect.NONE,
    risk=Risk.LOW, idempotency=Idempotency.READ_ONLY, output_trust=Trust.INTERNAL_TOOL,
    required_scopes=(), timeout_s=2, maximum_output_bytes=4096, allow_parallel=True,
    deprecated=False,
)

@hookimpl
def toolhost_tools(settings):
    return [Tool(SPEC, call=lambda arguments, context: None,
                 reasons=(Reason("tool.not_found.thing", "No such thing."),))]
"""
