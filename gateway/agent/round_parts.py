"""What one model call brought, delta by delta (the agent loop's round): text, reasoning, tool-call
parts, finish reason and usage."""

from __future__ import annotations

from gateway.agent.events import AgentEvent, ReasoningDelta, TextDelta, TextDeltas
from gateway.agent.tool_calls import ToolCall, merge_call_part
from gateway.upstream.deltas import Finish, Reasoning, Text, Texts, TokenUsage, ToolCallPart, UpstreamDelta

#: The deltas that start a reply's content (a stream's time to first token); Finish and usage do not
CONTENT = frozenset({Texts, Text, ToolCallPart, Reasoning})


class RoundParts:
    """What one model call brought, delta by delta: its text, reasoning (and the field the model
    used for it), tool-call parts, finish reason and usage. `take` keeps a delta and returns the
    event the client sees for it, if any; streamed and whole replies go through the same one."""

    __slots__ = ("text", "reasoning", "reasoning_field", "calls", "finish", "usage")

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.reasoning_field = ""
        self.calls: dict[int, ToolCall] = {}
        self.finish: str | None = None
        self.usage: TokenUsage | None = None

    def take(self, delta: UpstreamDelta) -> AgentEvent | None:
        if type(delta) is Texts:  # a stream's burst, nearly every item: checked first
            self.text.extend(delta.texts)
            return TextDeltas(delta.texts)  # the client's list, passed on as it is
        if type(delta) is Text:
            self.text.append(delta.text)
            return TextDelta(delta.text)
        if type(delta) is Reasoning:
            self.reasoning.append(delta.text)
            self.reasoning_field = delta.field
            return ReasoningDelta(delta.text, delta.field)
        if type(delta) is ToolCallPart:
            merge_call_part(self.calls, delta)
        elif type(delta) is Finish:
            self.finish = delta.reason
        elif type(delta) is TokenUsage:
            self.usage = delta
        return None

    def started(self) -> bool:
        return bool(self.text or self.reasoning or self.calls)
