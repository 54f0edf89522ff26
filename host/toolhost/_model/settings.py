"""Host settings, read from the environment once, at the composition root."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import attrs

from toolhost._model.secrets import Secret

__all__ = ["Settings"]

_TRUE = frozenset({"1", "true", "yes", "on"})


def _redact(env: Mapping[str, str]) -> dict[str, str]:
    return {k: ("***" if is_secret_name(k) else v) for k, v in env.items()}


def is_secret_name(name: str) -> bool:
    """Settings ending in _API_KEY (and the like) are secrets: never logged, never returned."""
    upper = name.upper()
    return upper.endswith(("_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD"))


def _default_data_dir() -> Path:
    # XDG-style per-user directory; the operator overrides it with TOOLHOST_DATA_DIR.
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "toolhost"


@attrs.frozen
class Settings:
    """A snapshot of the environment the host was started with.

    Plugins read their flags and credentials through it (``flag``, ``get``, ``secret``)
    rather than from ``os.environ``, so a test hands a plugin exactly the settings it means.
    """

    env: Mapping[str, str] = attrs.field(repr=lambda env: repr(_redact(env)), factory=dict)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Settings:
        return cls(env=dict(os.environ if environ is None else environ))

    def get(self, name: str, default: str | None = None) -> str | None:
        return self.env.get(name, default)

    def flag(self, name: str) -> bool:
        """True for 1/true/yes/on (any case); false when absent or anything else."""
        return self.env.get(name, "").strip().lower() in _TRUE

    def secret(self, name: str) -> Secret | None:
        """The credential setting ``name`` as a redacted ``Secret``, or None when absent or blank."""
        value = self.env.get(name, "").strip()
        return Secret(value) if value else None

    @property
    def data_dir(self) -> Path:
        raw = self.env.get("TOOLHOST_DATA_DIR", "").strip()
        return Path(raw) if raw else _default_data_dir()

    @property
    def plugin_allow_list(self) -> tuple[str, ...] | None:
        """TOOLHOST_PLUGINS as normalized distribution names; None means every plugin."""
        raw = self.env.get("TOOLHOST_PLUGINS")
        if raw is None:
            return None
        return tuple(normalize_dist_name(n) for n in raw.split(",") if n.strip())


def normalize_dist_name(name: str) -> str:
    """PEP 503 normalization, so ``Toolhost_Math`` and ``toolhost-math`` are one name."""
    import re

    return re.sub(r"[-_.]+", "-", name.strip()).lower()
