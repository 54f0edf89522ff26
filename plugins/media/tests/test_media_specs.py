"""Registration: the four tools exist only with the credential, classified and bounded as the
seed says; the default policy pauses every call for approval; the argument bounds fail
before anything is sent."""

from __future__ import annotations

from typing import Any

import pytest

from media_support import KEY, MP4, PLUGINS, FakeTensorScale, call, ok
from toolhost import Idempotency, Risk, Settings, SideEffect, TargetKind, Trust
from toolhost.testing import Harness
from toolhost_media import messages, plugin
from toolhost_media.bounds import IMAGE_SIZES, VIDEO_SIZES

TOOLS = [("image.generate", "1.0.0"), ("image.generate", "1.1.0"),
         ("video.generate", "1.0.0"), ("video.generate", "1.1.0")]


@pytest.mark.parametrize("env", [{}, {"TENSORSCALE_API_KEY": ""},
                                 {"TENSORSCALE_API_KEY": "  "}], ids=["unset", "empty", "blank"])
def test_without_the_key_nothing_registers(env: dict[str, str]) -> None:
    assert plugin.toolhost_tools(Settings(env=env)) == []
    with Harness.over(PLUGINS, settings=env) as host:
        assert host.host.registry.names() == []


def test_with_the_key_four_tools_register(host: Harness) -> None:
    found = sorted((r.spec.name, r.spec.version) for r in host.host.registry)
    assert found == TOOLS
    assert [d.name for d in plugin.toolhost_domains()] == ["image", "video"]


@pytest.mark.parametrize(("name", "version"), TOOLS)
def test_classification(host: Harness, name: str, version: str) -> None:
    spec = host.host.registry.resolve(name, version).spec
    assert (spec.side_effect, spec.risk, spec.idempotency, spec.output_trust) == (
        SideEffect.EXTERNAL_WRITE, Risk.HIGH, Idempotency.NON_IDEMPOTENT,
        Trust.EXTERNAL_UNTRUSTED)
    assert spec.required_scopes == ("media.generate", "artifact.write")
    assert spec.timeout_s == (1800 if name == "image.generate" else 7200)
    assert (spec.maximum_output_bytes, spec.allow_parallel, spec.deprecated) == (4096, False, False)
    assert spec.target_kind is TargetKind.IN_PROCESS
    schema = spec.input_schema
    assert schema["additionalProperties"] is False and schema["required"] == ["prompt"]
    props = schema["properties"]
    assert props["prompt"]["maxLength"] == 8000
    assert (props["seed"]["minimum"], props["seed"]["maximum"]) == (0, 2147483647)
    sizes = IMAGE_SIZES if name == "image.generate" else VIDEO_SIZES
    assert props["size"]["enum"] == list(sizes) and props["size"]["default"] == sizes[0]
    assert len(sizes) == (12 if name == "image.generate" else 5)
    if name == "video.generate":
        assert props["duration_seconds"] == {"type": "integer", "enum": [5, 10], "default": 5,
                                             "description": "Length: 5 or 10 seconds."}
    if version == "1.1.0":
        refs = props["reference_image_ids"]
        assert refs["maxItems"] == (8 if name == "image.generate" else 2)
        assert refs["items"] == {"type": "string", "pattern": "^[0-9a-f]{32}$"}
    else:
        assert "reference_image_ids" not in props


def test_the_default_policy_pauses_every_call(
    server: FakeTensorScale, env: dict[str, str], tmp_path: Any
) -> None:
    del env["TOOLHOST_POLICY"], env["TOOLHOST_POLICY_ALLOW_EXTERNAL_WRITE"]
    with Harness.over(PLUGINS, settings=env, data_dir=tmp_path / "d") as host:
        for name, version in TOOLS:
            paused = call(host, name, {"prompt": "x"}, version=version)
            assert paused.paused, paused
            assert paused.decision == {"action": "approval", "rule": "EXTERNAL_WRITE/HIGH"}
        assert server.received == []  # nothing is sent before an operator approves
        server.reply = ok(MP4, "video/mp4")
        done = host.approve(paused.invocation_id or "")
        assert done.ok, done
        assert [r.path for r in server.received] == ["/v2/ltx-2.5/fast"]


@pytest.mark.parametrize(("arguments", "code"), [
    ({"prompt": ""}, messages.BLANK_PROMPT),
    ({"prompt": " \n\t "}, messages.BLANK_PROMPT),
    ({"prompt": "x" * 8001}, messages.PROMPT_TOO_LONG),
    ({"prompt": "x", "seed": -1}, "tool.invalid_arguments.schema"),
    ({"prompt": "x", "seed": 2147483648}, "tool.invalid_arguments.schema"),
    ({"prompt": "x", "seed": 1.5}, "tool.invalid_arguments.schema"),
    ({"prompt": "x", "size": "1280x768"}, "tool.invalid_arguments.schema"),
    ({"prompt": "x", "url": "https://example.test"}, "tool.invalid_arguments.schema"),
    ({}, "tool.invalid_arguments.schema"),
], ids=["empty", "blank", "long", "seed-negative", "seed-big", "seed-float", "video-size",
        "unknown", "no-prompt"])
def test_image_argument_bounds(
    host: Harness, server: FakeTensorScale, arguments: dict[str, Any], code: str
) -> None:
    outcome = call(host, "image.generate", arguments)
    assert outcome.failure is not None and outcome.failure.reason_code == code
    assert outcome.content == host.host.messages[code]
    assert server.received == []


@pytest.mark.parametrize("arguments", [
    {"prompt": "x", "duration_seconds": 7}, {"prompt": "x", "duration_seconds": 0},
    {"prompt": "x", "size": "1024x1024"},
], ids=["duration-7", "duration-0", "image-size"])
def test_video_argument_bounds(
    host: Harness, server: FakeTensorScale, arguments: dict[str, Any]
) -> None:
    outcome = call(host, "video.generate", arguments)
    assert outcome.failure is not None
    assert outcome.failure.reason_code == "tool.invalid_arguments.schema"
    assert server.received == []


def test_the_longest_prompt_and_largest_seed_are_accepted(
    host: Harness, server: FakeTensorScale
) -> None:
    outcome = call(host, "image.generate", {"prompt": "é" * 8000, "seed": 2147483647})
    assert outcome.ok, outcome
    assert server.received[0].body == {"prompt": "é" * 8000, "size": "1024x1024",
                                       "seed": 2147483647}


def test_readiness_names_a_refused_base_url() -> None:
    assert plugin.toolhost_readiness(Settings(env={})) == []
    assert plugin.toolhost_readiness(Settings(env={"TENSORSCALE_API_KEY": KEY})) == []
    (line,) = plugin.toolhost_readiness(Settings(env={
        "TENSORSCALE_API_KEY": KEY, "TENSORSCALE_BASE_URL": "http://tensorscale.test"}))
    assert line.startswith("image.generate, video.generate: TENSORSCALE_BASE_URL must be an "
                           "https:// URL")
    assert KEY not in line


def test_the_plugin_checks_the_credential_the_tools_use() -> None:
    # plugin.py names the setting itself, so that an unconfigured host imports nothing else.
    from toolhost_media import plugin
    from toolhost_media.generate import CREDENTIAL

    assert f"{CREDENTIAL.upper()}_API_KEY" == plugin._KEY_SETTING
