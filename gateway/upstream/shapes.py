"""Whether an upstream's completion or stream chunk has the shape the agent reads.

A well-formed JSON object of the wrong shape must become an upstream error, not a crash (500).
"""

from __future__ import annotations

from typing import Any

from gateway.errors import UpstreamError
from gateway.upstream.deltas import REASONING_FIELDS, Finish, Text, TokenUsage, UpstreamDelta, deltas_of

#: A message with none of these (and a usage without these) is the usual reply: text, a finish
#: reason, the two counts. Any of them, even null or empty, takes the general reading.
_NOT_PLAIN_MESSAGE = frozenset({*REASONING_FIELDS, "tool_calls"})
_NOT_PLAIN_USAGE = frozenset({"completion_tokens_details", "prompt_tokens_details"})


def completion_deltas(data: dict[str, Any]) -> list[UpstreamDelta]:
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        raise UpstreamError("the upstream model returned a completion without choices")
    if len(choices) == 1:
        usual = _usual_reply(choices[0], data.get("usage"))
        if usual is not None:
            return usual
    if not well_formed(data, "message"):
        raise UpstreamError("the upstream model returned a completion of an unexpected shape")
    # the first choice only (n=1 is all we ask for); the usual reply has no other to drop
    return deltas_of(data if len(choices) == 1 else {**data, "choices": choices[:1]}, "message")


# "this type, or null/absent": one isinstance each (a helper function per field cost a Python call)
_DICT_OR_NULL = (dict, type(None))
_LIST_OR_NULL = (list, type(None))
_STR_OR_NULL = (str, type(None))
_INT_OR_NULL = (int, type(None))


def well_formed(data: dict[str, Any], body_key: str) -> bool:
    """Whether a completion (`body_key` "message") or chunk ("delta") has the shape the agent reads:
    a well-formed JSON object of the wrong shape must be an upstream error, not a crash (500)."""
    usage = data.get("usage")
    choices = data.get("choices")
    if not isinstance(usage, _DICT_OR_NULL) or not isinstance(choices, _LIST_OR_NULL):
        return False
    if usage is not None and not (isinstance(usage.get("prompt_tokens"), _INT_OR_NULL)
                                  and isinstance(usage.get("completion_tokens"), _INT_OR_NULL)):
        return False
    for choice in choices or ():
        if not isinstance(choice, dict) or not isinstance(choice.get("finish_reason"), _STR_OR_NULL):
            return False
        body = choice.get(body_key)
        if not isinstance(body, _DICT_OR_NULL):
            return False
        body = body or {}
        tool_calls = body.get("tool_calls")
        if not isinstance(body.get("content"), _STR_OR_NULL) or not isinstance(tool_calls, _LIST_OR_NULL):
            return False
        for call in tool_calls or ():
            if not isinstance(call, dict) or not isinstance(call.get("function"), _DICT_OR_NULL):
                return False
            function = call.get("function") or {}
            if not isinstance(function.get("name"), _STR_OR_NULL) \
                    or not isinstance(function.get("arguments"), _STR_OR_NULL):
                return False
            if not isinstance(call.get("id"), _STR_OR_NULL):
                return False
    return True


def _usual_reply(choice: Any, usage: Any) -> list[UpstreamDelta] | None:
    """The usual reply (one choice: text, a finish reason, the two counts) read in one pass,
    checked as well_formed would, with what deltas_of would give; None for any other shape, which
    takes the general reading. Its checks and reading cost more than the rest of the reply's
    handling in the upstream client. type(), not isinstance: a bool is no count."""
    if type(choice) is not dict or not (usage is None or (type(usage) is dict and _NOT_PLAIN_USAGE.isdisjoint(usage))):
        return None
    message = choice.get("message")
    finish = choice.get("finish_reason")
    if type(message) is not dict or not _NOT_PLAIN_MESSAGE.isdisjoint(message):
        return None
    if not (finish is None or type(finish) is str):
        return None
    content = message.get("content")
    prompt: Any = 0
    completion: Any = 0
    if usage is not None:
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if not ((content is None or type(content) is str) and (prompt is None or type(prompt) is int)
            and (completion is None or type(completion) is int)):
        return None
    out: list[UpstreamDelta] = [Text(content)] if content else []
    if finish:
        out.append(Finish(finish))
    if usage is not None:
        out.append(TokenUsage(prompt or 0, completion or 0))
    return out
