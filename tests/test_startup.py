"""What starting a command imports (issue #11): ``toolhost check`` loads what registration and the
determinism scan use and nothing of the commands that run tools; ``import toolhost`` loads
none of the public names until one is used. Asserted on ``sys.modules`` of a fresh
interpreter, never on timings (bench/bench_check.py measures those)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import pytest

import toolhost

#: Loaded after the command ran, on stderr, so stdout stays the command's own.
PROBE = """\
import json, sys
from toolhost._cli.main import main
try:
    code = main(sys.argv[1:])
finally:
    sys.stderr.write(json.dumps(sorted(sys.modules)))
raise SystemExit(code)
"""

#: What the commands that invoke tools use (the stores, the logger, the converter, the HTTP
#: clients, MCP), and importlib.metadata, which entry-point discovery no longer needs.
NOT_FOR_CHECK = (
    "sqlite3", "structlog", "cattrs", "httpx", "anyio", "mcp", "importlib.metadata", "email",
    "zipfile", "toolhost._pipeline.pipeline", "toolhost._pipeline.steps", "asyncio",
    "toolhost._ports.artifacts",
)


def modules_after(
    *args: str, plugins: str = "toolhost-math,toolhost-system", data_dir: str | None = None,
) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TOOLHOST_", "AGENT_", "TENSORSCALE_"))}
    env["TOOLHOST_DATA_DIR"] = data_dir or tempfile.mkdtemp(prefix="toolhost-startup-")
    # By default math and system: what the other CLI tests install and rely on.
    env["TOOLHOST_PLUGINS"] = plugins
    result = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True,
                            text=True, env=env, timeout=120)
    return result, set(json.loads(result.stderr.splitlines()[-1]))


def test_check_loads_nothing_of_the_commands_that_run_tools() -> None:
    result, loaded = modules_after("check")
    assert result.stdout == "ok: 2 tools registered from toolhost-math, toolhost-system\n"
    assert result.returncode == 0
    assert sorted(loaded.intersection(NOT_FOR_CHECK)) == []
    assert not any(m.startswith("toolhost._adapters.sqlite") for m in loaded)
    # It did load what it checks: the plugins, the registry and the scan.
    assert {"toolhost_math.plugin", "toolhost_system.plugin", "toolhost._registration.registry",
            "toolhost._registration.ambient"} <= loaded


def test_a_second_check_generates_no_validator_code() -> None:
    # The first check generates every validator's code and keeps it in the data directory
    # (content-keyed); the next one, over the same plugins, does not even import the generator.
    data_dir = tempfile.mkdtemp(prefix="toolhost-startup-")
    first, loaded = modules_after("check", data_dir=data_dir)
    assert first.returncode == 0 and "fastjsonschema" in loaded
    second, loaded = modules_after("check", data_dir=data_dir)
    assert (second.returncode, second.stdout) == (0, first.stdout)
    assert "fastjsonschema" not in loaded


def test_conditional_plugins_without_their_settings_cost_a_start_nothing() -> None:
    # Regression: toolhost-email imported its tools (and httpx, ~130 ms) at plugin load, so
    # every command paid for tools no flag had turned on.
    result, loaded = modules_after("check", plugins="toolhost-email,toolhost-media,toolhost-people")
    assert result.returncode == 0, result.stderr
    assert sorted(loaded.intersection(NOT_FOR_CHECK)) == []
    assert {"toolhost_email.plugin", "toolhost_media.plugin", "toolhost_people.plugin"} <= loaded
    tools = {m for m in loaded if m.startswith(("toolhost_email.", "toolhost_media.",
                                                "toolhost_people."))}
    assert not tools & {"toolhost_email.census", "toolhost_email.oneclick",
                        "toolhost_media.tensorscale", "toolhost_media.generate",
                        "toolhost_people.search", "toolhost_people.index"}


#: The tool bodies of the unconditional first-party plugins and what only they import: each
#: plugin loads its specs, reasons and domain, and the host imports a body when it first builds
#: the tool (``Tool(spec, build=...)``), which ``check`` never does.
TOOL_BODIES = (
    "toolhost_system.current_time", "toolhost_system.timezones", "zoneinfo",
    "toolhost_workspace.read_text", "toolhost_workspace.write_text",
    "toolhost_workspace.list_files",
    "toolhost_demo.external_write",
    "toolhost_artifact.export_v1", "toolhost_artifact.export_v2",
    "toolhost_artifact.export_file", "toolhost_artifact.result",
    "toolhost_sandbox.run_command",
    "toolhost_math.tool", "toolhost_math.evaluator", "toolhost_math.hotpath",
    "toolhost_math.parser", "toolhost_math.tokenizer", "toolhost_math.functions",
    "toolhost_math.render",
)
LAZY_PLUGINS = ("toolhost-artifact", "toolhost-demo", "toolhost-math", "toolhost-sandbox",
                "toolhost-system", "toolhost-workspace")


def test_check_imports_the_plugins_specs_and_none_of_their_tool_bodies() -> None:
    result, loaded = modules_after("check", plugins=",".join(LAZY_PLUGINS))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == (
        f"ok: 9 tools registered from {', '.join(LAZY_PLUGINS)}")
    assert sorted(loaded.intersection(TOOL_BODIES)) == []
    # It did load what registration reads: every plugin's specs. The sandbox's readiness probe
    # loads its own module (and the runner), not the tool's body.
    assert {f"{d.replace('-', '_')}.specs" for d in LAZY_PLUGINS} <= loaded
    assert "toolhost_sandbox.readiness" in loaded


def test_help_loads_no_plugin_and_no_registration() -> None:
    result, loaded = modules_after("--help")
    assert result.returncode == 0 and result.stdout.startswith("usage: toolhost")
    assert not any(m.startswith(("toolhost_", "toolhost._registration", "pluggy"))
                   for m in loaded)


def test_importing_toolhost_loads_no_public_name_until_one_is_used() -> None:
    probe = ("import sys, toolhost; before = sorted(m for m in sys.modules if "
             "m.startswith(('toolhost', 'attr', 'pluggy'))); toolhost.Domain; "
             "after = sorted(m for m in sys.modules if m.startswith('toolhost')); "
             "print(before, after)")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            timeout=60, check=True)
    assert result.stdout == (
        "['toolhost'] ['toolhost', 'toolhost._model', 'toolhost._model.spec']\n")


def test_every_public_name_loads_from_its_module() -> None:
    import importlib

    for name in toolhost.__all__:
        value = getattr(toolhost, name)
        module = importlib.import_module(toolhost._HOME[name])
        assert value is getattr(module, name)
    assert set(toolhost.__all__) <= set(dir(toolhost))


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match=r"^module 'toolhost' has no attribute 'Tol'$"):
        toolhost.Tol  # type: ignore[attr-defined]  # noqa: B018
    with pytest.raises(ImportError, match="cannot import name 'Tol'"):
        from toolhost import Tol  # type: ignore[attr-defined]  # noqa: F401


def test_a_call_with_no_tracing_configured_imports_no_opentelemetry() -> None:
    """The API is imported only once something else has (a provider's setup): D274."""
    result, loaded = modules_after("call", "math.calculate", "--args", '{"expression": "2*3"}')
    assert (result.returncode, result.stdout) == (0, "6\n")
    assert "toolhost._pipeline.tracing" in loaded
    assert sorted(m for m in loaded if m.startswith("opentelemetry")) == []
