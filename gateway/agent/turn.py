"""What one agent turn takes (`AgentRequest`) and what it gives (`AgentRun`: its events and transcript)."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

from gateway.agent.events import AgentEvent
from gateway.agent.research.options import ResearchOptions
from gateway.agent.tool_servers import McpApproval, McpServerRequest
from gateway.agent.web.options import WebSearchOptions
from gateway.upstream.client import Opener


@dataclass
class AgentRequest:
    #: Chat-format conversation as the client sent it (its system/developer messages in place).
    messages: list[dict[str, Any]]
    #: Chat-format function tools the client supplied; calls to them go back to the client.
    client_tools: list[dict[str, Any]] = field(default_factory=list)
    #: Sampling and other fields passed upstream unchanged (temperature, max_tokens, tool_choice ...).
    params: dict[str, Any] = field(default_factory=dict)
    #: Stream the upstream (token deltas) or ask for whole replies.
    stream: bool = True
    #: Extra system text for this request only (the Responses API's `instructions`).
    instructions: str | None = None
    #: The request's web search options (a hosted web_search tool, `web_search_options`); None
    #: when it asked for none (then `API_SERVER_WEB_TOOLS=on_request` offers no web tools).
    web: WebSearchOptions | None = None
    #: A frontend's housekeeping (a title, tags), told by the wire: no agent tools for it.
    background: bool = False
    #: The number of the turn's first web source (the request's own documents may hold the first).
    first_source: int = 1
    #: The request's model route (gateway/upstream/routes.py): sends each model call, fallbacks
    #: included; None: the agent's own upstream, as configured.
    opener: Opener | None = None
    #: The route's API_SERVER_WEB_TOOLS (always, on_request, off); None: the agent's own.
    web_tools: str | None = None
    #: Calls of the agent's own tools in `messages` whose tool message holds no result (a client
    #: replayed them without one): (call id, tool name, arguments JSON). Run again before the
    #: first round when the agent's tools are on offer, their results put in place.
    replayed: tuple[tuple[str, str, str], ...] = ()
    #: A round that calls the agent's tools beside the client's runs the agent's first, when the
    #: next request can bring their results back (a stored transcript, replayed items: the
    #: Responses API); otherwise (Chat Completions, whose history holds only the client's calls)
    #: they are dropped, as the client would continue without their results.
    own_calls_beside_client_calls: bool = False
    #: MCP servers the request names (Responses `mcp` tools), offered for this turn only.
    mcp: tuple[McpServerRequest, ...] = ()
    #: The most calls the agent's own tools (web and MCP) may make this turn; None: only max_rounds bounds them.
    max_tool_calls: int | None = None
    #: The request's API key may not use the web tools: none offered, none run (a replayed call too).
    no_web: bool = False
    #: The configured MCP servers (labels) the request's key may use; None: every one.
    mcp_labels: frozenset[str] | None = None
    #: Whether a call to an MCP tool that needs approval can end the turn with an approval request
    #: (the Responses API); where not (Chat Completions), such tools are not offered at all.
    approvals_possible: bool = False
    #: The client's answers to earlier approval requests: run (approved) or told to the model
    #: (denied) before the first round.
    approvals: tuple[McpApproval, ...] = ()
    #: The model reads images: those an MCP tool's result holds go to it (else it reads a note of each).
    vision: bool = False
    #: `tool_choice: {"type": "mcp"}`: (server label, tool name or None) the first round must call.
    mcp_choice: tuple[str, str | None] | None = None
    #: A deep-research turn (gateway/agent/research/) and its bounds; None: the tool-calling loop.
    research: ResearchOptions | None = None


class AgentRun:
    """One turn of the agent: `events` to iterate, and the transcript the agent keeps of it.

    The agent owns the transcript: `messages` is what this turn has added to the conversation so
    far, in chat format (assistant messages, with their `tool_calls`, and `tool` results), the
    text of a round still being written included. The last event, `Finished`, hands out the
    whole of it; a run cut short (an error, the client gone) keeps what it had here.
    """

    __slots__ = ("events", "_messages", "_writing")

    def __init__(self) -> None:
        self.events: AsyncGenerator[AgentEvent, None]
        self._messages: list[dict[str, Any]] = []
        self._writing: list[str] | None = None  # the text parts of the round being written

    @property
    def messages(self) -> list[dict[str, Any]]:
        if self._writing:
            return [*self._messages, {"role": "assistant", "content": "".join(self._writing)}]
        return list(self._messages)

    def _write(self, parts: list[str]) -> None:
        """A round begins: its text so far is `parts` (the agent's own list, appended to as it goes)."""
        self._writing = parts

    def _add(self, message: dict[str, Any]) -> None:
        self._messages.append(message)
        self._writing = None
