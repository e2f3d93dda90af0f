"""What the agent yields while it works. Wire-format agnostic: routes translate these.

Order within one run: for each round, `TextDelta`s as the model writes, then for each call to one
of the agent's own tools a `ToolCallStarted` and later its `ToolCallFinished` (calls within a round
run in parallel; finished events come in call order). Calls to tools the *client* supplied come as
`ClientToolCall`s and end the run. Last come one `Usage` (summed over rounds) and one `Finished`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallStarted:
    call_id: str
    name: str
    arguments: str  # JSON text as the model wrote it
    marker: str | None  # progress text for inline markers, e.g. "🔍 query"


@dataclass(frozen=True, slots=True)
class ToolCallFinished:
    call_id: str
    name: str
    output: str  # what the model receives as the tool message content
    ok: bool


@dataclass(frozen=True, slots=True)
class ClientToolCall:
    call_id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True, slots=True)
class Finished:
    reason: str  # "stop" | "length" | "tool_calls" | "content_filter"


AgentEvent = TextDelta | ToolCallStarted | ToolCallFinished | ClientToolCall | Usage | Finished
