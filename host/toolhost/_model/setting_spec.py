"""What a setting is: its environment name, its type, its default and what it is for.

One declaration serves every place a setting is shown or read: ``toolhost --help``, ``toolhost
config``, the configuration reference in docs/, and the key it has in ``toolhost.toml``. The
host declares its own (``toolhost._model.host_settings``); a plugin declares its own through
the ``toolhost_settings`` hook.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal, TypeAlias

import attrs

__all__ = ["SETTING_TYPES", "SettingSpec", "SettingType"]

#: How a value is written in ``toolhost.toml`` and how it reaches the environment snapshot:
#: ``flag`` a boolean (true is ``1``), ``integer``/``number`` a TOML number, ``list`` an array
#: of strings (joined with commas), ``secret`` a reference (``{ env = "NAME" }`` or ``{ file =
#: "PATH" }``), the others a string.
SettingType: TypeAlias = Literal["text", "flag", "integer", "number", "path", "list", "secret",
                                 "url"]
SETTING_TYPES: tuple[str, ...] = ("text", "flag", "integer", "number", "path", "list", "secret",
                                  "url")

_ENV_NAME = re.compile(r"[A-Z][A-Z0-9_]*")
_KEY = re.compile(r"[a-z][a-z0-9_]*")


def _env_name(instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str) or _ENV_NAME.fullmatch(value) is None:
        raise ValueError(f"setting name {value!r} is not an environment name "
                         "(upper-case letters, digits and underscores, e.g. MYPLUGIN_ENABLED)")


def _key(instance: object, attribute: attrs.Attribute[str | None], value: str | None) -> None:
    if value is not None and (not isinstance(value, str) or _KEY.fullmatch(value) is None):
        raise ValueError(f"setting key {value!r} is not a toolhost.toml key (lower-case letters, "
                         "digits and underscores, e.g. enabled)")


def _tool_names(names: Iterable[str]) -> tuple[str, ...]:
    if isinstance(names, str) or not all(isinstance(n, str) for n in names):
        raise TypeError("activates is a tuple of tool names, e.g. (\"people.search\",)")
    return tuple(names)


@attrs.frozen(kw_only=True)
class SettingSpec:
    """One setting a plugin (or the host) reads from ``Settings``.

    ``name`` is the environment name (``AGENT_PEOPLE_ENABLED``); ``key`` its key in the
    plugin's ``[plugins.<distribution>]`` table of ``toolhost.toml`` (default: ``name``
    lower-cased). ``default`` is what an unset setting means, as text for a person (``"off"``,
    ``"300"``); None when unset means nothing more than unset. ``activates`` names the tools
    that register only when this setting is set (a flag on, a key present), so ``toolhost
    plugins`` and ``toolhost call`` can say why a tool is missing.
    """

    name: str = attrs.field(validator=_env_name)
    type: SettingType = attrs.field(validator=attrs.validators.in_(SETTING_TYPES))
    description: str = attrs.field(validator=attrs.validators.instance_of(str))
    default: str | None = None
    key: str | None = attrs.field(default=None, validator=_key)
    activates: tuple[str, ...] = attrs.field(default=(), converter=_tool_names)

    @property
    def file_key(self) -> str:
        """The key in the plugin's table of ``toolhost.toml``."""
        return self.key if self.key is not None else self.name.lower()

    @property
    def secret(self) -> bool:
        """A credential: shown as ``***``, and in ``toolhost.toml`` a reference, not a value."""
        return self.type == "secret"
