"""What makes a string that is not the host's own safe to put in a page (D314)."""

from __future__ import annotations

import html

from toolhost._composition import escaped

__all__ = ["text"]


def text(value: str) -> str:
    """``value`` inert: what does not print becomes its visible JSON escape (a right-to-left
    override shows as ``\\u202e``, a zero-width space as ``\\u200b``), then HTML escaping, so
    nothing a tool or a caller wrote is ever read as markup or reorders a line."""
    return html.escape(escaped(value), quote=True)
