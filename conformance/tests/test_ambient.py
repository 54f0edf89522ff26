"""Locating a distribution's files for the determinism scan (the scan itself is the host's)."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import pytest
from conftest import FIXTURES, install_fake_plugin

import toolhost
from toolhost_conformance.ambient import (
    distribution_files,
    find_ambient_reads,
    module_files,
)


def test_an_installed_distribution_is_located_from_its_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_fake_plugin(tmp_path, "fx-located", "fx_located", "import time\ntime.time()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    files = distribution_files("fx-located")
    assert tmp_path / "fx_located.py" in files
    assert find_ambient_reads(files) == [f"{tmp_path / 'fx_located.py'}:2: time.time()"]


def test_an_editable_distribution_is_located_through_its_packages() -> None:
    # toolhost is installed editable (its RECORD lists only a .pth): the packages its entry
    # points import are located instead, so the host-wide check can use this function too.
    files = distribution_files("toolhost-core")
    package = Path(toolhost.__file__).parent
    assert package in files or package / "_adapters" / "system_clock.py" in files
    assert any(
        "system_clock.py" in line for line in find_ambient_reads(files)
    )  # the one module that may, found; a host-wide check passes it as allowed


def test_a_distribution_that_is_not_installed_raises() -> None:
    with pytest.raises(metadata.PackageNotFoundError):
        distribution_files("not-installed-anywhere")


def test_module_files_of_an_uninstalled_plugin() -> None:
    import fx_good

    assert module_files(fx_good) == [FIXTURES / "fx_good.py"]
    assert module_files(toolhost) == [Path(toolhost.__file__).parent]

    class Plugin:
        pass

    assert module_files(Plugin()) == [Path(__file__)]
