"""toolhost-email: the ``email`` domain and the mail cache it owns (D151; README.md).

The public names below are the mail cache's read API, the contract another distribution
(toolhost-people) reads the cache through; everything else in this package is private. The
host reaches the tools through ``toolhost_email.plugin``. The names load when first used
(PEP 562), so loading the plugin for a start (``toolhost check``) opens nothing of the cache.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolhost_email.cache_model import CachedMessage, MailAddress, MessageSource
    from toolhost_email.reader import MailCacheReader, open_mail_cache
    from toolhost_email.store import MAIL_CACHE_DISTRIBUTION, CacheUnavailable

__all__ = [
    "MAIL_CACHE_DISTRIBUTION",
    "CacheUnavailable",
    "CachedMessage",
    "MailAddress",
    "MailCacheReader",
    "MessageSource",
    "open_mail_cache",
]

#: Where each public name lives.
_HOME = {
    "MAIL_CACHE_DISTRIBUTION": "toolhost_email.store",
    "CacheUnavailable": "toolhost_email.store",
    "CachedMessage": "toolhost_email.cache_model",
    "MailAddress": "toolhost_email.cache_model",
    "MessageSource": "toolhost_email.cache_model",
    "MailCacheReader": "toolhost_email.reader",
    "open_mail_cache": "toolhost_email.reader",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'toolhost_email' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
