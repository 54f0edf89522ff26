"""Credentials as a redacted value object: ``Secret`` shows ``***`` everywhere but ``reveal()``.

A plugin names a credential by reference (``"tensorscale"``); the host resolves it from the
settings' environment snapshot as ``TENSORSCALE_API_KEY``. The value reaches code only through
``Secret.reveal()``: its repr, its str, f-strings and every log line (the redaction processor in
``toolhost._pipeline.log`` knows the type) show ``***`` or the redaction marker instead.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from toolhost._model.settings import Settings

__all__ = ["MASK", "Secret", "resolve_secret", "secret_setting_name"]

MASK = "***"
_REF = re.compile(r"[a-z][a-z0-9_]*")


@attrs.frozen
class Secret:
    """A credential. Equal when the values are equal; hashable; never shows its value.

    ``reveal()`` is the only way to the value: call it where the credential is used (an
    ``Authorization`` header), never where it would be stored or logged.
    """

    _value: str = attrs.field(repr=False, validator=attrs.validators.instance_of(str))

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return f"Secret({MASK!r})"

    def __str__(self) -> str:
        return MASK


def secret_setting_name(ref: str) -> str:
    """The environment name a credential reference resolves to: ``tensorscale`` -> ``TENSORSCALE_API_KEY``."""
    if not isinstance(ref, str) or _REF.fullmatch(ref) is None:
        raise ValueError(
            f"invalid credential reference {ref!r}: use lowercase letters, digits and "
            "underscores, starting with a letter (e.g. 'tensorscale')"
        )
    return f"{ref.upper()}_API_KEY"


def resolve_secret(settings: Settings, ref: str) -> Secret | None:
    """The credential ``ref`` names (``<REF>_API_KEY`` in the settings), or None when absent or blank.

    Raises ValueError when ``ref`` is not a valid reference (``^[a-z][a-z0-9_]*$``).
    """
    return settings.secret(secret_setting_name(ref))
