"""toolhost.toml: every setting has a key, the environment overrides the file, each problem is
one line naming the file, the line and the key (D268-D270)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from toolhost import SettingSpec
from toolhost._composition import Host, load_host
from toolhost._model import host_settings
from toolhost._model.config_file import config_path
from toolhost._model.settings import SettingError, Settings
from toolhost._pipeline.policy import PolicyConfigError
from toolhost._registration.discovery import PluginError

ROOT = Path(__file__).resolve().parent.parent


def write(tmp_path: Path, text: str, mode: int = 0o600) -> Path:
    path = tmp_path / "toolhost.toml"
    path.write_text(text)
    path.chmod(mode)
    return path


def from_file(path: Path, **environ: str) -> Settings:
    return Settings.from_environ({"TOOLHOST_CONFIG": str(path), **environ})


def _value_for(spec: SettingSpec) -> tuple[str, str]:
    """A value of ``spec``'s type as written in TOML, and its environment form."""
    return {
        "flag": ("true", "1"),
        "integer": ("42", "42"),
        "number": ("2.5", "2.5"),
        "list": ('["a", "b"]', "a,b"),
        "secret": ('"s3cr3t"', "s3cr3t"),
    }.get(spec.type, (f'"{spec.name.lower()}-value"', f"{spec.name.lower()}-value"))


def test_every_host_setting_has_its_key_in_its_group(tmp_path: Path) -> None:
    lines: dict[str, list[str]] = {group: [f"[{group}]"] for group in host_settings.GROUPS}
    expected = {}
    for spec in host_settings.HOST_SETTINGS:
        if spec.name == host_settings.POLICY_SETTING:
            continue
        toml, env = _value_for(spec)
        if spec.type == "path":  # relative to the file's directory (a relative one here)
            env = str(tmp_path / env)
        lines[host_settings.group_of(spec.name)].append(f"{host_settings.key_of(spec.name)} = {toml}")
        expected[spec.name] = env
    text = "\n".join(line for group in host_settings.GROUPS for line in lines[group]) + "\n"
    settings = from_file(write(tmp_path, text))
    assert {name: settings.env[name] for name in expected} == expected
    # Each names the line it is on.
    numbered = text.splitlines()
    for name in expected:
        line = int(settings.source_of(name).rsplit(":", 1)[1])
        key = numbered[line - 1].split(" = ")[0]
        assert key == host_settings.key_of(name)


def test_the_keys_follow_the_rule_of_the_design() -> None:
    assert host_settings.key_of("TOOLHOST_DATA_DIR") == "data_dir"
    assert host_settings.group_of("TOOLHOST_DATA_DIR") == "host"
    assert (host_settings.group_of("TOOLHOST_MCP_RUN_TIMEOUT_S"),
            host_settings.key_of("TOOLHOST_MCP_RUN_TIMEOUT_S")) == ("mcp", "run_timeout_s")
    assert (host_settings.group_of("TOOLHOST_HTTP_MAX_SESSIONS"),
            host_settings.key_of("TOOLHOST_HTTP_MAX_SESSIONS")) == ("http", "max_sessions")


def _mentioned_settings() -> set[str]:
    text = (ROOT / "README.md").read_text() + "".join(
        p.read_text() for p in sorted((ROOT / "docs").glob("*.md")) if p.name != "decisions.md")
    return set(re.findall(r"\b((?:TOOLHOST|AGENT|TENSORSCALE)_[A-Z0-9_]*[A-Z0-9])\b", text))


def test_every_setting_the_readme_and_docs_mention_can_be_set_in_the_file() -> None:
    from toolhost._composition import declared_settings

    _, declared = declared_settings(Settings(env={"TOOLHOST_DATA_DIR": "/nonexistent"}))
    known = {spec.name for spec in host_settings.HOST_SETTINGS}
    known |= {spec.name for specs in declared.values() for spec in specs}
    # TOOLHOST_CONFIG names the file itself; TOOLHOST_REQUIRE_SERVERS is the test suite's.
    missing = _mentioned_settings() - known - {"TOOLHOST_CONFIG", "TOOLHOST_REQUIRE_SERVERS"}
    assert missing == set()


def test_the_environment_overrides_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, '[host]\nlog_level = "info"\ndata_dir = "/srv/th"\n'
                           '[mcp]\nscopes = ["a"]\n')
    settings = from_file(path, TOOLHOST_LOG_LEVEL="error", TOOLHOST_MCP_SCOPES="")
    assert settings.log_level == "error"
    assert settings.source_of("TOOLHOST_LOG_LEVEL") == "environment"
    assert settings.data_dir == Path("/srv/th")
    assert settings.source_of("TOOLHOST_DATA_DIR") == f"{path}:3"
    # Set empty in the environment is still set: no scope at all, not the file's.
    assert settings.get("TOOLHOST_MCP_SCOPES") == ""
    assert settings.source_of("TOOLHOST_ARTIFACT_STORE") == "default"


def test_the_xdg_config_directory_is_read_when_toolhost_config_is_unset(tmp_path: Path) -> None:
    (tmp_path / "toolhost").mkdir()
    (tmp_path / "toolhost" / "toolhost.toml").write_text('[host]\nlog_level = "debug"\n')
    settings = Settings.from_environ({"XDG_CONFIG_HOME": str(tmp_path)})
    assert settings.log_level == "debug"
    # Set empty, TOOLHOST_CONFIG reads no file at all.
    assert config_path({"XDG_CONFIG_HOME": str(tmp_path), "TOOLHOST_CONFIG": ""}) is None
    assert Settings.from_environ({"XDG_CONFIG_HOME": str(tmp_path / "none")}).config is None


@pytest.mark.parametrize(("text", "message"), [
    ("[host\n", "{path}:1: not TOML: Expected ']' at the end of a table declaration "
                "(at line 1, column 6)"),
    ('[host]\nlog_level = "info"\nlog_levle = "debug"\n',
     "{path}:3: [host] log_levle: not a setting (its keys: "),
    ("[http]\nmax_sessions = \"ten\"\n",
     '{path}:2: [http] max_sessions: must be a whole number, not "ten"'),
    ("[mcp]\n\nelicitation_timeout_s = true\n",
     "{path}:3: [mcp] elicitation_timeout_s: must be a finite number, not true"),
    ("[mcp]\nrun_timeout_s = inf\n",
     "{path}:2: [mcp] run_timeout_s: must be a finite number, not inf"),
    ('[host]\ndata_dir = "/tmp/x\\u0000y"\n',
     "{path}:2: [host] data_dir: holds a NUL character, which no setting can"),
    ('[http]\nintrospection_client_secret = { file = "a\\u0000b" }\n',
     "{path}:2: [http] introspection_client_secret: holds a NUL character, which no setting "
     "can"),
    ('[http]\nintrospection_client_secret = { file = "~nosuchuser-th/s" }\n',
     "{path}:2: [http] introspection_client_secret: refers to the file '~nosuchuser-th/s', "
     "whose home directory does not exist"),
    # A credential of the wrong type is not quoted back: it may be the token itself.
    ("[http]\nintrospection_client_secret = 918273645501\n",
     "{path}:2: [http] introspection_client_secret: must be a string, not a number"),
    # Two tables for one distribution, however it is spelt.
    ("[plugins.toolhost_people]\nenabled = true\n[plugins.Toolhost-People]\nenabled = false\n",
     "{path}:3: [plugins.Toolhost-People]: a second table for toolhost-people (also "
     "[plugins.toolhost_people])"),
    ("[host]\nplugins = [1, 2]\n", "{path}:2: [host] plugins: must be a list of strings, "
                                   "not an array"),
    ("[hots]\nx = 1\n", "{path}:1: [hots]: not a table of toolhost.toml (host, mcp, http, "
                        "policy, plugins.<name>)"),
    ("[host]\npolicy = \"{}\"\n", "{path}:2: [host] policy: not a setting (the policy is "
                                  "the [policy] table)"),
    ("[policy]\n\"CODE_EXECUTION/LOW\" = 3\n",
     '{path}:2: [policy] CODE_EXECUTION/LOW: must be "allow", "approval" or "deny", not 3'),
    ('[host]\ndata_dir = { env = "NOT_SET_ANYWHERE_X" }\n',
     "{path}:2: [host] data_dir: refers to the environment variable NOT_SET_ANYWHERE_X, "
     "which is not set"),
    ('[http]\nintrospection_client_secret = { file = "missing.txt" }\n',
     "{path}:2: [http] introspection_client_secret: refers to the file {dir}/missing.txt, "
     "which cannot be read (No such file or directory)"),
    ('[http]\nintrospection_client_secret = { value = "x" }\n',
     '{path}:2: [http] introspection_client_secret: a reference is { env = "NAME" } or '
     '{ file = "PATH" }'),
])
def test_a_bad_file_is_one_line_naming_the_file_the_line_and_the_key(
        tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(SettingError) as caught:
        from_file(path)
    expected = message.replace("{path}", str(path)).replace("{dir}", str(tmp_path))
    assert str(caught.value).startswith(expected)
    assert "\n" not in str(caught.value)


def test_toolhost_config_naming_no_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(SettingError, match=r"^TOOLHOST_CONFIG is '.*nope.toml', which is not "
                                           r"a file$"):
        Settings.from_environ({"TOOLHOST_CONFIG": str(tmp_path / "nope.toml")})
    for named in ("~nosuchuser-th/toolhost.toml", str(tmp_path), "/dev/zero"):
        with pytest.raises(SettingError, match=r"which is not a file$"):
            Settings.from_environ({"TOOLHOST_CONFIG": named})


def test_a_file_reference_reads_only_a_small_regular_file(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "big").write_bytes(b"x" * (64 * 1024 + 1))
    for name, problem in (("fifo", "not a regular file"), ("big", "more than 65536 bytes")):
        path = write(tmp_path, f'[http]\nintrospection_client_secret = {{ file = "{name}" }}\n')
        with pytest.raises(SettingError) as caught:
            from_file(path)  # a FIFO would block here if it were opened for reading
        assert str(caught.value) == (
            f"{path}:2: [http] introspection_client_secret: refers to the file "
            f"{tmp_path / name}, which cannot be read ({problem})")


def test_a_file_any_user_can_change_is_refused(tmp_path: Path) -> None:
    """The file sets the policy and the commands the gateway starts: one any user of the
    machine can write, or replace through its directory, would be theirs to run."""
    text = '[mcp.servers.files]\ncommand = "/bin/sh"\nargs = ["-c", "touch pwned"]\n'
    path = write(tmp_path, text, mode=0o666)
    with pytest.raises(SettingError) as caught:
        from_file(path)
    assert str(caught.value) == (
        f"{path}: any user can change {path}, and the file sets the policy, the plugins and "
        f"the commands the gateway starts: chmod o-w {path}")
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    inside = write(shared, text)
    with pytest.raises(SettingError, match=rf"any user can change {shared}, .*chmod o-w "
                                           rf"{shared}$"):
        from_file(inside)
    (tmp_path / "private").mkdir()
    private = write(tmp_path / "private", text)
    exposed = shared / "link.toml"  # a link others may replace names a private file: the same
    exposed.symlink_to(private)
    with pytest.raises(SettingError, match=rf"any user can change {shared}, "):
        from_file(exposed)
    link = tmp_path / "link.toml"
    link.symlink_to(private)
    assert from_file(link).config is not None  # a private file, a private link: read
    shared.chmod(0o1777)  # sticky, as /tmp: no one but its owner may replace it
    assert from_file(inside).config is not None
    write(tmp_path, text, mode=0o664)  # group-writable: the operator chose the group
    assert from_file(path).config is not None


def test_a_link_chain_through_a_directory_others_may_change_is_refused(tmp_path: Path) -> None:
    """Each link the path resolves through counts, not only the first name and the last
    target: ``home/toolhost.toml`` -> ``shared/middle`` -> ``private/toolhost.toml`` is any
    user's to repoint (a review's bypass), and so is a directory link through ``shared``."""
    text = "[policy]\n"
    for name in ("private", "home", "shared"):
        (tmp_path / name).mkdir()
    (tmp_path / "shared").chmod(0o777)
    private = write(tmp_path / "private", text)
    (tmp_path / "shared" / "middle").symlink_to(private)
    (tmp_path / "home" / "toolhost.toml").symlink_to(tmp_path / "shared" / "middle")
    (tmp_path / "shared" / "dir").symlink_to(tmp_path / "private")
    (tmp_path / "home" / "dir").symlink_to(tmp_path / "shared" / "dir")
    for named in (tmp_path / "home" / "toolhost.toml", tmp_path / "home" / "dir" / "toolhost.toml"):
        with pytest.raises(SettingError, match=rf"any user can change {tmp_path / 'shared'}, "):
            from_file(named)
    (tmp_path / "shared").chmod(0o755)
    assert from_file(tmp_path / "home" / "toolhost.toml").config is not None


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user takes root")
def test_another_users_file_in_a_sticky_directory_everyone_writes_is_refused(
        tmp_path: Path) -> None:
    """The sticky bit keeps others from replacing a file, not its owner from rewriting it:
    a ``toolhost.toml`` another user made in a ``/tmp``-like directory is theirs to change."""
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    path = write(sticky, "[policy]\n", mode=0o644)
    os.chown(path, 65534, 65534)
    with pytest.raises(SettingError) as caught:
        from_file(path)
    assert str(caught.value) == (
        f"{path}: {path} belongs to another user in {sticky}, which any user can write, and "
        "the file sets the policy, the plugins and the commands the gateway starts: keep it "
        "in a directory only you can write")
    os.chown(path, 0, 0)
    assert from_file(path).config is not None


def test_a_configuration_file_past_a_mebibyte_is_not_read(tmp_path: Path) -> None:
    path = write(tmp_path, "# " + "x" * (1024 * 1024) + "\n")
    with pytest.raises(SettingError) as caught:
        from_file(path)
    assert str(caught.value) == f"{path}: cannot be read (more than 1048576 bytes)"


def test_a_password_in_a_urls_query_is_a_secret_too(tmp_path: Path) -> None:
    url = "postgresql://db.example/th?user=app&password=hunter2"
    path = write(tmp_path, f'[host]\ndatabase_url = "{url}"\n', mode=0o644)
    with pytest.raises(SettingError, match="a secret written in a file every user can read"):
        from_file(path)
    from toolhost._model.settings import redact_url_password

    assert redact_url_password(url) == "postgresql://db.example/th?user=app&password=***"


@pytest.mark.parametrize(("conninfo", "shown"), [
    ("host=db user=app password=hunter2", "host=db user=app password=***"),
    ("host=db password = 'hun ter\\'2' dbname=th", "host=db password=*** dbname=th"),
    ("host=db sslpassword=hunter2 sslmode=require", "host=db sslpassword=*** sslmode=require"),
    ("password='hunter2 never closed", "password=***"),
    # libpq reads backslash escapes in a bare value too: one value, masked whole.
    ("host=db password=hunter2\\ a\\ b port=5", "host=db password=*** port=5"),
    # Brackets are no mask of ours (only *** and [redacted] are).
    ("host=db password=[hunter2]", "host=db password=***"),
])
def test_a_password_in_a_libpq_conninfo_is_a_secret_too(
        tmp_path: Path, conninfo: str, shown: str) -> None:
    # Regression: TOOLHOST_DATABASE_URL's conninfo form (libpq's key=value) kept its password
    # in `toolhost config`, in the settings' repr, and inline in a file every user can read.
    path = write(tmp_path, f"[host]\ndatabase_url = {json.dumps(conninfo)}\n", mode=0o644)
    with pytest.raises(SettingError, match="a secret written in a file every user can read"):
        from_file(path)
    from toolhost._model.settings import Settings, redact_url_password

    assert redact_url_password(conninfo) == shown
    assert "hunter2" not in repr(Settings(env={"TOOLHOST_DATABASE_URL": conninfo}))


def test_a_percent_encoded_credential_parameter_is_a_secret_too() -> None:
    from toolhost._model.settings import redact_url_password

    # libpq decodes a query parameter's name: pass%77ord is password.
    assert redact_url_password("postgresql://db/th?pass%77ord=hunter2&sslmode=require") == (
        "postgresql://db/th?pass%77ord=***&sslmode=require")


def test_no_repr_shows_a_value_from_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, '[http]\nintrospection_client_secret = "s3cr3t-inline"\n'
                           '[plugins.toolhost-media]\napi_key = "sk-live-inline"\n')
    settings = from_file(path)
    assert settings.config is not None
    for shown in (repr(settings), repr(settings.config)):
        assert "s3cr3t-inline" not in shown and "sk-live-inline" not in shown


def test_a_plugin_table_is_found_however_its_name_is_spelt(tmp_path: Path) -> None:
    path = write(tmp_path, "[plugins.Toolhost_People]\nenabled = true\n")
    people = [SettingSpec(name="AGENT_PEOPLE_ENABLED", key="enabled", type="flag",
                          description="x")]
    merged = from_file(path).with_plugin_settings("toolhost-people", people)
    assert merged.flag("AGENT_PEOPLE_ENABLED")
    assert merged.source_of("AGENT_PEOPLE_ENABLED") == f"{path}:2"


def test_a_key_in_an_inline_table_is_named_at_the_line_that_holds_it(tmp_path: Path) -> None:
    path = write(tmp_path, '[host]\nlog_level = "info"\n\n[plugins]\n'
                           'toolhost-people = { enabld = true }\n')
    people = [SettingSpec(name="AGENT_PEOPLE_ENABLED", key="enabled", type="flag",
                          description="x")]
    with pytest.raises(SettingError, match=rf"^{re.escape(str(path))}:5: "):
        from_file(path).with_plugin_settings("toolhost-people", people)


def test_an_inline_secret_needs_a_file_other_users_cannot_read(tmp_path: Path) -> None:
    text = '[http]\nintrospection_client_secret = "hunter2"\n'
    path = write(tmp_path, text, mode=0o644)
    with pytest.raises(SettingError) as caught:
        from_file(path)
    assert str(caught.value) == (
        f"{path}:2: [http] introspection_client_secret: a secret written in a file every "
        f'user can read: reference it ({{ env = "NAME" }} or {{ file = "PATH" }}) or chmod '
        f"o-r {path}")
    # A database URL with a password is one too; without one it is not.
    write(tmp_path, '[host]\ndatabase_url = "postgresql://u:pw@db/x"\n', mode=0o644)
    with pytest.raises(SettingError, match="a secret written in a file every user can read"):
        from_file(path)
    write(tmp_path, '[host]\ndatabase_url = "postgresql://u@db/x"\n', mode=0o644)
    assert from_file(path).get("TOOLHOST_DATABASE_URL") == "postgresql://u@db/x"
    # The operator insists: a file only its owner (and group) can read may hold it.
    path.write_text(text)
    path.chmod(0o640)
    assert from_file(path).get("TOOLHOST_HTTP_INTROSPECTION_CLIENT_SECRET") == "hunter2"


def test_a_secret_is_referenced_from_the_environment_or_a_file(tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("from-a-file\n")
    path = write(tmp_path, '[http]\nintrospection_client_secret = { file = "secret.txt" }\n'
                           '[plugins.toolhost-media]\napi_key = { env = "MEDIA_API_KEY" }\n',
                 mode=0o644)
    settings = from_file(path, MEDIA_API_KEY="sk-from-env")
    assert settings.get("TOOLHOST_HTTP_INTROSPECTION_CLIENT_SECRET") == "from-a-file"
    media = [SettingSpec(name="TENSORSCALE_API_KEY", key="api_key", type="secret",
                         description="k")]
    merged = settings.with_plugin_settings("toolhost-media", media)
    assert merged.get("TENSORSCALE_API_KEY") == "sk-from-env"
    assert merged.source_of("TENSORSCALE_API_KEY") == f"{path}:4"
    # The value is in no repr.
    assert "sk-from-env" not in repr(merged) and "from-a-file" not in repr(merged)


def flagged_plugin() -> object:
    """A plugin whose one tool, fx.echo, registers only with its flag (``activates``)."""
    import types

    from conftest import make_tool

    from toolhost import Domain, Tool, hookimpl

    @hookimpl
    def toolhost_settings() -> list[SettingSpec]:
        return [SettingSpec(name="FAKE_ENABLED", key="enabled", type="flag",
                            description="register fx.echo", activates=("fx.echo",)),
                SettingSpec(name="FAKE_LIMIT", type="integer", description="a number")]

    @hookimpl
    def toolhost_domains() -> list[Domain]:
        return [Domain("fx")]

    @hookimpl
    def toolhost_tools(settings: Settings) -> list[Tool]:
        return [make_tool()] if settings.flag("FAKE_ENABLED") else []

    return types.SimpleNamespace(toolhost_settings=toolhost_settings,
                                 toolhost_domains=toolhost_domains,
                                 toolhost_tools=toolhost_tools)


def test_a_plugin_table_sets_what_the_plugin_declares(tmp_path: Path) -> None:
    path = write(tmp_path, "[plugins.fake-dist]\nenabled = true\nfake_limit = 7\n")
    host = Host.from_plugins({"fake-dist": flagged_plugin()}, settings=from_file(path))
    try:
        assert host.registry.names() == ["fx.echo"]
        assert host.settings.get("FAKE_LIMIT") == "7"
        assert host.settings.source_of("FAKE_ENABLED") == f"{path}:2"
        # The environment still wins over the plugin's table.
        off = Host.from_plugins({"fake-dist": flagged_plugin()},
                                settings=from_file(path, FAKE_ENABLED="0"))
        assert off.registry.names() == []
        off.close()
    finally:
        host.close()


def test_a_key_the_plugin_does_not_declare_refuses_the_start(tmp_path: Path) -> None:
    path = write(tmp_path, "[plugins.fake-dist]\n\nenabeld = true\n")
    with pytest.raises(SettingError) as caught:
        Host.from_plugins({"fake-dist": flagged_plugin()}, settings=from_file(path))
    assert str(caught.value) == (f"{path}:3: [plugins.fake-dist] enabeld: not a setting of "
                                 "fake-dist (its keys: enabled, fake_limit)")
    write(tmp_path, '[plugins.fake-dist]\nenabled = "yes"\n')
    with pytest.raises(SettingError, match=r"toolhost.toml:2: \[plugins.fake-dist\] enabled: "
                                           r'must be true or false, not "yes"$'):
        Host.from_plugins({"fake-dist": flagged_plugin()}, settings=from_file(path))


def test_a_plugin_may_not_declare_the_hosts_setting_or_anothers() -> None:
    import types

    from toolhost import hookimpl

    def declaring(name: str) -> object:
        module = types.SimpleNamespace()

        @hookimpl
        def toolhost_settings() -> list[SettingSpec]:
            return [SettingSpec(name=name, type="text", description="x")]

        module.toolhost_settings = toolhost_settings
        return module

    with pytest.raises(PluginError, match="declares the setting TOOLHOST_DATA_DIR, which is "
                                          "the host's"):
        Host.from_plugins({"a-dist": declaring("TOOLHOST_DATA_DIR")})
    with pytest.raises(PluginError, match="declares the setting FAKE_ENABLED, which fake-dist "
                                          "declares"):
        Host.from_plugins({"fake-dist": flagged_plugin(),
                           "b-dist": declaring("FAKE_ENABLED")})
    with pytest.raises(ValueError, match="not an environment name"):
        SettingSpec(name="lower", type="text", description="x")
    with pytest.raises(ValueError, match=r"not a toolhost\.toml key"):
        SettingSpec(name="X_Y", key="Bad-Key", type="text", description="x")


def test_the_policy_table_is_the_policy(tmp_path: Path) -> None:
    path = write(tmp_path, f'[host]\ndata_dir = "{tmp_path / "data"}"\n'
                           '[policy]\n"WORKSPACE_WRITE/MEDIUM" = "deny"\n')
    host = load_host(from_file(path), sources=[])
    try:
        from toolhost._model.spec import Risk, SideEffect
        from toolhost._pipeline.policy import PolicyAction

        assert host._policy is not None
        decision = host._policy.decide(SideEffect.WORKSPACE_WRITE, Risk.MEDIUM)
        assert decision.action is PolicyAction.DENY
    finally:
        host.close()
    # A bad cell names its own line; from the environment, the setting as before.
    write(tmp_path, '[policy]\n"CODE_EXECUTION/LOW" = "approval"\n"FOO/LOW" = "deny"\n')
    with pytest.raises(PolicyConfigError) as caught:
        load_host(from_file(path), sources=[])
    assert str(caught.value) == (f"{path}:3: [policy] key 'FOO/LOW': 'FOO' is not a side "
                                 "effect (NONE|WORKSPACE_READ|WORKSPACE_WRITE|CODE_EXECUTION|"
                                 "EXTERNAL_WRITE)")
    with pytest.raises(PolicyConfigError, match=r"^TOOLHOST_POLICY key 'BAR/LOW'"):
        load_host(from_file(path, TOOLHOST_POLICY=json.dumps({"BAR/LOW": "deny"})), sources=[])
    # Loosening EXTERNAL_WRITE from the file still needs the override, named at its cell.
    write(tmp_path, '[policy]\n"EXTERNAL_WRITE/LOW" = "allow"\n')
    with pytest.raises(PolicyConfigError, match=rf"^{re.escape(str(path))}:2: \[policy\] "
                                                "policy loosens EXTERNAL_WRITE/LOW"):
        load_host(from_file(path), sources=[])


def test_no_file_and_no_setting_leaves_the_settings_as_the_environment() -> None:
    environ = {"TOOLHOST_CONFIG": "", "TOOLHOST_LOG_LEVEL": "info"}
    settings = Settings.from_environ(environ)
    assert settings.env == environ and settings.origins == {} and settings.config is None
    assert os.environ.get("TOOLHOST_CONFIG") == ""  # the suite reads no operator's file


_BIND_MOUNTED = """
import os, sys
from pathlib import Path
from toolhost._model.config_file import ConfigFileError, read_config
try:
    read_config(Path(sys.argv[1]), {})
    print("read")
except ConfigFileError as exc:
    print("refused:", exc)
"""


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                    reason="a bind mount in a private mount namespace takes root")
def test_a_file_bind_mounted_into_a_sticky_directory_is_read(tmp_path: Path) -> None:
    """``docker run -v host.toml:/tmp/toolhost.toml``: the name is a mount point, owned by a
    uid the container may not run as; no one can replace or rename it, so it is not another
    user's file to rewrite (a third review's false refusal)."""
    (tmp_path / "src").mkdir()
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    source = write(tmp_path / "src", "[policy]\n", mode=0o644)
    os.chown(source, 65534, 65534)
    target = sticky / "toolhost.toml"
    target.write_text("")
    os.chown(target, 65534, 65534)
    host = Path(__file__).resolve().parent.parent / "host"
    done = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c",
         'mount --bind "$1" "$2" && exec "$3" -c "$4" "$2"', "sh", str(source), str(target),
         sys.executable, _BIND_MOUNTED],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": str(host)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "read"
    # The same file owned so, but no mount: another user's to rewrite, refused.
    with pytest.raises(SettingError, match="belongs to another user"):
        from_file(target)
