"""The client's history as the upstream gets it: one system message, roles it accepts, no reasoning
but the open turn's (its tool calls'; a new turn's input must hold none).

What the gateway itself wrote into an earlier answer's text (progress markers, reasoning tags)
is the wire's to take out, and which requests are a frontend's housekeeping the wire's to tell
(gateway/wire/frontends.py): the agent knows no wire format.
"""

from __future__ import annotations

from typing import Any

from gateway.common.message_text import text_of
from gateway.upstream.deltas import REASONING_FIELDS

_REASONING_KEYS = frozenset(REASONING_FIELDS)
_SYSTEM_ROLES = frozenset({"system", "developer"})
#: Between the parts of the one system message (the gateway's prompt, instructions, the client's).
SYSTEM_BREAK = "\n\n"


def upstream_conversation(prompt: str, instructions: str | None,
                          messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What goes upstream for a turn: ONE leading system message (the gateway's `prompt`, then the
    request's `instructions`, then the text of each client system/developer message, in order),
    then the client's other messages, cleaned. Gemma's template, Mistral's, Qwen's and several
    Llama fine-tunes refuse a second system message or one after the first user turn
    ("Conversation roles must alternate ..."), so a client's later system message joins the
    first too: its words reach the model, its position does not."""
    system = [prompt]
    if instructions:
        system.append(instructions)
    rest: list[dict[str, Any]] = []
    open_turn = _open_turn_start(messages)
    for index, message in enumerate(messages):
        if message.get("role") in _SYSTEM_ROLES:
            text = text_of(message.get("content"))
            if text:
                system.append(text)
        elif index >= open_turn and message.get("tool_calls"):
            # the open turn's calls keep their reasoning, as the agent's own rounds do: thinking
            # models (DeepSeek's) want it back until the turn's answer
            rest.append(message if message.get("content") is not None else {**message, "content": ""})
        else:
            rest.append(clean_message(message))
    return [{"role": "system", "content": SYSTEM_BREAK.join(system)}, *rest]


def clean_message(message: dict[str, Any]) -> dict[str, Any]:
    """What the upstream gets for one client message that is not a system/developer one (those
    join the one system message, see upstream_conversation): an assistant's null content as "",
    and no reasoning: a reasoning field on an earlier turn's assistant message is the client's
    copy of what we relayed, and some upstreams (DeepSeek) refuse it in a new turn's input."""
    if message.get("role") != "assistant":
        return message
    if not _REASONING_KEYS.isdisjoint(message):
        message = {k: v for k, v in message.items() if k not in _REASONING_KEYS}
    if message.get("content") is None:  # a round of calls without text: "" is what every server accepts
        return {**message, "content": ""}
    return message


def _open_turn_start(messages: list[dict[str, Any]]) -> int:
    """The index after the last user message: the turn the model has not answered yet."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "user":
            return index + 1
    return 0
