"""Discovery reads the entry points from the metadata directories on ``sys.path`` itself
(issue #11: importing importlib.metadata cost a tenth of ``toolhost check``). It must find
exactly what importlib.metadata finds, see an install or a removal at once, and hand what it
cannot read (a zip archive, another finder of distributions) to importlib.metadata."""

from __future__ import annotations

import shutil
import sys
import zipfile
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest
from installed import GOOD_PLUGIN, install_fake_plugin

from toolhost._model.settings import Settings, normalize_dist_name
from toolhost._registration.discovery import (
    PluginError,
    _entry_points,
    _read_path_entries,
    discover,
)


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "site"
    path.mkdir()
    sys.path.insert(0, str(path))
    yield path
    sys.path.remove(str(path))
    for name in [m for m in sys.modules if m.startswith("fake_")]:
        del sys.modules[name]


def as_importlib_metadata_reads() -> list[tuple[str, str, str]]:
    return sorted((normalize_dist_name(ep.dist.name), ep.name, ep.value)
                  for ep in metadata.entry_points(group="toolhost.plugins") if ep.dist)


def as_read() -> list[tuple[str, str, str]]:
    return [(ep.distribution, ep.name, ep.value) for ep in _entry_points()]


def distributions(settings: Settings | None = None) -> list[str]:
    return [s.distribution for s in discover(settings or Settings())
            if s.distribution.startswith("fake-")]


def test_the_reader_finds_what_importlib_metadata_finds(site: Path) -> None:
    install_fake_plugin(site, "fake-good", "fake_good", GOOD_PLUGIN)
    # An egg-info directory (PKG-INFO, setuptools' layout), a METADATA name spelt unlike its
    # directory, comments, another section and an attribute path with extras.
    egg = site / "fake_egg.egg-info"
    egg.mkdir()
    (egg / "PKG-INFO").write_text("Metadata-Version: 1.1\nName: Fake.Egg\nVersion: 1\n")
    (egg / "entry_points.txt").write_text(
        "[console_scripts]\nfake-egg = fake_egg:main\n\n"
        "# a comment\n[toolhost.plugins]\n  egg = fake_egg:PLUGIN.inner [extra]  \n")
    assert [row for row in as_read() if row[0].startswith("fake-")] == [
        ("fake-egg", "egg", "fake_egg:PLUGIN.inner [extra]"),
        ("fake-good", "fake_good", "fake_good"),
    ]
    assert as_read() == as_importlib_metadata_reads()


def test_the_first_distribution_of_a_name_on_the_path_wins(site: Path, tmp_path: Path) -> None:
    later = tmp_path / "later"
    install_fake_plugin(later, "fake-good", "fake_other", GOOD_PLUGIN)
    sys.path.append(str(later))
    try:
        install_fake_plugin(site, "fake-good", "fake_good", GOOD_PLUGIN)
        assert [row for row in as_read() if row[0] == "fake-good"] == [
            ("fake-good", "fake_good", "fake_good")]
        assert as_read() == as_importlib_metadata_reads()
    finally:
        sys.path.remove(str(later))


def test_an_install_and_a_removal_are_seen_by_the_next_discovery(site: Path) -> None:
    assert distributions() == []
    install_fake_plugin(site, "fake-good", "fake_good", GOOD_PLUGIN)
    assert distributions() == ["fake-good"]
    shutil.rmtree(site / "fake_good-0.1.dist-info")
    assert distributions() == []
    with pytest.raises(PluginError, match=r"^plugin fake-good: TOOLHOST_PLUGINS names it"):
        discover(Settings(env={"TOOLHOST_PLUGINS": "fake-good"}))


def test_a_zip_archive_on_the_path_is_read_by_importlib_metadata(tmp_path: Path) -> None:
    archive = tmp_path / "fake_zipped.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("fake_zipped.py", GOOD_PLUGIN)
        zipped.writestr("fake_zipped-0.1.dist-info/METADATA",
                        "Metadata-Version: 2.1\nName: fake-zipped\nVersion: 0.1\n")
        zipped.writestr("fake_zipped-0.1.dist-info/entry_points.txt",
                        "[toolhost.plugins]\nzipped = fake_zipped\n")
    sys.path.insert(0, str(archive))
    try:
        assert _read_path_entries(sys.path) is None  # the reader declines: a zip archive
        assert ("fake-zipped", "zipped", "fake_zipped") in as_read()
        assert distributions(Settings(env={"TOOLHOST_PLUGINS": "fake-zipped"})) == [
            "fake-zipped"]
    finally:
        sys.path.remove(str(archive))
        sys.modules.pop("fake_zipped", None)


class _Finder:
    """A finder of distributions besides the path's (as some packaging tools install)."""

    def __init__(self, where: Path) -> None:
        self.where = where

    def find_spec(self, *args: object) -> None:
        return None

    def find_distributions(self, context: object = None) -> Iterator[metadata.Distribution]:
        yield from map(metadata.PathDistribution, self.where.glob("*.dist-info"))


def test_another_finder_of_distributions_is_asked_through_importlib_metadata(
        tmp_path: Path, site: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    install_fake_plugin(elsewhere, "fake-found", "fake_good", GOOD_PLUGIN)
    (elsewhere / "fake_good.py").rename(site / "fake_good.py")  # importable, listed elsewhere
    finder = _Finder(elsewhere)
    sys.meta_path.append(finder)
    try:
        assert _read_path_entries(sys.path) is None
        assert distributions(Settings(env={"TOOLHOST_PLUGINS": "fake-found"})) == ["fake-found"]
    finally:
        sys.meta_path.remove(finder)


def test_an_entry_point_loads_the_attribute_it_names(site: Path) -> None:
    install_fake_plugin(site, "fake-attr", "fake_attr", "class Holder:\n    inner = object()\n")
    info = site / "fake_attr-0.1.dist-info" / "entry_points.txt"
    info.write_text("[toolhost.plugins]\nattr = fake_attr : Holder.inner [extra]\n")
    (source,) = discover(Settings(env={"TOOLHOST_PLUGINS": "fake-attr"}))
    assert source.plugin is sys.modules["fake_attr"].Holder.inner


def test_an_entry_point_that_names_no_module_is_one_line(site: Path) -> None:
    install_fake_plugin(site, "fake-bad", "fake_bad", GOOD_PLUGIN)
    info = site / "fake_bad-0.1.dist-info" / "entry_points.txt"
    info.write_text("[toolhost.plugins]\nbad = fake-bad/plugin\n")
    with pytest.raises(PluginError) as error:
        discover(Settings(env={"TOOLHOST_PLUGINS": "fake-bad"}))
    assert str(error.value) == (
        "plugin fake-bad: entry point bad = fake-bad/plugin failed to import: ValueError: "
        "'fake-bad/plugin' is not module or module:attribute (leave it out with "
        "TOOLHOST_PLUGINS, or fix and reinstall it)")
