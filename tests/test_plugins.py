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


def test_exclude_leaves_a_plugin_out_after_the_allow_list(site: Path) -> None:
    install_fake_plugin(site, "fake-good", "fake_good", GOOD_PLUGIN)
    install_fake_plugin(site, "fake-broken", "fake_broken", "raise ImportError('nope')\n")
    both = {"TOOLHOST_PLUGINS": "fake-good,fake-broken"}
    settings = Settings(env={**both, "TOOLHOST_PLUGINS_EXCLUDE": " Fake_Broken ,"})
    assert [s.distribution for s in discover(settings)] == ["fake-good"]
    # Without an allow-list: every installed plugin but the excluded one.
    loaded = {s.distribution for s in discover(
        Settings(env={"TOOLHOST_PLUGINS_EXCLUDE": "fake-broken"}))}
    assert "fake-good" in loaded and "fake-broken" not in loaded


def test_excluding_a_distribution_that_is_not_installed_is_an_error(site: Path) -> None:
    install_fake_plugin(site, "fake-good", "fake_good", GOOD_PLUGIN)
    settings = Settings(env={"TOOLHOST_PLUGINS": "fake-good",
                             "TOOLHOST_PLUGINS_EXCLUDE": "fake-goood"})
    with pytest.raises(PluginError) as info:
        discover(settings)
    assert str(info.value).startswith(
        "plugin fake-goood: TOOLHOST_PLUGINS_EXCLUDE names it, but no installed distribution "
        "provides a toolhost.plugins entry point under that name (installed: ")
    assert "fake-good" in str(info.value)


def _import_error(site: Path, dist: str, module: str, source: str) -> str:
    install_fake_plugin(site, dist, module, source)
    with pytest.raises(PluginError) as info:
        discover(only(dist))
    return str(info.value)


def test_an_import_error_names_the_plugin_line_that_raised(site: Path) -> None:
    # The last frame inside the plugin: the line that called the library that raised.
    message = _import_error(site, "fake-deep", "fake_deep", (
        "import json\n"
        "\n"
        "def settings():\n"
        "    return json.loads('{')\n"
        "\n"
        "SETTINGS = settings()\n"
    ))
    assert message == (
        "plugin fake-deep: entry point fake_deep = fake_deep failed to import: JSONDecodeError: "
        "Expecting property name enclosed in double quotes: line 1 column 2 (char 1) at "
        f"{site / 'fake_deep.py'}:4 (leave it out with TOOLHOST_PLUGINS, or fix and reinstall it)"
    )


def test_a_syntax_error_names_the_file_and_line(site: Path) -> None:
    message = _import_error(site, "fake-syntax", "fake_syntax", "X = 1\ndef f(:\n    pass\n")
    assert message.startswith(
        "plugin fake-syntax: entry point fake_syntax = fake_syntax failed to import: "
        "SyntaxError: ")
    assert message.endswith(
        f" at {site / 'fake_syntax.py'}:2 (leave it out with TOOLHOST_PLUGINS, or fix and "
        "reinstall it)")


def test_an_import_error_in_a_submodule_names_the_submodule(site: Path) -> None:
    package = site / "fake_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("from fake_pkg import tools\n")
    (package / "tools.py").write_text("VALUE = 1\nBROKEN = {}['missing']\n")
    info = site / "fake_pkg-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-pkg\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[toolhost.plugins]\nplugin = fake_pkg\n")
    with pytest.raises(PluginError) as error:
        discover(only("fake-pkg"))
    assert str(error.value) == (
        "plugin fake-pkg: entry point plugin = fake_pkg failed to import: KeyError: 'missing' at "
        f"{package / 'tools.py'}:2 (leave it out with TOOLHOST_PLUGINS, or fix and reinstall it)"
    )


def test_source_files_are_the_plugins_own_package_or_module(site: Path) -> None:
    from toolhost._registration.discovery import source_files

    install_fake_plugin(site, "fake-good", "fake_good", GOOD_PLUGIN)
    package = site / "fake_pkg"
    (package / "tools").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "tools" / "__init__.py").write_text("")
    (package / "tools" / "plugin.py").write_text(GOOD_PLUGIN)
    info = site / "fake_pkg-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-pkg\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[toolhost.plugins]\nplugin = fake_pkg.tools.plugin\n")
    sources = discover(only("fake-good,fake-pkg"))
    # A module plugin is its file; a plugin inside a package is the whole top-level package.
    assert source_files(sources) == {"fake-good": [site / "fake_good.py"],
                                     "fake-pkg": [package]}
