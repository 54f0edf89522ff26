"""Registry lookups: unversioned resolves the latest active version, pinned is exact."""

from __future__ import annotations

import pytest
from conftest import make_plugin, make_spec, make_tool

from toolhost._composition import Host
from toolhost._registration.registry import UnknownTool, UnknownVersion, version_key


def registry(*specs):  # type: ignore[no-untyped-def]
    tools = [make_tool(s) for s in specs]
    return Host.from_plugins({"fx-dist": make_plugin(tools=tools)}).registry


def test_unversioned_resolves_the_highest_semantic_version() -> None:
    reg = registry(make_spec(version="1.9.0"), make_spec(version="1.10.0"),
                   make_spec(version="1.2.0"))
    assert reg.resolve("fx.echo").spec.version == "1.10.0"
    assert reg.versions("fx.echo") == ["1.2.0", "1.9.0", "1.10.0"]


def test_pinned_resolves_exactly_including_historical_versions() -> None:
    reg = registry(make_spec(version="1.0.0"), make_spec(version="2.0.0"))
    assert reg.resolve("fx.echo", "1.0.0").spec.version == "1.0.0"


def test_deprecated_versions_are_skipped_unless_all_are_deprecated() -> None:
    reg = registry(make_spec(version="1.0.0"), make_spec(version="2.0.0", deprecated=True))
    assert reg.resolve("fx.echo").spec.version == "1.0.0"
    assert reg.resolve("fx.echo", "2.0.0").spec.deprecated
    only_old = registry(make_spec(version="1.0.0", deprecated=True))
    assert only_old.resolve("fx.echo").spec.version == "1.0.0"


def test_unknown_name_and_version() -> None:
    reg = registry(make_spec())
    with pytest.raises(UnknownTool):
        reg.resolve("fx.nope")
    with pytest.raises(UnknownVersion):
        reg.resolve("fx.echo", "9.9.9")


def test_iteration_is_sorted_by_name_then_version() -> None:
    reg = registry(make_spec(name="fx.b"), make_spec(name="fx.a", version="1.1.0"),
                   make_spec(name="fx.a"))
    assert [r.spec.identity for r in reg] == ["fx.a@1.0.0", "fx.a@1.1.0", "fx.b@1.0.0"]
    assert len(reg) == 3 and version_key("1.10.2") == (1, 10, 2)
