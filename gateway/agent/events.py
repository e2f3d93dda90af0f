"""What the agent yields while it works. Wire-format agnostic: routes translate these.

Order within one run: for each round, `ReasoningDelta`s and `TextDelta`s (or `TextDeltas`, several
at once) as the model writes, then for each call to one of the agent's own tools a
`ToolCallStarted` and later its `ToolCallFinished` (calls within a round run in parallel; finished
events come in call order). Calls to tools the *client* supplied come as
`ClientToolCall`s and end the run (the agent's own calls of that round run first, as above); so do
calls to MCP tools that need the client's approval, as `McpApprovalRequested`s (Responses API only).
Before everything, one `McpToolsListed` per MCP server whose tools are offered. Before the first
round, calls a client replayed without their results and the agent ran again
(gateway/agent/replay.py) come as `ToolCallFinished`s with no `ToolCallStarted`: their pages, for
citations; the client was told of the calls when they first ran. Last come one `Usage` (summed
over rounds; none when a round's upstream reply reported no usage: unknown, which is not 0) and
one `Finished`, which carries the turn's transcript.

A deep-research run (gateway/agent/research/) yields the same kinds, in its own order: its plan
and reflections as `ReasoningDelta`s, its searches and page reads as `ToolCallStarted` /
`ToolCallFinished` pairs (several under way at once), `Progress` between them, then the checked
report as text, one `Usage` for the whole run and `Finished`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class TextDeltas:
    """Several text deltas in a row, each as a `TextDelta` of its own would be (a wire format
    sends one chunk per text): what a stream's burst of frames, received together, becomes, so
    that it crosses the agent and the encoder as one event. Read-only."""

    texts: Sequence[str]


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """A piece of the model's reasoning (its thinking, apart from the answer text)."""

    text: str
    #: The field the upstream sent it under (reasoning_content, reasoning ...): what it wants back.
    field: str = "reasoning_content"


@dataclass(frozen=True, slots=True)
class Source:
    """A web page one of the agent's tools returned (a search hit or a page read)."""

    url: str
    title: str
    #: Its number in this turn, what the model cites it by (`[3]`); 0 when it has none.
    number: int = 0
    #: What the tool returned of it: a search hit's snippet, the start of a page read.
    text: str = ""


@dataclass(frozen=True, slots=True)
class ToolCallStarted:
    call_id: str
    name: str
    arguments: str  # JSON text as the model wrote it
    marker: str | None  # progress text for inline markers, e.g. "🔍 query"
    #: What the call is after, for progress displays: the search queries, the URLs to read.
    queries: tuple[str, ...] = ()
    urls: tuple[str, ...] = ()
    #: (server label, tool name as the server knows it) for a tool of an MCP server; None otherwise.
    mcp: tuple[str, str] | None = None
    #: The approval request this call was approved by (an MCP call that needed approval).
    approval_request_id: str | None = None


@dataclass(frozen=True, slots=True)
class ToolCallFinished:
    call_id: str
    name: str
    output: str  # what the model receives as the tool message content
    ok: bool
    #: The pages the call returned (search hits, pages read), for citations and progress displays.
    sources: tuple[Source, ...] = ()
    #: How a failed call failed, as a typed object (an MCP call's OpenAI `mcp_call.error`); None when
    #: the tool gave none.
    error: dict[str, Any] | None = None
    #: Images the result held (an MCP tool's), as chat `image_url` parts with data URLs.
    images: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class McpToolsListed:
    """An MCP server's tools were listed for this turn (before its first model call): `tools` in
    OpenAI's `McpListToolsTool` shape, or `error` when the server could not list them."""

    server_label: str
    tools: tuple[dict[str, Any], ...] = ()
    error: str | None = None


@dataclass(frozen=True, slots=True)
class McpApprovalRequested:
    """A call to an MCP tool that needs the client's approval: not run; the turn ends with it."""

    call_id: str
    server_label: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class Progress:
    """Where a long run stands, for a status line ("3 of 5 questions, 14 sources read"): shown by
    displays that have one (Open WebUI's), ignored by the rest (their reasoning says as much)."""

    description: str
    done: bool = False


@dataclass(frozen=True, slots=True)
class ClientToolCall:
    call_id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens summed over the turn's rounds. A detail is None when no round's upstream reply
    reported it (unknown, which is not 0); else the sum over the rounds that did."""

    prompt_tokens: int
    completion_tokens: int
    reasoning_tokens: int | None = None
    cached_tokens: int | None = None

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True, slots=True)
class Finished:
    reason: str  # "stop" | "length" | "tool_calls" | "content_filter"
    #: The chat messages this turn added (assistant, tool), in order, ending on an assistant
    #: message: the agent's transcript of the turn, what a stored response continues from.
    messages: tuple[dict[str, Any], ...] = ()


AgentEvent = (TextDelta | TextDeltas | ReasoningDelta | ToolCallStarted | ToolCallFinished | ClientToolCall | Usage
              | Finished | McpToolsListed | McpApprovalRequested | Progress)
