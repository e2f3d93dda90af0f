"""What the upstream model said, as typed deltas: the one shape the agent reads, streamed or not.

The upstream client turns OpenAI chat-completion chunks (streamed) and whole completions into
these, so nothing past it parses `choices`, `delta` or `tool_calls`. A whole reply comes out as the
same sequence a stream of it would: its text, its reasoning, one fragment per tool call, usage,
finish reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: The fields OpenAI-compatible servers put a model's reasoning in (vLLM/DeepSeek, OpenRouter, others).
REASONING_FIELDS = ("reasoning_content", "reasoning", "reasoning_text")


@dataclass(slots=True)
class Text:
    """A piece of the answer's text (never empty)."""

    text: str


@dataclass(slots=True)
class Texts:
    """The answer's text deltas of one received piece of a stream, in order (each never empty,
    never none): a burst of frames crosses the agent and the wire encoder as one item, not one
    async step per frame. Each stays a delta of its own: the client gets the same chunks."""

    texts: list[str]


@dataclass(slots=True)
class Reasoning:
    """A piece of the model's reasoning, apart from its answer (never empty). `field`: the name the
    upstream sent it under (one of REASONING_FIELDS), the name it wants it back under."""

    text: str
    field: str = "reasoning_content"


@dataclass(slots=True)
class ToolCallPart:
    """A fragment of one tool call: fragments with the same `index` make one call, their `name`
    and `arguments` concatenated; `id` comes with one of them. `index` None: a call of its own."""

    index: int | None
    id: str | None = None
    name: str | None = None
    arguments: str | None = None


@dataclass(slots=True)
class TokenUsage:
    """The reply's `usage`; a detail the upstream did not report (or sent malformed) is None."""

    prompt_tokens: int
    completion_tokens: int
    #: `completion_tokens_details.reasoning_tokens`
    reasoning_tokens: int | None = None
    #: `prompt_tokens_details.cached_tokens`
    cached_tokens: int | None = None


@dataclass(slots=True)
class Finish:
    """The choice's finish reason ("stop", "length", "tool_calls", "content_filter" ...)."""

    reason: str


UpstreamDelta = Text | Texts | Reasoning | ToolCallPart | TokenUsage | Finish


def _reasoning(body: dict[str, Any]) -> Reasoning | None:
    """The body's reasoning; a field of another type than a string (malformed) is skipped."""
    for name in REASONING_FIELDS:
        value = body.get(name)
        if isinstance(value, str) and value:
            return Reasoning(value, name)
    return None


def _detail(usage: dict[str, Any], group: str, name: str) -> int | None:
    """`usage[group][name]` when it is a count; anything else (missing, null, a string) is unknown."""
    details = usage.get(group)
    if type(details) is dict:
        value = details.get(name)
        if type(value) is int and value >= 0:  # type(): a bool is no count
            return value
    return None


def token_usage(usage: dict[str, Any]) -> TokenUsage:
    tokens = TokenUsage(int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0))
    if "completion_tokens_details" in usage or "prompt_tokens_details" in usage:  # servers without skip this
        tokens.reasoning_tokens = _detail(usage, "completion_tokens_details", "reasoning_tokens")
        tokens.cached_tokens = _detail(usage, "prompt_tokens_details", "cached_tokens")
    return tokens


def deltas_of(data: dict[str, Any], body_key: str) -> list[UpstreamDelta]:
    """The deltas in one well-formed chunk (`body_key` "delta") or whole completion ("message"),
    in the order a stream sends them. The shape was checked before (`shapes.well_formed`)."""
    out: list[UpstreamDelta] = []
    for choice in data.get("choices") or ():
        body = choice.get(body_key) or {}
        reasoning = _reasoning(body)
        if reasoning is not None:
            out.append(reasoning)
        content = body.get("content")
        if content:
            out.append(Text(content))
        for position, call in enumerate(body.get("tool_calls") or ()):
            index = call.get("index")
            if not isinstance(index, int) or isinstance(index, bool):
                # a whole reply's calls carry no index: each is its own, by position
                index = position if body_key == "message" else None
            function = call.get("function") or {}
            out.append(ToolCallPart(index, call.get("id") or None, function.get("name") or None,
                                    function.get("arguments") or None))
        if choice.get("finish_reason"):
            out.append(Finish(choice["finish_reason"]))
    usage = data.get("usage")
    if isinstance(usage, dict):
        out.append(token_usage(usage))
    return out
