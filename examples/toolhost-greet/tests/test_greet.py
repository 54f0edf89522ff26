"""greet.hello through the host's real pipeline, with the toolhost test kit's fixtures."""

import pytest

from toolhost.testing import Harness
from toolhost_greet import plugin


@pytest.fixture
def toolhost_plugins() -> dict[str, object]:
    # What the kit's toolhost_host fixture runs: this plugin alone, not installed ones.
    return {"toolhost-greet": plugin}


def test_hello(toolhost_host: Harness) -> None:
    outcome = toolhost_host.invoke("greet.hello", name="Ada")
    assert (outcome.content, outcome.structured) == ("Hello, Ada!", {"greeting": "Hello, Ada!"})


def test_a_blank_name_gets_the_static_message(toolhost_host: Harness) -> None:
    outcome = toolhost_host.invoke("greet.hello", name="  ")
    assert outcome.failure is not None
    assert outcome.failure.reason_code == "tool.invalid_arguments.blank_name"
    assert outcome.content == "The name is blank. Provide a name with at least one letter."


def test_a_name_over_64_characters_is_refused_before_the_tool_runs(
    toolhost_host: Harness,
) -> None:
    outcome = toolhost_host.invoke("greet.hello", name="x" * 65)
    assert outcome.failure is not None
    assert outcome.failure.reason_code == "tool.invalid_arguments.schema"
