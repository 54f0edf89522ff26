"""The settings this plugin reads (through ``Settings``, never the environment), and the one
way its tools open the cache."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from toolhost import Services, Settings, SettingSpec, ToolFailure
from toolhost_email.messages import CACHE_UNAVAILABLE

if TYPE_CHECKING:
    from toolhost_email.reader import MailCacheReader

__all__ = [
    "ALLOW_PRIVATE_SETTING",
    "AUTHSERV_SETTING",
    "MAX_REQUEST_S",
    "MODE_FLAG",
    "REQUEST_TIMEOUT_SETTING",
    "SETTINGS",
    "UNSUBSCRIBE_FLAG",
    "open_reader",
    "request_seconds",
]

#: email.context and email.feedback (the seed's Milestone 26).
MODE_FLAG: Final = "AGENT_EMAIL_MODE_ENABLED"
#: email.subscriptions and email.unsubscribe (the seed's Milestone 31).
UNSUBSCRIBE_FLAG: Final = "AGENT_EMAIL_UNSUBSCRIBE_ENABLED"
#: The authserv-id of the owner's own receiving server; unset, one-click never applies.
AUTHSERV_SETTING: Final = "TOOLHOST_EMAIL_AUTHSERV_ID"
#: Tests only: let one-click requests reach loopback, private and link-local addresses.
ALLOW_PRIVATE_SETTING: Final = "TOOLHOST_EMAIL_ALLOW_PRIVATE_DESTINATIONS"
#: The bound on one one-click request, resolution to response headers (default 10 s, at most 20).
REQUEST_TIMEOUT_SETTING: Final = "TOOLHOST_EMAIL_REQUEST_TIMEOUT_S"
_DEFAULT_REQUEST_S: Final = 10.0
#: 5 rounds of 5 requests (email.unsubscribe) x 20 s stays below its 120 s timeout.
MAX_REQUEST_S: Final = 20.0

#: What ``toolhost config`` and ``[plugins.toolhost-email]`` of toolhost.toml know of them.
SETTINGS: Final = (
    SettingSpec(name=MODE_FLAG, key="mode_enabled", type="flag", default="off",
                description="register email.context and email.feedback",
                activates=("email.context", "email.feedback")),
    SettingSpec(name=UNSUBSCRIBE_FLAG, key="unsubscribe_enabled", type="flag", default="off",
                description="register email.subscriptions and email.unsubscribe",
                activates=("email.subscriptions", "email.unsubscribe")),
    SettingSpec(name=AUTHSERV_SETTING, key="authserv_id", type="text",
                description="the authserv-id of the owner's own receiving server (unset: "
                            "one-click unsubscribe never applies)"),
    SettingSpec(name=REQUEST_TIMEOUT_SETTING, key="request_timeout_s", type="number",
                default="10", description="the bound on one one-click request (at most 20)"),
    SettingSpec(name=ALLOW_PRIVATE_SETTING, key="allow_private_destinations", type="flag",
                default="off", description="tests only: let one-click requests reach "
                                           "loopback, private and link-local addresses"),
)


def request_seconds(settings: Settings) -> float:
    """The per-request bound; a value that is not a number in (0, 20] reads as the default."""
    raw = (settings.get(REQUEST_TIMEOUT_SETTING) or "").strip()
    try:
        seconds = float(raw)
    except ValueError:
        return _DEFAULT_REQUEST_S
    return seconds if 0 < seconds <= MAX_REQUEST_S else _DEFAULT_REQUEST_S


def open_reader(services: Services, principal: str) -> MailCacheReader:
    # Imported here: the plugin module reads the flags above at every start, the cache only
    # when a tool opens it.
    from toolhost_email.reader import open_mail_cache
    from toolhost_email.store import CacheUnavailable

    try:
        return open_mail_cache(services.data_dir, principal)
    except CacheUnavailable as exc:
        raise ToolFailure(CACHE_UNAVAILABLE, detail={"error": str(exc)}) from exc
