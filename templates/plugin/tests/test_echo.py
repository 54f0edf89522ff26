"""DOMAIN.echo through the host's real pipeline: replace with the tests of the plugin's tools."""

from __future__ import annotations

from toolhost.testing import Harness


def test_echo(toolhost_host: Harness) -> None:
    outcome = toolhost_host.invoke("DOMAIN.echo", text="  hi  ")
    assert (outcome.content, outcome.structured) == ("hi", {"text": "hi"})


def test_blank_text_gets_the_static_message(toolhost_host: Harness) -> None:
    outcome = toolhost_host.invoke("DOMAIN.echo", text="   ")
    assert outcome.failure is not None
    assert outcome.failure.reason_code == "tool.invalid_arguments.blank_text"
    assert outcome.content == "The text is blank. Provide text with at least one visible character."
