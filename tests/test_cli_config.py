"""``toolhost config``, ``toolhost plugins`` and toolhost.toml through the real command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_cli import assert_no_traceback, toolhost

NINE = ("toolhost-artifact", "toolhost-demo", "toolhost-email", "toolhost-math",
        "toolhost-media", "toolhost-people", "toolhost-sandbox", "toolhost-system",
        "toolhost-workspace")
#: Every first-party plugin and the tools it registers with no flag or key set.
ALWAYS = {
    "toolhost-artifact": ["artifact.export@1.0.0", "artifact.export@2.0.0"],
    "toolhost-demo": ["demo.external_write@1.0.0"],
    "toolhost-math": ["math.calculate@1.0.0"],
    "toolhost-sandbox": ["sandbox.run_command@1.0.0"],
    "toolhost-system": ["system.current_time@1.0.0"],
    "toolhost-workspace": ["workspace.list_files@1.0.0", "workspace.read_text@1.0.0",
                           "workspace.write_text@1.0.0"],
}
EMAIL_MODE = ["email.context@1.0.0", "email.feedback@1.0.0"]
EMAIL_UNSUBSCRIBE = ["email.subscriptions@1.0.0", "email.unsubscribe@1.0.0"]
PEOPLE = ["people.context@1.0.0", "people.history@1.0.0", "people.history@1.1.0",
          "people.search@1.0.0"]
MEDIA = ["image.generate@1.0.0", "image.generate@1.1.0", "video.generate@1.0.0",
         "video.generate@1.1.0"]


def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "toolhost.toml"
    path.write_text(text)
    path.chmod(0o600)
    return path


def plugins_json(env: dict[str, str]) -> dict[str, dict[str, object]]:
    result = toolhost("plugins", "--json", env={"TOOLHOST_PLUGINS_EXCLUDE": "", **env})
    assert result.returncode == 0, result.stderr
    return {p["distribution"]: p for p in json.loads(result.stdout) if p["distribution"] in NINE}


def states(listed: dict[str, dict[str, object]]) -> dict[str, tuple[object, object]]:
    return {dist: (p["state"], p["tools"]) for dist, p in listed.items()}


def test_plugins_lists_the_nine_and_why_the_conditional_ones_are_inactive() -> None:
    listed = plugins_json({})
    assert sorted(listed) == list(NINE)
    assert states(listed) == {
        **{dist: ("enabled", tools) for dist, tools in ALWAYS.items()},
        "toolhost-email": ("inactive", []), "toolhost-media": ("inactive", []),
        "toolhost-people": ("inactive", []),
    }
    assert listed["toolhost-people"]["why"] == "AGENT_PEOPLE_ENABLED is unset"
    assert listed["toolhost-media"]["why"] == "TENSORSCALE_API_KEY is unset"
    assert listed["toolhost-email"]["inactive"] == [
        {"tools": ["email.context", "email.feedback"], "setting": "AGENT_EMAIL_MODE_ENABLED",
         "how": "set AGENT_EMAIL_MODE_ENABLED=1 (or mode_enabled = true under "
                "[plugins.toolhost-email] in toolhost.toml)"},
        {"tools": ["email.subscriptions", "email.unsubscribe"],
         "setting": "AGENT_EMAIL_UNSUBSCRIBE_ENABLED",
         "how": "set AGENT_EMAIL_UNSUBSCRIBE_ENABLED=1 (or unsubscribe_enabled = true under "
                "[plugins.toolhost-email] in toolhost.toml)"}]
    assert listed["toolhost-math"]["readiness"] == []
    assert all(isinstance(p["version"], str) and p["version"] != "unknown"
               for p in listed.values())


@pytest.mark.parametrize(("env", "changed"), [
    ({"AGENT_EMAIL_MODE_ENABLED": "1"}, {"toolhost-email": ("enabled", EMAIL_MODE)}),
    ({"AGENT_EMAIL_UNSUBSCRIBE_ENABLED": "1"},
     {"toolhost-email": ("enabled", EMAIL_UNSUBSCRIBE)}),
    ({"AGENT_EMAIL_MODE_ENABLED": "1", "AGENT_EMAIL_UNSUBSCRIBE_ENABLED": "1"},
     {"toolhost-email": ("enabled", sorted(EMAIL_MODE + EMAIL_UNSUBSCRIBE))}),
    ({"AGENT_PEOPLE_ENABLED": "1"}, {"toolhost-people": ("enabled", PEOPLE)}),
    ({"TENSORSCALE_API_KEY": "sk-test"}, {"toolhost-media": ("enabled", MEDIA)}),
    ({"TOOLHOST_PLUGINS_EXCLUDE": "toolhost-demo,toolhost-people"},
     {"toolhost-demo": ("excluded", []), "toolhost-people": ("excluded", [])}),
    ({"TOOLHOST_PLUGINS": "toolhost-math,toolhost-email", "AGENT_PEOPLE_ENABLED": "1"},
     {**{dist: ("not selected", []) for dist in NINE
         if dist not in ("toolhost-math", "toolhost-email")}}),
])
def test_plugins_states_follow_the_flags(env: dict[str, str],
                                         changed: dict[str, tuple[str, list[str]]]) -> None:
    expected = {**{dist: ("enabled", tools) for dist, tools in ALWAYS.items()},
                "toolhost-email": ("inactive", []), "toolhost-media": ("inactive", []),
                "toolhost-people": ("inactive", []), **changed}
    listed = plugins_json(env)
    assert {d: (s, sorted(t)) for d, (s, t) in states(listed).items()} == \
        {d: (s, sorted(t)) for d, (s, t) in expected.items()}
    for dist, (state, _) in expected.items():
        # A plugin left out is not asked whether it is ready.
        assert (listed[dist]["readiness"] is None) == (state in ("excluded", "not selected"))


def test_plugins_states_follow_the_file_as_the_environment(tmp_path: Path) -> None:
    path = write_config(tmp_path, "[plugins.toolhost-people]\nenabled = true\n"
                                  "[plugins.toolhost-media]\napi_key = { env = \"TS_KEY\" }\n"
                                  "[host]\nplugins_exclude = [\"toolhost-demo\"]\n")
    listed = plugins_json({"TOOLHOST_CONFIG": str(path), "TS_KEY": "sk-x"})
    # The test's own TOOLHOST_PLUGINS_EXCLUDE="" is set in the environment: it wins.
    assert listed["toolhost-demo"]["state"] == "enabled"
    assert states(listed)["toolhost-people"] == ("enabled", PEOPLE)
    assert states(listed)["toolhost-media"] == ("enabled", MEDIA)
    result = toolhost("plugins", "--json", env={"TOOLHOST_CONFIG": str(path), "TS_KEY": "x"})
    demo = next(p for p in json.loads(result.stdout) if p["distribution"] == "toolhost-demo")
    # Named where it was written: the operator never set the variable.
    assert (demo["state"], demo["why"]) == (
        "excluded", f"{path}:6: [host] plugins_exclude names it")


def test_a_misspelt_plugin_the_file_excludes_is_named_at_its_line(tmp_path: Path) -> None:
    path = write_config(tmp_path, "[host]\nplugins_exclude = [\"toolhost-dmeo\"]\n")
    result = toolhost("check", env={"TOOLHOST_CONFIG": str(path)})
    assert result.returncode == 1
    assert result.stderr.startswith(
        f"toolhost: plugin toolhost-dmeo: {path}:2: [host] plugins_exclude names it, but no "
        "installed distribution provides a toolhost.plugins entry point under that name "
        "(installed: ")
    assert_no_traceback(result)


def test_plugins_prints_a_line_per_plugin_for_a_person() -> None:
    result = toolhost("plugins", env={"TOOLHOST_PLUGINS_EXCLUDE": "toolhost-demo"})
    assert result.returncode == 0, result.stderr
    out = result.stdout.splitlines()
    people = out.index(next(line for line in out if line.startswith("toolhost-people ")))
    assert out[people].endswith(": inactive (AGENT_PEOPLE_ENABLED is unset)")
    assert out[people + 1] == (
        "  inactive: people.search, people.context, people.history: set AGENT_PEOPLE_ENABLED=1 "
        "(or enabled = true under [plugins.toolhost-people] in toolhost.toml)")
    assert any(line.startswith("toolhost-demo ") and
               line.endswith(": excluded (TOOLHOST_PLUGINS_EXCLUDE names it)") for line in out)
    math = out.index(next(line for line in out if line.startswith("toolhost-math ")))
    assert out[math + 1:math + 3] == ["  tools: math.calculate@1.0.0", "  ready"]


def test_calling_a_tool_of_an_inactive_plugin_says_which_setting_activates_it() -> None:
    result = toolhost("call", "people.search", "--args", '{"query": "x"}')
    assert result.returncode == 1
    # The model's text is the static unknown-tool message; the operator's line says more.
    assert result.stdout == "Unknown tool. Call one of the tools you were given.\n"
    assert result.stderr == (
        "toolhost: people.search is not active: set AGENT_PEOPLE_ENABLED=1 (or enabled = true "
        "under [plugins.toolhost-people] in toolhost.toml)\n")
    media = toolhost("call", "image.generate", "--args", "{}")
    assert media.stderr == (
        "toolhost: image.generate is not active: set TENSORSCALE_API_KEY (or api_key = "
        '{ env = "NAME" } under [plugins.toolhost-media] in toolhost.toml)\n')
    unknown = toolhost("call", "nothing.here", "--args", "{}")
    assert unknown.stderr == ("toolhost: no tool 'nothing.here' is registered (toolhost tools "
                              "lists them)\n")


def test_config_prints_each_setting_with_its_source(tmp_path: Path) -> None:
    path = write_config(tmp_path, "[host]\n"
                                  "log_level = \"info\"\n"
                                  "artifact_retention_days = 7\n"
                                  "[http]\n"
                                  "introspection_client_secret = \"hunter2\"\n"
                                  "[policy]\n"
                                  "\"CODE_EXECUTION/LOW\" = \"approval\"\n"
                                  "\"WORKSPACE_WRITE/MEDIUM\" = \"deny\"\n"
                                  "[plugins.toolhost-people]\n"
                                  "enabled = true\n")
    env = {"TOOLHOST_CONFIG": str(path), "TOOLHOST_LOG_LEVEL": "error",
           "TENSORSCALE_API_KEY": "sk-secret-value",
           "TOOLHOST_DATABASE_URL": "postgresql://u:pw@db/x"}
    result = toolhost("config", env=env)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"# toolhost.toml: {path}"
    column = 43

    def entry(text: str, source: str) -> str:
        return f"{text.ljust(column)} # {source}"

    for expected in [
        entry('log_level = "error"', "environment TOOLHOST_LOG_LEVEL"),
        entry("artifact_retention_days = 7", f"{path}:3"),
        entry('introspection_client_secret = "***"', f"{path}:5"),
        # Each cell's own line, not its table's (both said :6).
        entry('"CODE_EXECUTION/LOW" = "approval"', f"{path}:7"),
        entry('"WORKSPACE_WRITE/MEDIUM" = "deny"', f"{path}:8"),
        entry("enabled = true", f"{path}:10"),
        entry('api_key = "***"', "environment TENSORSCALE_API_KEY"),
        entry('database_url = "postgresql://u:***@db/x"', "environment TOOLHOST_DATABASE_URL"),
        "# workspace_quota_bytes: default: 1073741824",
        "# ca_bundle: unset",
    ]:
        assert expected in lines
    assert "hunter2" not in result.stdout and "sk-secret-value" not in result.stdout
    assert ":pw@" not in result.stdout
    for table in ("[host]", "[mcp]", "[http]", "[policy]", "[plugins.toolhost-people]",
                  "[plugins.toolhost-email]"):
        assert table in lines
    as_json = json.loads(toolhost("config", "--json", env=env).stdout)
    level = next(e for e in as_json if e["name"] == "TOOLHOST_LOG_LEVEL")
    assert level == {"table": "host", "key": "log_level", "name": "TOOLHOST_LOG_LEVEL",
                     "value": "error", "source": "environment", "default": "warning"}
    key = next(e for e in as_json if e["name"] == "TENSORSCALE_API_KEY")
    assert (key["table"], key["value"]) == ("plugins.toolhost-media", "***")


def test_config_shows_an_empty_number_as_its_default_which_reads_back(tmp_path: Path) -> None:
    """A number set empty in the environment is its default to every reader: printed as ""
    it was a line the file refuses, so the printout did not read back as toolhost.toml."""
    env = {"TOOLHOST_CONFIG": "", "TOOLHOST_ARTIFACT_RETENTION_DAYS": "",
           "TOOLHOST_HTTP_MAX_CALLS": " ", "TOOLHOST_MCP_RUN_TIMEOUT_S": ""}
    result = toolhost("config", env=env)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert ("# artifact_retention_days: default: 30".ljust(43)
            + " # environment TOOLHOST_ARTIFACT_RETENTION_DAYS (empty)") in lines
    assert ("# max_calls: default: 16".ljust(43)
            + " # environment TOOLHOST_HTTP_MAX_CALLS (empty)") in lines
    path = write_config(tmp_path, result.stdout)
    again = toolhost("config", env={"TOOLHOST_CONFIG": str(path)})
    assert again.returncode == 0, again.stderr
    as_json = json.loads(toolhost("config", "--json", env=env).stdout)
    days = next(e for e in as_json if e["name"] == "TOOLHOST_ARTIFACT_RETENTION_DAYS")
    assert (days["value"], days["source"], days["default"]) == (None, "environment", "30")


def test_config_help_lists_every_plugins_settings() -> None:
    result = toolhost("config", "--help")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for line in ["[plugins.toolhost-people] settings:", "  AGENT_PEOPLE_ENABLED  [enabled, flag]",
                 "  TENSORSCALE_API_KEY  [api_key, secret]",
                 "  AGENT_EMAIL_MODE_ENABLED  [mode_enabled, flag]",
                 "  TOOLHOST_SANDBOX_BWRAP  [bwrap, path]", "[mcp] settings (environment, or "
                 "toolhost.toml's [mcp]):", "  TOOLHOST_MCP_PRINCIPAL  [principal, text]"]:
        assert line in out.splitlines()
    serve = toolhost("serve", "--help")
    assert "  TOOLHOST_HTTP_MAX_SESSIONS  [max_sessions, integer]" in serve.stdout.splitlines()
    assert "  TOOLHOST_MCP_RUN_TIMEOUT_S  [run_timeout_s, number]" in serve.stdout.splitlines()


@pytest.mark.parametrize("command", [["tools"], ["check"], ["config"], ["plugins"],
                                     ["call", "math.calculate", "--args", '{"expression":"1"}'],
                                     ["pending"]])
def test_a_bad_file_stops_every_command_in_one_line(tmp_path: Path, command: list[str]) -> None:
    path = write_config(tmp_path, "[host]\nlog_level = \"info\"\nretention = 3\n")
    result = toolhost(*command, env={"TOOLHOST_CONFIG": str(path)})
    assert_no_traceback(result)
    assert result.returncode == 2
    assert result.stderr.startswith(f"toolhost: {path}:3: [host] retention: not a setting (")
    assert result.stderr.count("\n") == 1


def test_an_unknown_plugin_key_stops_the_start_in_one_line(tmp_path: Path) -> None:
    path = write_config(tmp_path, "[plugins.toolhost-people]\nenabld = true\n")
    result = toolhost("tools", env={"TOOLHOST_CONFIG": str(path)})
    assert_no_traceback(result)
    assert (result.returncode, result.stderr) == (
        2, f"toolhost: {path}:2: [plugins.toolhost-people] enabld: not a setting of "
           "toolhost-people (its keys: enabled)\n")


def test_the_file_sets_what_the_tools_see(tmp_path: Path) -> None:
    path = write_config(tmp_path, '[plugins.toolhost-email]\nmode_enabled = true\n'
                                  '[host]\nplugins = ["toolhost-email", "toolhost-math"]\n')
    result = toolhost("tools", env={"TOOLHOST_CONFIG": str(path)})
    assert result.returncode == 0, result.stderr
    assert [line.split()[0] for line in result.stdout.splitlines()] == [
        "email.context@1.0.0", "email.feedback@1.0.0", "math.calculate@1.0.0"]


def test_commands_that_run_no_tool_start_no_upstream_server(tmp_path: Path) -> None:
    """`pending`, `show`, `deny`, `artifacts` and `runs` leave the gateway's servers alone;
    `tools` starts them (here: a command that only leaves a mark and exits)."""
    import sys

    marker = tmp_path / "started"
    script = tmp_path / "server.py"
    script.write_text(f"open({str(marker)!r}, 'a').write('x')\n")
    path = write_config(tmp_path, f'[mcp.servers.marked]\ncommand = "{sys.executable}"\n'
                                  f'args = ["{script}"]\n')
    env = {"TOOLHOST_CONFIG": str(path)}
    for command in (["pending"], ["artifacts", "list"], ["runs", "list"]):
        result = toolhost(*command, env=env)
        assert result.returncode == 0, (command, result.stderr)
        assert not marker.exists(), command
    config = toolhost("config", env=env)
    assert f"# [mcp.servers.marked] in {path}:1: stdio {sys.executable} (toolhost plugins " \
           "shows its state and tools)" in config.stdout.splitlines()
    assert not marker.exists()
    assert toolhost("tools", env=env).returncode == 0
    assert marker.exists()


def test_check_asks_readiness_with_the_plugins_own_table(tmp_path: Path) -> None:
    """A probe that starts while the plugins load (check's readiness) sees what the plugin's
    table of toolhost.toml sets, as registration does."""
    path = write_config(tmp_path, '[plugins.toolhost-media]\napi_key = "sk-x"\n'
                                  'base_url = "http://example.org"\n')
    result = toolhost("check", env={"TOOLHOST_CONFIG": str(path),
                                    "TOOLHOST_PLUGINS": "toolhost-media,toolhost-math"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1:] == [
        "not ready: toolhost-media: image.generate, video.generate: TENSORSCALE_BASE_URL must "
        "be an https:// URL (the API key is sent with it); every call fails until it is fixed"]
