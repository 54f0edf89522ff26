"""A hookimpl its hookspec does not fit (a parameter the hookspec lacks, a wrapper that is no
generator) is the host's one line naming the plugin and the hook, with the usual way to
leave it out, from every command that builds the plugin manager: never pluggy's traceback."""

from __future__ import annotations

import types
from pathlib import Path

import pytest
from installed import install_fake_plugin
from test_cli import idle, toolhost

from toolhost import hookimpl
from toolhost._registration.discovery import PluginError, PluginSource, make_plugin_manager

REMEDY = "(leave it out with TOOLHOST_PLUGINS, or fix and reinstall it)"


def _registered(**hooks: object) -> None:
    make_plugin_manager([PluginSource("fx-dist", "fx", types.SimpleNamespace(**hooks))])


def test_a_parameter_the_hookspec_lacks_is_named_with_the_hookspecs_own() -> None:
    def toolhost_tools(settings: object, env: object, zone: object) -> list[object]:
        return []

    with pytest.raises(PluginError) as info:
        _registered(toolhost_tools=hookimpl(toolhost_tools))
    assert str(info.value) == (
        "plugin fx-dist: hook toolhost_tools takes env, zone, which its hookspec "
        f"toolhost_tools(settings) does not give; take only the hookspec's parameters (or "
        f"fewer) {REMEDY}")


def test_a_hook_under_another_name_is_named_by_its_hookspec() -> None:
    def probe(settings: object, verbose: object) -> list[str]:
        return []

    with pytest.raises(PluginError, match=r"^plugin fx-dist: hook toolhost_readiness takes "
                                          r"verbose, which its hookspec "
                                          r"toolhost_readiness\(settings\) does not give"):
        _registered(probe=hookimpl(specname="toolhost_readiness")(probe))


def test_another_refusal_of_pluggys_is_one_line_too() -> None:
    def toolhost_tools(settings: object) -> list[object]:
        return []

    with pytest.raises(PluginError) as info:
        _registered(toolhost_tools=hookimpl(wrapper=True)(toolhost_tools))
    message = str(info.value)
    assert message.startswith("plugin fx-dist: cannot be registered: Plugin 'fx-dist' for hook "
                              "'toolhost_tools' hookimpl definition: toolhost_tools(")
    assert message.endswith(f"but function is not a generator function {REMEDY}")
    assert "\n" not in message


def test_fewer_parameters_than_the_hookspec_are_fine() -> None:
    _registered(toolhost_tools=hookimpl(lambda: []))


def test_check_says_it_in_one_line_and_exits_1(tmp_path: Path) -> None:
    install_fake_plugin(tmp_path / "site", "fake-sig", "fake_sig", '''
from toolhost import hookimpl

@hookimpl
def toolhost_tools(settings, env):
    return []
''')
    result = toolhost("check", env={"TOOLHOST_PLUGINS": "fake-sig"}, site=tmp_path / "site")
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        "toolhost: plugin fake-sig: hook toolhost_tools takes env, which its hookspec "
        "toolhost_tools(settings) does not give; take only the hookspec's parameters (or "
        f"fewer) {REMEDY}\n")


def test_a_positional_only_parameter_is_passed_as_pluggy_passes_it(tmp_path: Path) -> None:
    # pluggy calls a hookimpl positionally, so ``(settings, /)`` takes exactly its hookspec's.
    install_fake_plugin(tmp_path / "site", "fake-pos", "fake_pos", '''
from toolhost import Domain, hookimpl

@hookimpl
def toolhost_domains():
    return [Domain("pos")]

@hookimpl
def toolhost_tools(settings, /):
    return []

@hookimpl
def toolhost_readiness(settings, /):
    return ["seen " + type(settings).__name__]
''')
    result = toolhost("check", env={"TOOLHOST_PLUGINS": "fake-pos"}, site=tmp_path / "site")
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.startswith(f"{idle('fake-pos')}\nnot ready: fake-pos: seen Settings\n")
