"""The person's own words over MCP: a tool whose arguments must be the user's (``UserWords``).

When: a served tool declares ``Tool.user_words`` (email.feedback) and the session's run has no
user turn, which over MCP it never has: the client keeps the conversation and sends the
server only the model's calls. What: the server asks the client's user in a form (pushed as
``elicitation/create`` on a 2025 session, returned as an ``InputRequiredResult`` on a
2026-07-28 one). The form's one field is prefilled with what the model proposed for the first
named argument; the person accepts it or edits it, and the text they accept becomes every
named argument and the call's user turn: the one input at USER trust, and what the tool
stores. Decline, cancel, no answer in time or an error: the call ends ``user_declined``
without running; the request cancelled, or the client gone, meanwhile: ``run_cancelled``, as
any cancelled call (``calls``). A client that cannot show a form: ``needs_user`` (the
pipeline's own refusal), never a loop that tells the model to ask again. Nobody is asked for a call refused whatever
they say (steps 1-4, the run's deadline passed), nor for one its policy cell denies (denied as
any such call is, the model's arguments on the row); and a call that also needs approval, repeated
after the approval was left waiting, finds the row its words went on by the model's own
arguments (``Session.worded``) before anyone is asked (``calls``).

Why a form and not the model's text: what a tool stores as the person's must be text the
person gave. The model's proposal is only the field's starting value; the host's own sentence
says what the person is being asked, and nothing the model wrote is in it. A proposal holding
a character that shows as nothing (``printable.prints``, line breaks aside) is not put in the
field: accepted as seen, its hidden part would become the person's words. What the person
sends back is kept as they sent it: their own script's joiners, an emoji's selector (every
display of it escapes them, D465).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import mcp.types as types

from toolhost._composition import Registered, prints

__all__ = ["WORDS_KEY", "WORDS_STATE_PREFIX", "with_words", "words_of", "words_request"]

#: The key of this question in an ``InputRequiredResult`` (2026-07-28 clients).
WORDS_KEY = "toolhost.user_words"
#: ``request_state`` of that question: this prefix and the digest of the model's arguments, so
#: an answer is taken only for the same call retried.
WORDS_STATE_PREFIX = "words:"


def words_request(registered: Registered, arguments: Mapping[str, Any]) -> types.ElicitRequest:
    """The form asking the person for their words, prefilled with the model's proposal when
    every character of it shows."""
    words = registered.tool.user_words
    assert words is not None
    spec = registered.spec
    first = words.arguments[0]
    proposed = arguments.get(first)
    field: dict[str, Any] = {
        "type": "string",
        "title": "Your words",
        "description": "What you accept here is recorded as your own words.",
    }
    if not isinstance(proposed, str) or not proposed.strip():
        # A blank proposal accepted as is would read as a decline (``words_of``).
        offer = "The field is empty: write what you mean."
    elif prints(proposed.replace("\n", "")):  # a line break shows as one in the field
        field["default"] = proposed
        offer = ("The field holds what the assistant proposed: accept it, or change it to say "
                 "what you mean.")
    else:
        # Prefilled, what the person sees would not be what they accept (D465's promise).
        offer = ("The assistant's proposal held characters that do not show, so the field is "
                 "empty: write what you mean.")
    bound = spec.input_schema.get("properties", {}).get(first, {})
    for keyword in ("minLength", "maxLength"):
        if isinstance(bound.get(keyword), int):
            field[keyword] = bound[keyword]
    message = (
        f"toolhost asks for your own words for {spec.name} {spec.version}. {words.prompt}\n"
        f"{offer} Decline and nothing is recorded."
    )
    return types.ElicitRequest(params=types.ElicitRequestFormParams(
        message=message,
        requested_schema=copy.deepcopy({"type": "object", "properties": {"text": field},
                                        "required": ["text"]}),
    ))


def words_of(answer: Any) -> str | None:
    """The person's accepted text; None for anything else (declined, cancelled, empty)."""
    if not isinstance(answer, types.ElicitResult) or answer.action != "accept":
        return None
    text = (answer.content or {}).get("text")
    return text if isinstance(text, str) and text.strip() else None


def with_words(registered: Registered, arguments: Mapping[str, Any], text: str) -> dict[str, Any]:
    """The arguments with the person's text in every argument ``user_words`` names."""
    words = registered.tool.user_words
    assert words is not None
    return {**arguments, **dict.fromkeys(words.arguments, text)}
