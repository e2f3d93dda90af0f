"""Chat Completions replies: agent events -> one `chat.completion` object. Pure.

Also what the whole and the streamed reply share: ids, the usage object, and the reasoning of
several rounds in chat's one reasoning field.
"""

from __future__ import annotations

import os
import time
from typing import Any

from gateway.agent.events import (
    ClientToolCall,
    Finished,
    ReasoningDelta,
    Source,
    TextDelta,
    TextDeltas,
    ToolCallFinished,
    Usage,
)
from gateway.wire.citations import citations

#: What comes between two rounds' reasoning in chat's one reasoning field: a blank line.
ROUND_BREAK = "\n\n"


class ReasoningRounds:
    """A turn's reasoning as chat carries it: in one field (`reasoning_content`, streamed or
    whole), where the reasoning of a round after a tool round would run on from the last sentence
    of the one before (Open WebUI shows it all as one "Thought" block). The first piece of a
    round's reasoning gets ROUND_BREAK in front when an earlier round had reasoning: never before
    the first, never trailing. Rounds end with the agent's tool calls (agent/events.py): the
    Responses API gives each round a reasoning item of its own and needs none of this."""

    __slots__ = ("_any", "_due")

    def __init__(self) -> None:
        self._any = False  # some reasoning was relayed
        self._due = False  # ... and a round ended since

    def piece(self, text: str) -> str:
        if self._due:
            self._due = False
            return ROUND_BREAK + text
        self._any = True
        return text

    def round_ended(self) -> None:
        self._due = self._any


def new_completion_id() -> str:
    # secrets.token_hex(12) is os.urandom(12).hex() behind two Python calls: the same bytes, direct
    return "chatcmpl-" + os.urandom(12).hex()


def usage_object(usage: Usage) -> dict[str, Any]:
    """Chat's `usage`. The details (optional in OpenAI's type) come only when an upstream reported
    them: a server that counts no reasoning tokens must not read as one that counted none."""
    out: dict[str, Any] = {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
    }
    if usage.cached_tokens is not None:
        out["prompt_tokens_details"] = {"cached_tokens": usage.cached_tokens}
    if usage.reasoning_tokens is not None:
        out["completion_tokens_details"] = {"reasoning_tokens": usage.reasoning_tokens}
    return out


class ChatCompletionBuilder:
    """Collects agent events into one `chat.completion` object. `reasoning`: relay the model's
    reasoning as `message.reasoning_content` (API_SERVER_REASONING=show)."""

    def __init__(self, model: str, *, reasoning: bool = True) -> None:
        self.id = new_completion_id()
        self.created = int(time.time())
        self.model = model
        self.reasoning = reasoning
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._rounds: ReasoningRounds | None = None  # made with the first reasoning (most replies have none)
        self._calls: list[dict[str, Any]] = []
        self._sources: list[Source] = []
        self.usage: Usage | None = None  # unknown until the agent reports it (some upstreams never do)
        self.finish = "stop"

    def add(self, event: object) -> None:
        # by exact type, the usual events first (the event classes are final: slots, frozen):
        # a chain of isinstance calls cost a call per kind passed over
        if type(event) is TextDelta:
            self._text.append(event.text)
        elif type(event) is Usage:
            self.usage = event
        elif type(event) is Finished:
            self.finish = event.reason
        elif isinstance(event, TextDeltas):
            self._text.extend(event.texts)
        elif isinstance(event, ReasoningDelta):
            if self.reasoning:
                if self._rounds is None:
                    self._rounds = ReasoningRounds()
                self._reasoning.append(self._rounds.piece(event.text))
        elif isinstance(event, ToolCallFinished):
            if self._rounds is not None:  # (before any reasoning a round's end changes nothing)
                self._rounds.round_ended()
            self._sources.extend(event.sources)
        elif isinstance(event, ClientToolCall):
            self._calls.append({"id": event.call_id, "type": "function",
                                "function": {"name": event.name, "arguments": event.arguments}})

    def result(self) -> dict[str, Any]:
        text = "".join(self._text)
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if self._reasoning:
            message["reasoning_content"] = "".join(self._reasoning)
        if self._calls:
            message["tool_calls"] = self._calls
        elif message["content"] is None:
            message["content"] = ""
        message["refusal"] = None
        message["annotations"] = [c.chat() for c in citations(text, self._sources)] if self._sources else []
        usage = {} if self.usage is None else {"usage": usage_object(self.usage)}  # optional: unknown is no 0s
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish, "logprobs": None}],
            **usage,
            "system_fingerprint": None,
        }
