"""The image and video domains' hooks: four tools, only with the TensorScale credential.

With TENSORSCALE_API_KEY set, image.generate and video.generate register at 1.0.0 (pinned
chats) and 1.1.0 (the latest, with reference_image_ids); without it, neither domain
advertises a tool, and nothing beyond this module is imported (the adapter brings httpx). A
base URL the adapter refuses (not https://), or a key no HTTP header can carry (not printable
ASCII), keeps the tools registered and failing closed with a static reason, and ``toolhost
check`` says why.
"""

from __future__ import annotations

from toolhost import Domain, Settings, SettingSpec, Tool, hookimpl

__all__ = ["DOMAINS", "toolhost_domains", "toolhost_readiness", "toolhost_tools"]

DOMAINS = [
    Domain("image", "Images generated from a prompt (and reference images), attached to the "
           "reply."),
    Domain("video", "Videos generated from a prompt (and first/last frames), attached to the "
           "reply."),
]



#: The credential reference (TENSORSCALE_API_KEY); ``generate.CREDENTIAL`` says the same.
_KEY_SETTING = "TENSORSCALE_API_KEY"


def _has_credential(settings: Settings) -> bool:
    return settings.secret(_KEY_SETTING) is not None


@hookimpl
def toolhost_settings() -> list[SettingSpec]:
    return [
        SettingSpec(name=_KEY_SETTING, key="api_key", type="secret",
                    description="the TensorScale API key: registers image.generate and "
                                "video.generate",
                    activates=("image.generate", "video.generate")),
        # The name toolhost_media.tensorscale reads (imported only with the key set).
        SettingSpec(name="TENSORSCALE_BASE_URL", key="base_url", type="url",
                    default="https://api.tensorscale.ai",
                    description="TensorScale's API origin (https; a test's loopback server)"),
    ]


@hookimpl
def toolhost_domains() -> list[Domain]:
    return list(DOMAINS)


@hookimpl
def toolhost_tools(settings: Settings) -> list[Tool]:
    if not _has_credential(settings):
        return []
    from toolhost_media.generate import builder
    from toolhost_media.messages import reasons
    from toolhost_media.references import READ_SCOPE
    from toolhost_media.specs import IMAGE_V1, IMAGE_V2, VIDEO_V1, VIDEO_V2

    return [
        Tool(spec, build=builder(spec),
             reasons=reasons(references=spec.version == "1.1.0",
                             distinct=spec.name == "image.generate"),
             checked_scopes=(READ_SCOPE,) if spec.version == "1.1.0" else ())
        for spec in (IMAGE_V1, IMAGE_V2, VIDEO_V1, VIDEO_V2)
    ]


@hookimpl
def toolhost_readiness(settings: Settings) -> list[str]:
    key = settings.secret(_KEY_SETTING)
    if key is None:
        return []  # nothing registered, nothing to be ready
    from toolhost_media.tensorscale import (
        BASE_URL_SETTING,
        DEFAULT_BASE_URL,
        base_url_problem,
        key_problem,
    )

    base_url = (settings.get(BASE_URL_SETTING) or "").strip() or DEFAULT_BASE_URL
    problem = key_problem(key.reveal()) or base_url_problem(base_url)
    if problem is None:
        return []
    return [f"image.generate, video.generate: {problem}; every call fails until it is fixed"]
