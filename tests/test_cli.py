"""The operator surface: `toolhost tools|check|call|demo`, run as a real subprocess."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
from installed import GOOD_PLUGIN, install_fake_plugin

from toolhost.testing import run_toolhost

FIRST_PARTY = "toolhost-math,toolhost-system"


def toolhost(*args: str, env: dict[str, str] | None = None,
             site: Path | None = None) -> subprocess.CompletedProcess[str]:
    # Never the operator's real data directory: each command gets a fresh one unless told.
    return run_toolhost(*args, data_dir=Path(tempfile.mkdtemp(prefix="toolhost-cli-")),
                        env=env, path=[site] if site is not None else [])


def assert_no_traceback(result: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout


def test_call_prints_exactly_391() -> None:
    result = toolhost("call", "math.calculate", "--args", '{"expression": "17 * 23"}')
    assert (result.returncode, result.stdout, result.stderr) == (0, "391\n", "")


def test_call_json_prints_the_whole_outcome() -> None:
    result = toolhost("call", "math.calculate", "--args", '{"expression": "1/3"}', "--json")
    assert result.returncode == 0
    data = json.loads(result.stdout)
    assert data["status"] == "succeeded" and data["output_trust"] == "INTERNAL_TOOL"
    assert data["structured"]["result_exact"] is False
    assert data["content"].endswith("\nrounded to 50 significant digits")
    # The run's attachments ride beside the outcome: a calculation exports nothing.
    assert data["attachments"] == [] and isinstance(data["run_id"], str)


def test_call_runs_in_the_run_it_is_given() -> None:
    result = toolhost("call", "math.calculate", "--args", '{"expression": "1"}', "--json",
                      "--run", "run-7", "--conversation", "c.1")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["run_id"] == "run-7"


@pytest.mark.parametrize("option", ["--run", "--conversation"])
@pytest.mark.parametrize("value", ["../x", "a/b", ".x", "", "x" * 129])
def test_a_run_or_conversation_that_is_not_a_plain_name_is_one_line(
        option: str, value: str) -> None:
    result = toolhost("call", "math.calculate", "--args", '{"expression": "1"}', option, value)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (f"toolhost: {option} must be 1 to 128 letters, digits, '.', '_' "
                             "or '-', starting with a letter or digit\n")


def test_call_failure_prints_the_static_message_and_exits_1() -> None:
    result = toolhost("call", "system.current_time", "--args", '{"timezone": "EST"}')
    assert result.returncode == 1
    assert result.stdout == (
        "Unknown timezone. Provide an IANA name such as UTC, America/New_York, or Europe/London.\n"
    )
    failed = toolhost("call", "system.current_time", "--args", '{"timezone": "EST"}', "--json")
    data = json.loads(failed.stdout)
    assert (data["kind"], data["reason_code"], data["retryable"]) == (
        "INVALID_ARGUMENTS", "tool.invalid_arguments.unknown_timezone", False)
    assert failed.returncode == 1


@pytest.mark.parametrize(
    ("args", "stderr"),
    [
        (["call", "math.calculate", "--args", "{nope"],
         "toolhost: --args is not valid JSON (Expecting property name enclosed in double quotes "
         "at position 1)\n"),
        (["call", "math.nope"],
         "toolhost: no tool 'math.nope' is registered (toolhost tools lists them)\n"),
        (["call", "math.calculate", "--version", "9.9.9", "--args", '{"expression": "1"}'],
         "toolhost: math.calculate has no version '9.9.9' (registered: 1.0.0)\n"),
    ],
)
def test_bad_input_is_one_clear_line_and_non_zero(args: list[str], stderr: str) -> None:
    result = toolhost(*args)
    assert result.returncode != 0 and result.stderr == stderr
    assert_no_traceback(result)


def invocation_line(stderr: str, reason_code: str, data_dir: Path) -> str:
    """The rest of ``stderr`` after the line that names a failed call's row for ``toolhost
    show``, which must be its last (the id is the one ``show`` finds)."""
    rest, _, line = stderr.rstrip("\n").rpartition("\n")
    found = re.fullmatch(rf"toolhost: invocation ([0-9a-f]{{32}}) failed \({re.escape(reason_code)}"
                         r"\): toolhost show \1", line)
    assert found, stderr
    shown = toolhost("show", found.group(1), "--json",
                     env={"TOOLHOST_DATA_DIR": str(data_dir)})
    assert json.loads(shown.stdout)["reason_code"] == reason_code
    return rest + "\n" if rest else ""


def test_arguments_that_are_not_an_object_are_a_validation_failure(tmp_path: Path) -> None:
    result = toolhost("call", "math.calculate", "--args", "[1]",
                      env={"TOOLHOST_PLUGINS": FIRST_PARTY, "TOOLHOST_DATA_DIR": str(tmp_path)})
    assert result.returncode == 1
    assert result.stdout == "The arguments do not match the tool's input schema.\n"
    assert invocation_line(result.stderr, "tool.invalid_arguments.schema", tmp_path) == (
        'toolhost: detail: {"problem": "arguments are not an object"}\n')


@pytest.mark.parametrize("as_json", [False, True])
def test_a_schema_failure_prints_the_operator_detail_on_stderr(as_json: bool,
                                                               tmp_path: Path) -> None:
    # The model's text stays the static message; which rule failed is for the operator.
    result = toolhost("call", "math.calculate", "--args", '{"expression": 17}',
                      *(["--json"] if as_json else []),
                      env={"TOOLHOST_PLUGINS": FIRST_PARTY, "TOOLHOST_DATA_DIR": str(tmp_path)})
    assert result.returncode == 1
    # Text mode also names the row to look up (regression: a failed call named none).
    stderr = result.stderr if as_json else invocation_line(
        result.stderr, "tool.invalid_arguments.schema", tmp_path)
    assert stderr == (
        'toolhost: detail: {"problem": "data.expression must be string", "rule": "type"}\n')
    if as_json:
        data = json.loads(result.stdout)
        assert (data["content"], data["reason_code"]) == (
            "The arguments do not match the tool's input schema.", "tool.invalid_arguments.schema")
        assert "detail" not in data and "must be string" not in result.stdout
    else:
        assert result.stdout == "The arguments do not match the tool's input schema.\n"


def test_tools_lists_the_registry_and_json_round_trips() -> None:
    result = toolhost("tools", env={"TOOLHOST_PLUGINS": FIRST_PARTY})
    assert result.returncode == 0
    assert result.stdout.splitlines() == [
        "math.calculate@1.0.0                 NONE/LOW/READ_ONLY INTERNAL_TOOL (toolhost-math)",
        "system.current_time@1.0.0            NONE/LOW/READ_ONLY INTERNAL_TOOL (toolhost-system)",
    ]
    specs = json.loads(toolhost("tools", "--json", env={"TOOLHOST_PLUGINS": FIRST_PARTY}).stdout)
    assert [s["name"] for s in specs] == ["math.calculate", "system.current_time"]
    assert specs[0]["input_schema"]["properties"]["expression"]["maxLength"] == 1024
    assert specs[1]["distribution"] == "toolhost-system"


def test_check_passes_for_the_first_party_plugins() -> None:
    result = toolhost("check", env={"TOOLHOST_PLUGINS": FIRST_PARTY})
    assert result.returncode == 0
    assert result.stdout == "ok: 2 tools registered from toolhost-math, toolhost-system\n"


def test_help_loads_no_plugin(tmp_path: Path) -> None:
    marker = tmp_path / "imported"
    install_fake_plugin(tmp_path / "site", "fake-marker", "fake_marker",
                        f"open({str(marker)!r}, 'w').close()\n" + GOOD_PLUGIN)
    env = {"TOOLHOST_PLUGINS": "fake-marker"}
    assert toolhost("--help", env=env, site=tmp_path / "site").returncode == 0
    assert not marker.exists()
    assert toolhost("check", env=env, site=tmp_path / "site").returncode == 0
    assert marker.exists()


def test_a_broken_plugin_stops_the_start_with_one_line(tmp_path: Path) -> None:
    install_fake_plugin(tmp_path / "site", "fake-broken", "fake_broken",
                        "import os\nimport nowhere_at_all\n")
    result = toolhost("check", env={"TOOLHOST_PLUGINS": "fake-broken"}, site=tmp_path / "site")
    assert result.returncode == 1
    assert result.stderr == (
        "toolhost: plugin fake-broken: entry point fake_broken = fake_broken failed to import: "
        "ModuleNotFoundError: No module named 'nowhere_at_all' at "
        f"{tmp_path / 'site' / 'fake_broken.py'}:2 (leave it out with TOOLHOST_PLUGINS, or fix "
        "and reinstall it)\n"
    )


def test_version_prints_the_toolhost_core_version() -> None:
    from importlib import metadata

    result = toolhost("--version")
    assert (result.returncode, result.stdout, result.stderr) == (
        0, f"toolhost-core {metadata.version('toolhost-core')}\n", "")


@pytest.mark.parametrize(
    ("env", "default"),
    [({"XDG_DATA_HOME": "/srv/xdg"}, "/srv/xdg/toolhost"),
     ({"HOME": "/home/operator"}, "/home/operator/.local/share/toolhost")],
)
def test_help_names_the_settings_and_the_default_data_directory(
    env: dict[str, str], default: str,
) -> None:
    full = {k: v for k, v in os.environ.items() if k != "XDG_DATA_HOME"} | env
    result = subprocess.run([sys.executable, "-m", "toolhost._cli", "--help"], env=full,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    epilog = result.stdout[result.stdout.index("[host] settings"):].splitlines()
    assert epilog[:5] == [
        "[host] settings (environment, or toolhost.toml's [host]):",
        "  TOOLHOST_DATA_DIR  [data_dir, path]",
        "      the invocation records, artifacts and run workspaces (default:",
        f"      {default})",
        "  TOOLHOST_PLUGINS  [plugins, list]",
    ]
    from toolhost._model.host_settings import in_group

    # Every [host] setting of the catalog, each once; the others are serve's (serve --help).
    named = [line.split()[0] for line in epilog if line.startswith("  TOOLHOST_")]
    assert named == [spec.name for spec in in_group("host")]
    assert "TOOLHOST_MCP_PRINCIPAL" not in result.stdout
    assert epilog[-4:] == [
        "Every setting may also be written in toolhost.toml (TOOLHOST_CONFIG, else",
        "$XDG_CONFIG_HOME/toolhost/toolhost.toml); the environment overrides the file.",
        "toolhost serve --help lists the [mcp] and [http] settings, toolhost config --help",
        "every plugin's too, and toolhost config shows the value of each and its source.",
    ]


@pytest.mark.parametrize("command", [["check"], ["call", "math.calculate", "--args", "{}"]])
def test_an_unknown_log_level_is_one_line_and_exit_2(command: list[str]) -> None:
    result = toolhost(*command, env={"TOOLHOST_LOG_LEVEL": "loud",
                                     "TOOLHOST_PLUGINS": FIRST_PARTY})
    assert (result.returncode, result.stdout, result.stderr) == (
        2, "", "toolhost: TOOLHOST_LOG_LEVEL is 'loud', not a log level: set it to one of debug, "
               "info, warning, error, critical (or leave it unset for warning)\n")


@pytest.mark.parametrize("command", [["check"], ["tools"]])
def test_a_bad_retention_refuses_even_commands_that_store_nothing(command: list[str]) -> None:
    result = toolhost(*command, env={"TOOLHOST_ARTIFACT_RETENTION_DAYS": "soon",
                                     "TOOLHOST_PLUGINS": FIRST_PARTY})
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith("toolhost: TOOLHOST_ARTIFACT_RETENTION_DAYS ")
    assert result.stderr.count("\n") == 1


@pytest.mark.parametrize("level", ["WARN", " Error ", "debug"])
def test_log_levels_are_read_in_any_case(level: str) -> None:
    result = toolhost("call", "math.calculate", "--args", '{"expression": "1"}',
                      env={"TOOLHOST_LOG_LEVEL": level, "TOOLHOST_PLUGINS": FIRST_PARTY})
    assert (result.returncode, result.stdout) == (0, "1\n")
    assert_no_traceback(result)


def test_exclude_leaves_one_plugin_out_after_the_allow_list() -> None:
    result = toolhost("check", env={"TOOLHOST_PLUGINS": FIRST_PARTY,
                                    "TOOLHOST_PLUGINS_EXCLUDE": "Toolhost_Math"})
    assert (result.returncode, result.stdout, result.stderr) == (
        0, "ok: 1 tools registered from toolhost-system\n", "")


def idle(plugins: str) -> str:
    """``check``'s first line when only ``plugins`` loaded, and none registered a tool."""
    return (f"ok: 0 tools registered: {plugins} registered none under these settings "
            "(toolhost plugins says why)")


def test_check_of_plugins_that_registered_nothing_names_them() -> None:
    # Loaded but inactive: "from no plugins" read as if nothing were installed.
    result = toolhost("check", env={"TOOLHOST_PLUGINS": "toolhost-people",
                                    "AGENT_PEOPLE_ENABLED": ""})
    assert (result.returncode, result.stdout, result.stderr) == (
        0, f"{idle('toolhost-people')}\n", "")


def test_excluding_a_plugin_that_is_not_installed_is_one_line() -> None:
    from importlib import metadata

    from toolhost._model.settings import normalize_dist_name

    installed = sorted({normalize_dist_name(ep.dist.name)
                        for ep in metadata.entry_points(group="toolhost.plugins") if ep.dist})
    result = toolhost("check", env={"TOOLHOST_PLUGINS_EXCLUDE": "toolhost-dmeo"})
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        "toolhost: plugin toolhost-dmeo: TOOLHOST_PLUGINS_EXCLUDE names it, but no installed "
        "distribution provides a toolhost.plugins entry point under that name (installed: "
        f"{', '.join(installed)})\n")


CLOCK_READING_PLUGIN = GOOD_PLUGIN + """
import datetime as dt
from time import time


def stamp():
    return dt.datetime.now()
"""


def test_check_refuses_a_plugin_that_reads_ambient_time(tmp_path: Path) -> None:
    site = tmp_path / "site"
    install_fake_plugin(site, "fake-clock", "fake_clock", CLOCK_READING_PLUGIN)
    result = toolhost("check", env={"TOOLHOST_PLUGINS": "fake-clock"}, site=site)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        f"toolhost: plugin fake-clock fails the determinism scan: {site / 'fake_clock.py'}:9: "
        "from time import time (and 1 more): a tool reads the time from services.clock, never "
        "the system's (leave the plugin out with TOOLHOST_PLUGINS_EXCLUDE=fake-clock, or fix "
        "and reinstall it)\n")
    assert_no_traceback(result)


def test_check_scans_only_the_plugins_files(tmp_path: Path) -> None:
    # A module beside the plugin that is not the plugin's own is not the plugin's concern.
    site = tmp_path / "site"
    install_fake_plugin(site, "fake-marker", "fake_marker", GOOD_PLUGIN)
    (site / "unrelated.py").write_text("import datetime\ndatetime.datetime.now()\n")
    result = toolhost("check", env={"TOOLHOST_PLUGINS": "fake-marker"}, site=site)
    assert (result.returncode, result.stdout, result.stderr) == (
        0, f"{idle('fake-marker')}\n", "")


MCP_PLUGIN = '''
from toolhost import (hookimpl, Domain, Tool, ToolSpec, ToolOutput, Kind, Source, TargetKind,
                      SideEffect, Risk, Idempotency, Trust)

SCHEMA = {"type": "object", "properties": {}, "required": [], "additionalProperties": False}
SPEC = ToolSpec(
    name="mcp.sneaky", version="1.0.0", description="Pretends to be an MCP tool.",
    input_schema=SCHEMA, output_schema=SCHEMA, kind=Kind.CAPABILITY, source=Source.BUILTIN,
    target_kind=TargetKind.IN_PROCESS, server_id=None, side_effect=SideEffect.NONE,
    risk=Risk.LOW, idempotency=Idempotency.READ_ONLY, output_trust=Trust.INTERNAL_TOOL,
    required_scopes=(), timeout_s=2, maximum_output_bytes=4096, allow_parallel=True,
    deprecated=False,
)

@hookimpl
def toolhost_domains():
    return [Domain("mcp")]

@hookimpl
def toolhost_tools(settings):
    return [Tool(SPEC, call=lambda arguments, context: None)]
'''


def pip_install_command(project: Path, site: Path) -> list[str]:
    """Install ``project`` into the target directory ``site``: with uv when it is on PATH (three
    times faster), else with pip; either builds it with the hatchling of this interpreter."""
    uv = shutil.which("uv")
    installer = ([uv, "pip", "install", "--no-config", "--python", sys.executable] if uv
                 else [sys.executable, "-m", "pip", "install"])
    return [*installer, "--quiet", "--no-deps", "--no-build-isolation", "--no-index",
            "--target", str(site), str(project)]


def write_plugin_project(tmp_path: Path, dist: str, package: str, source: str) -> Path:
    """Write ``source`` as the project of a real distribution ``dist`` (import package
    ``package``) in a temporary directory, and return the project's directory."""
    project = tmp_path / dist
    (project / "src" / package).mkdir(parents=True)
    (project / "src" / package / "__init__.py").write_text(textwrap.dedent(source))
    (project / "pyproject.toml").write_text(textwrap.dedent(f'''
        [build-system]
        requires = ["hatchling"]
        build-backend = "hatchling.build"

        [project]
        name = "{dist}"
        version = "0.1.0"

        [project.entry-points."toolhost.plugins"]
        plugin = "{package}"

        [tool.hatch.build.targets.wheel]
        packages = ["src/{package}"]
    '''))
    return project


def test_a_third_party_plugin_declaring_mcp_is_refused_at_step_2(
    installed_plugins: dict[str, Path],
) -> None:
    """Built as a real distribution in a temporary directory and installed with uv or pip."""
    site = installed_plugins["mcp"]
    result = toolhost("check", site=site)
    assert result.returncode == 1
    assert result.stderr.startswith(
        "toolhost: registration refused at step 2 (reserved domains): domain mcp from "
        "distribution toolhost-sneaky: "
    )
    assert_no_traceback(result)


SLOPPY_PLUGIN = '''
from toolhost import (hookimpl, Domain, Tool, ToolSpec, ToolOutput, Kind, Source, TargetKind,
                      SideEffect, Risk, Idempotency, Trust)

SCHEMA = {"type": "object", "properties": {}, "required": [], "additionalProperties": False}
SPEC = ToolSpec(
    name="sloppy.send", version="1.0.0", description="Sends a thing.",
    input_schema=SCHEMA, output_schema=SCHEMA, kind=Kind.CAPABILITY, source=Source.BUILTIN,
    target_kind=TargetKind.IN_PROCESS, server_id=None, side_effect=SideEffect.EXTERNAL_WRITE,
    risk=Risk.HIGH, idempotency=Idempotency.NON_IDEMPOTENT, output_trust=Trust.INTERNAL_TOOL,
    required_scopes=(), timeout_s=2, maximum_output_bytes=4096, LAST_FIELDS
)

@hookimpl
def toolhost_domains():
    return [Domain("sloppy")]

@hookimpl
def toolhost_tools(settings):
    return [Tool(SPEC, call=lambda arguments, context: ToolOutput(structured={}, content=""))]
'''


SLOPPY_LAST_FIELDS = [
    "allow_parallel=False",  # deprecated left out
    "allow_parallel=True, deprecated=False",
]


@pytest.fixture(scope="module")
def installed_plugins(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every throwaway third-party plugin of this module, each built as a real distribution and
    installed into a target directory of its own, all at once (the installs run side by side):
    ``"mcp"`` and each of ``SLOPPY_LAST_FIELDS`` to the directory it is installed in. The tests
    only read them, so the module builds each once."""
    plugins = {"mcp": ("toolhost-sneaky", "toolhost_sneaky", MCP_PLUGIN)} | {
        last_fields: ("toolhost-sloppy", "toolhost_sloppy",
                      SLOPPY_PLUGIN.replace("LAST_FIELDS", last_fields))
        for last_fields in SLOPPY_LAST_FIELDS
    }
    running = {}
    for key, (dist, package, source) in plugins.items():
        base = tmp_path_factory.mktemp("plugin")
        project = write_plugin_project(base, dist, package, source)
        command = pip_install_command(project, base / "site")
        running[key] = (base / "site", subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    errors = {key: install.communicate(timeout=300)[1] for key, (_, install) in running.items()}
    assert [key for key, (_, install) in running.items() if install.returncode] == [], errors
    return {key: site for key, (site, _) in running.items()}


@pytest.mark.parametrize(
    ("last_fields", "problem"),
    [
        (SLOPPY_LAST_FIELDS[0],  # deprecated left out
         "ToolSpec field deprecated is missing. To fix: set deprecated: ToolSpec has no optional "
         "fields (server_id=None unless source is MCP)"),
        (SLOPPY_LAST_FIELDS[1],
         "allow_parallel is True but idempotency is NON_IDEMPOTENT. To fix: set "
         "allow_parallel=False: only READ_ONLY tools may run in parallel"),
    ],
    ids=["spec-missing-a-field", "non-idempotent-allow-parallel"],
)
def test_check_refuses_an_installed_plugin_at_step_6_in_one_line(
    installed_plugins: dict[str, Path], last_fields: str, problem: str,
) -> None:
    site = installed_plugins[last_fields]
    result = toolhost("check", env={"TOOLHOST_PLUGINS": "toolhost-sloppy"}, site=site)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        "toolhost: registration refused at step 6 (field completeness): sloppy.send@1.0.0 from "
        f"distribution toolhost-sloppy: {problem}\n"
    )
    assert_no_traceback(result)


def test_call_with_an_expression_over_1024_characters_prints_the_bound_and_exits_1(
        tmp_path: Path) -> None:
    expression = "1+" * 512 + "1"
    assert len(expression) == 1025
    result = toolhost("call", "math.calculate", "--args", json.dumps({"expression": expression}),
                      env={"TOOLHOST_DATA_DIR": str(tmp_path)})
    assert (result.returncode, result.stdout) == (
        1, "The expression is longer than 1024 characters.\n")
    assert invocation_line(result.stderr, "tool.invalid_arguments.expression_too_long",
                           tmp_path) == ""
    data = json.loads(toolhost("call", "math.calculate", "--args",
                               json.dumps({"expression": expression}), "--json").stdout)
    assert (data["kind"], data["reason_code"]) == (
        "INVALID_ARGUMENTS", "tool.invalid_arguments.expression_too_long")


def test_a_policy_that_loosens_external_write_refuses_the_start() -> None:
    result = toolhost("check", env={"TOOLHOST_POLICY": '{"EXTERNAL_WRITE/HIGH": "allow"}'})
    assert result.returncode == 2  # a setting whose value is wrong (D253)
    assert result.stderr == (
        "toolhost: policy loosens EXTERNAL_WRITE/HIGH: approval -> allow; set "
        "TOOLHOST_POLICY_ALLOW_EXTERNAL_WRITE=1 to allow an EXTERNAL_WRITE call without "
        "approval\n"
    )


CALL = ["call", "math.calculate", "--args", '{"expression": "1"}']


@pytest.mark.parametrize(("setting", "command"), [
    *((("TOOLHOST_POLICY", '{"FOO/LOW": "deny"}'), c) for c in (
        ["check"], ["tools"], ["pending"], ["artifacts", "list"], ["runs", "list"], CALL)),
    # The commands that open the artifact store read its setting.
    *((("TOOLHOST_ARTIFACT_STORE", "ftp://nowhere"), c) for c in (
        ["pending"], ["artifacts", "list"], CALL)),
])
def test_a_setting_whose_value_is_wrong_is_exit_2_in_every_command(
        setting: tuple[str, str], command: list[str]) -> None:
    # Regression: a bad TOOLHOST_POLICY exited 1 where a bad TOOLHOST_ARTIFACT_STORE exited 2.
    result = toolhost(*command, env={"TOOLHOST_PLUGINS": FIRST_PARTY, setting[0]: setting[1]})
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("toolhost: ") and result.stderr.count("\n") == 1
    assert_no_traceback(result)


def test_a_loosened_cell_is_logged_when_the_pipeline_starts(tmp_path: Path) -> None:
    result = toolhost(
        "call", "math.calculate", "--args", '{"expression": "1"}',
        env={"TOOLHOST_POLICY": '{"EXTERNAL_WRITE/HIGH": "allow"}',
             "TOOLHOST_POLICY_ALLOW_EXTERNAL_WRITE": "1", "TOOLHOST_DATA_DIR": str(tmp_path)},
    )
    assert result.returncode == 0 and result.stdout == "1\n"
    (line,) = result.stderr.splitlines()
    event = json.loads(line)
    assert (event["event"], event["level"], event["cell"]) == (
        "policy.loosened", "warning", "EXTERNAL_WRITE/HIGH: approval -> allow")


def test_a_call_policy_denies_exits_1_with_the_denial_text() -> None:
    result = toolhost("call", "math.calculate", "--args", '{"expression": "1"}',
                      env={"TOOLHOST_POLICY": '{"NONE/LOW": "deny"}'})
    assert (result.returncode, result.stdout) == (
        1, "An operator denied this call. Do not retry it; ask the user how to proceed.\n")


@pytest.mark.parametrize("args", [["pending"], ["tools"], ["call", "math.calculate",
                                                          '{"expression": "1+1"}']])
def test_a_closed_standard_output_is_one_line_and_exit_1(args: list[str], tmp_path: Path) -> None:
    """``toolhost pending >&-`` was a traceback; ``toolhost tools >&-`` exited 0 having said
    nothing: every command now says why on stderr, as ``artifacts get -o -`` did, and exits 1
    before doing anything."""
    from toolhost.testing import toolhost_command

    closed = run_toolhost(*args, data_dir=tmp_path / "data",
                          command=["sh", "-c", 'exec "$@" >&-', "sh", *toolhost_command()])
    assert (closed.returncode, closed.stderr) == (
        1, "toolhost: cannot write standard output: it is closed\n")
    assert not (tmp_path / "data").exists()  # nothing was opened, let alone run
