"""The registry: every registered (name, version), and how a lookup resolves.

Historical versions are active registrations. An unversioned lookup resolves the latest
non-deprecated version (the latest deprecated one if every version is deprecated); a lookup
that names a version resolves exactly that registration.

The default roster (what a run that names no tools may call) is defined here once:
``Registry.enabled`` is the rule the pipeline's step 2 applies, ``Registry.default_roster`` the
names it admits, which ``toolhost tools --format`` and ``toolhost serve`` show.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping

from toolhost._model.errors import ToolhostError, UsageError
from toolhost._registration.refusals import Registered

__all__ = ["PinError", "Registry", "UnknownTool", "UnknownVersion", "parse_pins",
           "version_key"]


class UnknownTool(ToolhostError, LookupError):
    """No registration has this name."""


class UnknownVersion(ToolhostError, LookupError):
    """The name is registered, but not at this version."""


class PinError(UsageError, ValueError):
    """A pin (``NAME=VERSION``) that is malformed, or names no registration or no served
    tool; the message is the one line an operator reads."""


def parse_pins(items: Iterable[str], *, source: str) -> dict[str, str]:
    """``NAME=VERSION`` items (``toolhost serve --pin``, or the comma-separated parts of
    TOOLHOST_MCP_PINS) as ``{name: version}``; a later pin of a name replaces an earlier one.

    :raises PinError: an item that is not ``NAME=VERSION`` (``source`` names where it was).
    """
    pins: dict[str, str] = {}
    for item in items:
        name, sep, version = item.strip().partition("=")
        if not sep or not name.strip() or not version.strip():
            raise PinError(f"{source} expects NAME=VERSION, e.g. people.history=1.0.0, "
                           f"not {item.strip()!r}")
        pins[name.strip()] = version.strip()
    return pins


def version_key(version: str) -> tuple[int, ...]:
    """Semantic versions compare numerically: 1.10.0 is after 1.9.0."""
    return tuple(int(part) for part in version.split("."))


class Registry:
    """Immutable after construction. Iterates sorted by name, then version."""

    def __init__(self, registrations: Iterable[Registered]) -> None:
        self._by_key = {(r.spec.name, r.spec.version): r for r in registrations}
        self._versions: dict[str, list[str]] = {}
        for name, version in sorted(self._by_key, key=lambda k: (k[0], version_key(k[1]))):
            self._versions.setdefault(name, []).append(version)

    def __iter__(self) -> Iterator[Registered]:
        for name, versions in sorted(self._versions.items()):
            for version in versions:
                yield self._by_key[(name, version)]

    def __len__(self) -> int:
        return len(self._by_key)

    def names(self) -> list[str]:
        return sorted(self._versions)

    def versions(self, name: str) -> list[str]:
        """Registered versions of ``name``, oldest first."""
        return list(self._versions.get(name, ()))

    def resolve(self, name: str, version: str | None = None) -> Registered:
        """Pipeline step 1: unversioned → latest active, pinned → exact."""
        versions = self._versions.get(name)
        if not versions:
            raise UnknownTool(name)
        if version is not None:
            try:
                return self._by_key[(name, version)]
            except KeyError:
                raise UnknownVersion(f"{name}@{version}") from None
        active = [v for v in versions if not self._by_key[(name, v)].spec.deprecated]
        return self._by_key[(name, (active or versions)[-1])]

    @staticmethod
    def enabled(registered: Registered, enabled_tools: Collection[str] | None) -> bool:
        """Pipeline step 2: a run that names its tools may call exactly those; one that names
        none (``enabled_tools`` None) may call the default roster, every registration whose
        tool is ``default_enabled``. Judged on the registration resolved for the call, so a
        pinned version answers for itself."""
        if enabled_tools is None:
            return registered.tool.default_enabled
        return registered.spec.name in enabled_tools

    def roster(self, enable: Iterable[str] | None = None,
               pins: Mapping[str, str] | None = None) -> list[Registered]:
        """The tools a catalog or a server offers, sorted by name: the default roster, or
        exactly the ``enable`` names, each at its latest active version, or at the version
        ``pins`` names for it (an older contract a client is pinned to).

        :raises UnknownTool: an ``enable`` name is not registered.
        :raises PinError: a pin names a version that is not registered, or a tool that is
            not in the roster.
        """
        pins = dict(pins or {})
        names = self.default_roster() if enable is None else sorted(set(enable))
        for name in sorted(set(pins) - set(names)):
            raise PinError(f"--pin {name}={pins[name]}: {name} is not served "
                           "(not in the default roster or --enable)")
        roster = []
        for name in names:
            try:
                roster.append(self.resolve(name, pins.get(name)))
            except UnknownVersion:
                known = ", ".join(self.versions(name))
                raise PinError(f"--pin {name}={pins[name]}: {name} has no version "
                               f"{pins[name]} (registered: {known})") from None
        return roster

    def default_roster(self) -> list[str]:
        """The default roster, sorted: each name whose latest active version is enabled for a
        run that names no tools."""
        return [name for name in self.names() if self.enabled(self.resolve(name), None)]
