"""A plugin's failure is one escaped line (D500's rule for readiness lines): a hook that raises
or an import that fails often quotes outside text (a subprocess's stderr, a path), so its
message can neither move the terminal nor forge another line, whichever command says it."""

from __future__ import annotations

from pathlib import Path

import pytest
from installed import install_fake_plugin
from test_cli import idle, toolhost

from toolhost._registration.discovery import PluginError

REMEDY = "(leave it out with TOOLHOST_PLUGINS, or fix and reinstall it)"

#: An exception's text quoting outside text: a colour, a newline that would print a line as if
#: another plugin had said it.
FORGING = "boom\\nnot ready: fake-other: FORGED \\x1b[31mred\\x1b[0m"
SHOWN = r"boom\nnot ready: fake-other: FORGED \u001b[31mred\u001b[0m"

PLUGIN = f'''
from toolhost import hookimpl, Domain

if {{fail_import}}:
    raise RuntimeError("{FORGING}")

@hookimpl
def toolhost_domains():
    return [Domain("rho")]

@hookimpl
def toolhost_tools(settings):
    if {{fail_tools}}:
        raise RuntimeError("{FORGING}")
    return []

@hookimpl
def toolhost_readiness(settings):
    raise RuntimeError("{FORGING}")
'''


def _site(tmp_path: Path, *, fail_import: bool = False, fail_tools: bool = False) -> Path:
    install_fake_plugin(tmp_path / "site", "fake-e", "fake_e",
                        PLUGIN.format(fail_import=fail_import, fail_tools=fail_tools))
    return tmp_path / "site"


def test_the_message_is_one_escaped_line() -> None:
    error = PluginError("fake-e", "hook toolhost_tools raised RuntimeError: a\nb \x1b[2J")
    assert str(error) == (
        rf"plugin fake-e: hook toolhost_tools raised RuntimeError: a\nb \u001b[2J {REMEDY}")


def test_check_escapes_a_readiness_probe_that_raised(tmp_path: Path) -> None:
    result = toolhost("check", env={"TOOLHOST_PLUGINS": "fake-e"}, site=_site(tmp_path))
    assert (result.returncode, result.stdout) == (1, f"{idle('fake-e')}\n")
    assert result.stderr == (
        f"toolhost: plugin fake-e: hook toolhost_readiness raised RuntimeError: {SHOWN} "
        f"{REMEDY}\n")


def test_plugins_escapes_a_readiness_probe_that_raised(tmp_path: Path) -> None:
    result = toolhost("plugins", env={"TOOLHOST_PLUGINS": "fake-e"}, site=_site(tmp_path))
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        f"toolhost: plugin fake-e: hook toolhost_readiness raised RuntimeError: {SHOWN} "
        f"{REMEDY}\n")


@pytest.mark.parametrize(("how", "said"), [
    ({"fail_tools": True}, f"hook toolhost_tools raised RuntimeError: {SHOWN}"),
    ({"fail_import": True},
     f"entry point fake_e = fake_e failed to import: RuntimeError: {SHOWN} at "),
])
def test_every_command_escapes_a_hook_or_import_that_raised(tmp_path: Path, how: dict[str, bool],
                                                             said: str) -> None:
    result = toolhost("tools", env={"TOOLHOST_PLUGINS": "fake-e"}, site=_site(tmp_path, **how))
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.startswith(f"toolhost: plugin fake-e: {said}")
    assert result.stderr.endswith(f" {REMEDY}\n")
    assert result.stderr.count("\n") == 1 and "\x1b" not in result.stderr
