"""The agent's observer for a running gateway: Prometheus metrics and, when on, OpenTelemetry spans.

Spans of model and tool calls are children of the request's span (current in the task that runs
the agent, or copied into the stream's producer task), and are never made current themselves: an
agent generator may be closed from another task, where detaching a context would fail. Each model
call's `traceparent` names its own span, so the upstream's spans hang below it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gateway.agent.observer import AgentObserver, McpCallNames, ToolCall, UpstreamCall
from gateway.observe.access_log import count_mcp_call
from gateway.observe.after_reply import AfterReply
from gateway.observe.metrics import Metrics

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer


class _Upstream(UpstreamCall):
    __slots__ = ("_observer", "_started", "_first", "_span", "headers")

    def __init__(self, observer: GatewayObserver, stream: bool) -> None:
        self._observer = observer
        self._started = time.perf_counter()
        self._first: float | None = None
        self._span: Any = None
        self.headers: Mapping[str, str] | None = None
        tracing = observer.tracing
        if tracing is not None:
            trace, propagate, tracer = tracing
            self._span = tracer.start_span("upstream chat.completions", kind=trace.SpanKind.CLIENT,
                                           attributes={"gen_ai.operation.name": "chat", "gateway.stream": stream})
            headers: dict[str, str] = {}
            propagate.inject(headers, context=trace.set_span_in_context(self._span))
            self.headers = headers

    def first_token(self) -> None:
        self._first = time.perf_counter()

    def finish(self, outcome: str) -> None:
        now = time.perf_counter()
        metrics = self._observer.metrics
        if metrics is not None:
            # recorded later (observe/after_reply.py): the agent's reply, rendered and written in this
            # step, need not wait for the bookkeeping
            self._observer.after_reply.add_figures(metrics.upstream_done, outcome, now - self._started,
                                                   None if self._first is None else self._first - self._started)
        if self._span is not None:
            _end(self._span, outcome)


class _Tool(ToolCall):
    __slots__ = ("_observer", "_tool", "_started", "_span", "_mcp_server")

    def __init__(self, observer: GatewayObserver, tool: str, mcp: McpCallNames | None = None) -> None:
        self._observer = observer
        self._tool = tool
        self._started = time.perf_counter()
        self._span: Any = None
        self._mcp_server = None if mcp is None else mcp[0]
        tracing = observer.tracing
        if tracing is not None:
            if mcp is None:
                self._span = tracing[2].start_span(f"tool {tool}", attributes={"gateway.tool": tool})
            else:  # the span names the server and the tool (a span name is no metric label)
                self._span = tracing[2].start_span(
                    f"mcp {mcp[1]}.{mcp[2]}", kind=tracing[0].SpanKind.CLIENT,
                    attributes={"gateway.tool": tool, "gateway.mcp.server": mcp[1], "gateway.mcp.tool": mcp[2],
                                "gen_ai.tool.name": mcp[2], "rpc.method": "tools/call"})

    def finish(self, provider: str, outcome: str) -> None:
        metrics = self._observer.metrics
        seconds = time.perf_counter() - self._started
        if metrics is not None:
            metrics.tool_done(self._tool, provider, outcome, seconds)
            if self._mcp_server is not None:
                metrics.mcp_done(self._mcp_server, outcome, seconds)
        if self._span is not None:
            self._span.set_attribute("gateway.provider", provider)
            _end(self._span, outcome)


def _end(span: Any, outcome: str) -> None:
    from opentelemetry.trace import Status, StatusCode

    span.set_attribute("gateway.outcome", outcome)
    if outcome not in ("ok", "cancelled"):
        span.set_status(Status(StatusCode.ERROR, outcome))
    span.end()


class GatewayObserver(AgentObserver):
    def __init__(self, metrics: Metrics | None, tracer: Tracer | None, after_reply: AfterReply | None = None) -> None:
        self.metrics = metrics
        self.after_reply = after_reply if after_reply is not None else AfterReply()
        self.tracing: tuple[Any, Any, Tracer] | None = None
        if tracer is not None:
            from opentelemetry import propagate, trace

            self.tracing = (trace, propagate, tracer)

    def upstream_call(self, stream: bool) -> UpstreamCall:
        self.after_reply.model_call_starts()  # earlier replies' bookkeeping: while the model works
        return _Upstream(self, stream)

    def tool_call(self, tool: str, mcp: McpCallNames | None = None) -> ToolCall:
        if mcp is not None:
            count_mcp_call()  # the request's access line says how many
        return _Tool(self, tool, mcp)

    def turn_finished(self, tool_rounds: int, prompt_tokens: int, completion_tokens: int) -> None:
        if self.metrics is not None:
            self.after_reply.add_figures(self.metrics.turn_done, tool_rounds, prompt_tokens, completion_tokens)

    def citations_removed(self, count: int) -> None:
        if self.metrics is not None and count > 0:
            self.metrics.research_citations_removed.inc((), count)
