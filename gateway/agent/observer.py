"""What the agent tells an observer (metrics, traces) about its work, without knowing who listens.

The agent calls `upstream_call()` before each model call, `round_usage()` when its round ends,
`tool_call()` before each tool call and `turn_finished()` once per turn; each call object gets
`finish(outcome)` exactly once. The base classes here observe nothing and cost a method call, so an
agent built without an observer (tests, `API_SERVER_METRICS=false` without tracing) pays next to
nothing. gateway/observe/agent_calls.py has the one that feeds Prometheus and OpenTelemetry.

Outcomes are a closed set (bounded metric labels): upstream `ok`, `timeout`, `rate_limited`,
`rejected`, `error`, `cancelled`; tools `ok`, `failed` (a failure envelope), `timeout`, `error`,
`unknown_tool`, `bad_arguments`, `unavailable` (no provider), `cancelled`; an MCP call `ok`,
`tool_error` (the tool reported failure: `isError`), `timeout`, `error` (protocol or HTTP), or the
agent's `bad_arguments`, `cancelled`.

A web tool knows which provider served a call and how that went; the agent knows neither. The agent
puts a `ToolReport` in a context variable for the call (as OpenTelemetry keeps its current span),
and the tool fills it in with `report_provider()`; the variable is a key, each value lives in one
call's task context.
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping

from gateway.errors import GatewayError, InvalidRequestError, RateLimitError, UpstreamTimeoutError

#: An MCP call's names: (the server's metric label: its configured label, or `request` for a server a
#: request named, keeping label values bounded; the server's label; the tool's name on the server).
McpCallNames = tuple[str, str, str]


class UpstreamCall:
    """One model call. `headers` go upstream with it (e.g. a W3C `traceparent`)."""

    __slots__ = ()
    headers: Mapping[str, str] | None = None

    def first_token(self) -> None:
        """The first text or tool-call delta of a streamed call has arrived."""

    def finish(self, outcome: str) -> None:
        """The call ended: `ok`, or what `upstream_outcome()` says of the exception."""


class ToolCall:
    __slots__ = ()

    def finish(self, provider: str, outcome: str) -> None:
        """The call ended; `provider` is the web provider that served it, or `none`."""


class AgentObserver:
    """Observes nothing; subclasses override what they record."""

    _UPSTREAM = UpstreamCall()
    _TOOL = ToolCall()

    def upstream_call(self, stream: bool) -> UpstreamCall:
        return self._UPSTREAM

    def tool_call(self, tool: str, mcp: McpCallNames | None = None) -> ToolCall:
        """`mcp`, for a call to an MCP server's tool: (the server's metric label, its label, the tool)."""
        return self._TOOL

    def turn_finished(self, tool_rounds: int, prompt_tokens: int, completion_tokens: int) -> None:
        """A turn ended without an error, after `tool_rounds` rounds of tool calls."""

    def citations_removed(self, count: int) -> None:
        """A deep-research report cited `count` pages the run never read nor saw (removed)."""

    def round_usage(self, prompt_tokens: int, completion_tokens: int, *, estimated: bool) -> None:
        """One model call's tokens, as soon as its round ends, however it ends (finished, cut by
        the client leaving or a cancel, failed midway): what the upstream reported, or
        (`estimated`) the agent's estimate when it reported nothing."""


def upstream_outcome(exc: BaseException) -> str:
    if isinstance(exc, UpstreamTimeoutError | TimeoutError):
        return "timeout"
    if isinstance(exc, RateLimitError):
        return "rate_limited"
    if isinstance(exc, InvalidRequestError):
        return "rejected"
    if isinstance(exc, GatewayError | Exception):
        return "error"
    return "cancelled"  # CancelledError, GeneratorExit: the client went away or the run was cut


class ToolReport:
    """Filled in by the tool while it runs (see `report_provider`)."""

    __slots__ = ("provider", "outcome")

    def __init__(self) -> None:
        self.provider = "none"
        self.outcome = "ok"


CURRENT_TOOL_REPORT: contextvars.ContextVar[ToolReport | None] = contextvars.ContextVar(
    "agent_gateway_tool_report", default=None)


def report_provider(provider: str, outcome: str) -> None:
    """Called by a tool: `provider` served (part of) the current call with `outcome`. A later
    failure is kept over an earlier success (a crawl of several URLs fails if one does)."""
    report = CURRENT_TOOL_REPORT.get()
    if report is not None:
        report.provider = provider
        if report.outcome == "ok":
            report.outcome = outcome
