"""``toolhost-conformance DIST``: the suite on installed distributions, from the shell."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import INSTALLABLE_GOOD, INSTALLABLE_MCP, install_fake_plugin

from toolhost_conformance.cli import main


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two installed plugins: one that conforms, one refused at step 2."""
    site = tmp_path_factory.mktemp("site")
    install_fake_plugin(site, "fx-cli-good", "fx_cli_good", INSTALLABLE_GOOD)
    install_fake_plugin(site, "fx-cli-mcp", "fx_cli_mcp", INSTALLABLE_MCP)
    # A conditional plugin, as media, email and people are: its tool exists only with a flag.
    conditional = INSTALLABLE_GOOD.replace(
        "    return [Tool(SPEC, call=greet, reasons=(BLANK,))]",
        "    if not settings.flag('FX_GREET_ENABLED'):\n        return []\n"
        "    return [Tool(SPEC, call=greet, reasons=(BLANK,))]")
    assert conditional != INSTALLABLE_GOOD
    install_fake_plugin(site, "fx-cli-flagged", "fx_cli_flagged", conditional)
    return site


def _run(site: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run(
        [sys.executable, "-m", "toolhost_conformance", *args],
        capture_output=True, text=True, env=env, cwd=cwd, timeout=300, check=False,
    )


def test_a_conforming_distribution_passes(site: Path, tmp_path: Path) -> None:
    done = _run(site, "fx-cli-good", "--", "--toolhost-examples", "10", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "10 passed" in done.stdout
    assert "test_property_run[tool=hello.greet@1.0.0]" not in done.stdout  # pytest's usual dots
    assert not (tmp_path / ".pytest_cache").exists()


def test_a_refused_distribution_fails_with_the_refusal(site: Path, tmp_path: Path) -> None:
    done = _run(site, "fx-cli-mcp", cwd=tmp_path)
    assert done.returncode == 1
    assert "registration refused at step 2 (reserved domains): domain mcp" in done.stdout


def test_only_the_named_distributions_are_loaded(site: Path, tmp_path: Path) -> None:
    # fx-cli-mcp is installed beside it and would be refused: it is not loaded.
    done = _run(site, "fx-cli-good", "--", "-k", "registration", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed, 9 deselected" in done.stdout


def test_a_setting_reaches_a_conditional_plugin(site: Path, tmp_path: Path) -> None:
    args = ("--", "-v", "-k", "schemas_closed", "--toolhost-examples", "5")
    without = _run(site, "fx-cli-flagged", *args, cwd=tmp_path)
    assert "test_schemas_closed[tool=hello.greet@1.0.0]" not in without.stdout
    flagged = _run(site, "fx-cli-flagged", "--setting", "FX_GREET_ENABLED=1", *args, cwd=tmp_path)
    assert flagged.returncode == 0, flagged.stdout + flagged.stderr
    assert "test_schemas_closed[tool=hello.greet@1.0.0] PASSED" in flagged.stdout


def test_pytest_arguments_pass_through(site: Path, tmp_path: Path) -> None:
    done = _run(
        site, "fx-cli-good", "--", "-v", "-k", "schemas_closed or forced_trust", cwd=tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "test_schemas_closed[tool=hello.greet@1.0.0] PASSED" in done.stdout
    assert "2 passed, 8 deselected" in done.stdout
    assert "PytestAssertRewriteWarning" not in done.stdout


def test_a_name_that_is_not_installed_is_one_line_and_exit_2(
    site: Path, tmp_path: Path
) -> None:
    done = _run(site, "fx-cli-good", "no-such-dist", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == (
        "toolhost-conformance: distribution 'no-such-dist' is not installed; install it "
        "(pip install no-such-dist) first\n"
    )


def test_an_installed_non_plugin_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pluggy"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "toolhost-conformance: distribution 'pluggy' is installed but declares no "
        "toolhost.plugins entry point\n"
    )


def test_no_distribution_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main([])
    assert exited.value.code == 2
    assert "DIST" in capsys.readouterr().err


def test_help_loads_nothing() -> None:
    done = subprocess.run(
        [sys.executable, "-c",
         "import sys\n"
         "from toolhost_conformance.cli import main\n"
         "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
         "print(sorted(m for m in ('pytest', 'hypothesis', 'toolhost._composition')"
         " if m in sys.modules))"],
        capture_output=True, text=True, check=True,
    )
    assert done.stdout.strip().endswith("[]")
