"""A flag takes 1, true, yes or on, and 0, false, no or off (any case; unset or blank is off).
Any other word set in the environment (``ture``, ``yes please``) stops the command with one
line naming the variable, exit 2, as toolhost.toml refuses ``mode_enabled = "ture"`` and the
environment ``TOOLHOST_MCP_ELICITATION=of``. Before, it was read as off without a word, and
``toolhost plugins`` said the variable "is unset". ``plugins`` now says a flag set off is off,
where it was set.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_cli import assert_no_traceback, toolhost
from test_cli_config import write_config

from toolhost._model.settings import SettingError, Settings

WORDS = "must be on or off (1, true, yes or on; 0, false, no or off)"


@pytest.mark.parametrize(("raw", "value"), [
    ("1", True), ("true", True), (" Yes ", True), ("ON", True),
    ("0", False), ("False", False), ("no", False), ("off", False), ("", False), ("  ", False)])
def test_a_flag_takes_its_words_in_any_case(raw: str, value: bool) -> None:
    assert Settings(env={"X_ENABLED": raw}).flag("X_ENABLED") is value


def test_an_unset_flag_is_off() -> None:
    assert Settings(env={}).flag("X_ENABLED") is False


@pytest.mark.parametrize("raw", ["ture", "yes please", "enabled", "2"])
def test_a_flag_refuses_another_word_naming_its_variable(raw: str) -> None:
    with pytest.raises(SettingError) as refused:
        Settings(env={"X_ENABLED": raw}).flag("X_ENABLED")
    assert str(refused.value) == f"X_ENABLED {WORDS}, not {raw!r}"


@pytest.mark.parametrize(("env", "command"), [
    # A plugin's flag, at every command that loads the plugins: before its hook reads it,
    # so the line is the setting's (exit 2), not the plugin's failure (exit 1).
    ({"AGENT_EMAIL_MODE_ENABLED": "ture"}, ["plugins"]),
    ({"AGENT_EMAIL_MODE_ENABLED": "ture"}, ["call", "math.calculate", "--args",
                                            '{"expression": "1"}']),
    ({"AGENT_PEOPLE_ENABLED": "enabled"}, ["check"]),
    # The host's, at every command's start.
    ({"TOOLHOST_TRACE_ARGUMENTS": "yes please"}, ["pending"]),
    ({"TOOLHOST_POLICY_ALLOW_EXTERNAL_WRITE": "ture"}, ["tools"]),
])
def test_a_command_refuses_a_flag_set_to_another_word(env: dict[str, str],
                                                       command: list[str]) -> None:
    result = toolhost(*command, env=env)
    assert_no_traceback(result)
    ((name, raw),) = env.items()
    assert (result.returncode, result.stdout, result.stderr) == (
        2, "", f"toolhost: {name} {WORDS}, not {raw!r}\n")


def _people(env: dict[str, str]) -> dict[str, object]:
    result = toolhost("plugins", "--json", env=env)
    assert result.returncode == 0, result.stderr
    listed: list[dict[str, object]] = json.loads(result.stdout)
    return next(p for p in listed if p["distribution"] == "toolhost-people")


@pytest.mark.parametrize(("raw", "why"), [
    ("0", "AGENT_PEOPLE_ENABLED is off"), ("no", "AGENT_PEOPLE_ENABLED is off"),
    ("", "AGENT_PEOPLE_ENABLED is empty")])
def test_plugins_says_a_flag_set_off_is_off_not_unset(raw: str, why: str) -> None:
    people = _people({"AGENT_PEOPLE_ENABLED": raw})
    assert (people["state"], people["why"]) == ("inactive", why)
    assert _people({})["why"] == "AGENT_PEOPLE_ENABLED is unset"


def test_plugins_names_a_flag_the_file_sets_off_where_it_is_written(tmp_path: Path) -> None:
    path = write_config(tmp_path, "[plugins.toolhost-people]\nenabled = false\n")
    people = _people({"TOOLHOST_CONFIG": str(path)})
    assert people["why"] == f"{path}:2: [plugins.toolhost-people] enabled is off"
