from toolhost_greet import plugin

from toolhost.testing import host_for


def test_hello() -> None:
    outcome = host_for({"toolhost-greet": plugin}).invoke_sync("greet.hello", {"name": "Ada"})
    assert (outcome.content, outcome.structured) == ("Hello, Ada!", {"greeting": "Hello, Ada!"})


def test_a_blank_name_gets_the_static_message() -> None:
    outcome = host_for({"toolhost-greet": plugin}).invoke_sync("greet.hello", {"name": "  "})
    assert outcome.failure is not None
    assert outcome.failure.reason_code == "tool.invalid_arguments.blank_name"
    assert outcome.content == "The name is blank. Provide a name with at least one letter."
