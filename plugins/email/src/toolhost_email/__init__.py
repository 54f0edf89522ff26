"""toolhost-email: the ``email`` domain and the mail cache it owns (DESIGN.md 8.4).

The public names below are the mail cache's read API, the contract another distribution
(toolhost-people) reads the cache through; everything else in this package is private. The
host reaches the tools through ``toolhost_email.plugin``.
"""

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
