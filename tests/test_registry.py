"""Registry lookups: unversioned resolves the latest active version, pinned is exact; and the
default roster, defined once here."""

from __future__ import annotations

import attrs
import pytest
from conftest import make_plugin, make_spec, make_tool

from toolhost import Tool, ToolSpec
from toolhost._composition import Host
from toolhost._registration.registry import Registry, UnknownTool, UnknownVersion, version_key


def registry(*specs):  # type: ignore[no-untyped-def]
    tools = [make_tool(s) for s in specs]
    return Host.from_plugins({"fx-dist": make_plugin(tools=tools)}).registry


def off_by_default(spec: ToolSpec) -> Tool:
    return attrs.evolve(make_tool(spec), default_enabled=False)


def registry_of(*tools: Tool) -> Registry:
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


def test_the_default_roster_is_every_name_whose_latest_active_version_is_default_enabled() -> None:
    reg = registry_of(
        make_tool(make_spec(name="fx.b")),
        off_by_default(make_spec(name="fx.hidden")),
        # The latest version decides: fx.a@2 is off, so fx.a is off the roster...
        make_tool(make_spec(name="fx.a")), off_by_default(make_spec(name="fx.a", version="2.0.0")),
        # ...but a deprecated latest version is not the one an unversioned lookup resolves.
        make_tool(make_spec(name="fx.c")),
        off_by_default(make_spec(name="fx.c", version="2.0.0", deprecated=True)),
    )
    assert reg.default_roster() == ["fx.b", "fx.c"]


def test_enabled_is_the_run_s_list_or_else_the_registration_s_own_default() -> None:
    reg = registry_of(make_tool(make_spec(version="1.0.0")),
                      off_by_default(make_spec(version="2.0.0")))
    old, new = reg.resolve("fx.echo", "1.0.0"), reg.resolve("fx.echo", "2.0.0")
    # A run that names no tools: each registration answers for itself (a pin to 1.0.0 runs).
    assert (Registry.enabled(old, None), Registry.enabled(new, None)) == (True, False)
    # A run that names its tools: exactly those, whatever the default.
    assert Registry.enabled(new, frozenset({"fx.echo"})) is True
    assert Registry.enabled(old, frozenset({"fx.other"})) is False
    assert Registry.enabled(old, frozenset()) is False
