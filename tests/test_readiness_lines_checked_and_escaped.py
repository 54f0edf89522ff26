"""``toolhost_readiness`` returns a list of str, one line per problem (D108): any other value
is the host's one line naming the plugin (a str printed a character a line; ``True`` crashed
``check``), and each line reaches the terminal escaped, as ``check``'s other lines quoting
outside text do (D280): it can neither move the terminal nor forge another plugin's line."""

from __future__ import annotations

from pathlib import Path

import pytest
from installed import install_fake_plugin
from test_cli import idle, toolhost
from test_cli_check import NOT_HELD

PLUGIN = '''
from toolhost import hookimpl, Domain

@hookimpl
def toolhost_domains():
    return [Domain("rho")]

@hookimpl
def toolhost_readiness(settings):
    return {value}
'''

#: A probe line quoting outside text: clear the screen, set the window title, and a newline
#: that would print a line as if another plugin had said it.
FORGING = "ffmpeg \x1b[2J\x1b]0;title\x07missing\nnot ready: fake-other: fake line"
SHOWN = r"ffmpeg \u001b[2J\u001b]0;title\u0007missing\nnot ready: fake-other: fake line"


def _installed(tmp_path: Path, value: str) -> Path:
    install_fake_plugin(tmp_path / "site", "fake-r", "fake_r", PLUGIN.format(value=value))
    return tmp_path / "site"


@pytest.mark.parametrize("value", ['"ffmpeg is missing"', "True", "None", '("a",)', "[1]"])
def test_a_value_other_than_a_list_of_str_is_one_line_and_exit_1(tmp_path: Path,
                                                                 value: str) -> None:
    result = toolhost("check", env={"TOOLHOST_PLUGINS": "fake-r"},
                      site=_installed(tmp_path, value))
    assert (result.returncode, result.stdout) == (1, f"{idle('fake-r')}\n")
    assert result.stderr == (
        "toolhost: plugin fake-r: hook toolhost_readiness must return a list of str (leave it "
        "out with TOOLHOST_PLUGINS, or fix and reinstall it)\n")


def test_check_prints_a_line_escaped(tmp_path: Path) -> None:
    result = toolhost("check", env={"TOOLHOST_PLUGINS": "fake-r"},
                      site=_installed(tmp_path, repr([FORGING])))
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == f"{idle('fake-r')}\nnot ready: fake-r: {SHOWN}\n" + NOT_HELD


def test_plugins_prints_a_line_escaped(tmp_path: Path) -> None:
    result = toolhost("plugins", env={"TOOLHOST_PLUGINS": "fake-r"},
                      site=_installed(tmp_path, repr([FORGING])))
    assert (result.returncode, result.stderr) == (0, "")
    assert f"\n  not ready: {SHOWN}\n" in result.stdout
    assert "\x1b" not in result.stdout and "\nnot ready: fake-other" not in result.stdout
