"""Prometheus metrics: one `CollectorRegistry` per app (tests build many apps in one process, and
prometheus_client's default registry is process-global), made by the app factory, under
`appkeys.METRICS`, served by `GET /metrics` (gateway/http/routes/metrics.py).

Labels are bounded: a route is its template (`/v1/responses/{response_id}`; any path no route
matches is `unmatched`), a method outside the usual ones is `other`, statuses and outcomes are
closed sets, tools and providers come from the toolbox and the registry. Never a query text, a
URL, a key or an id.

Cheap on the hot path: a request is recorded once, from the front door's access-log step
(`request_done`); every figure is a plain number in observe/metric_counts.py, turned into
prometheus_client's families only when scraped (the library is imported then, not at start); the
gauges are read from the objects that already count (run limiter, lifecycle) only when scraped.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, TypeVar

from aiohttp import web

from gateway.observe.metric_counts import LoopCounter, LoopGauge, LoopHistogram

if TYPE_CHECKING:
    from prometheus_client.registry import CollectorRegistry

PREFIX = "agent_gateway"
KNOWN_METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})
REJECTIONS = {401: "unauthorized", 413: "payload_too_large", 429: "rate_limited"}
# from a cached reply (~1 ms) to a long agent run (minutes)
SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
FAST_SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
ROUNDS = (0, 1, 2, 3, 4, 6, 8, 12, 16)

#: When the request's streamed reply was prepared (its headers left with the first body bytes); None
#: for a whole reply. A context variable, set and read in the request's own task (the access step
#: runs in a copy of its context): `request.get(key)` for a key a request lacks raises and catches a
#: KeyError, on every non-streamed request.
FIRST_BYTE_AT: ContextVar[float | None] = ContextVar("metrics_first_byte_at", default=None)

Collected = LoopCounter | LoopHistogram | LoopGauge
C = TypeVar("C", LoopCounter, LoopHistogram, LoopGauge)


def _registry_of(collected: list[Collected]) -> CollectorRegistry:
    from prometheus_client.registry import CollectorRegistry

    registry = CollectorRegistry(auto_describe=True)
    for one in collected:
        registry.register(one)  # type: ignore[arg-type]  # a collector by its methods
    return registry


class Metrics:
    def __init__(self) -> None:
        self._collected: list[Collected] = []
        self._registry: CollectorRegistry | None = None
        self._public_registry: CollectorRegistry | None = None
        self.requests = self._add(LoopCounter(f"{PREFIX}_requests",
                                              "HTTP requests by route template, method and status",
                                              ("route", "method", "status")))
        self.request_seconds = self._add(LoopHistogram(f"{PREFIX}_request_duration_seconds",
                                                       "Non-streamed requests: time to the whole reply", SECONDS,
                                                       ("route",)))
        self.stream_first_byte = self._add(LoopHistogram(f"{PREFIX}_stream_first_byte_seconds",
                                                         "Streamed replies: time to the first byte", SECONDS,
                                                         ("route",)))
        self.stream_seconds = self._add(LoopHistogram(f"{PREFIX}_stream_duration_seconds",
                                                      "Streamed replies: time to the end of the body", SECONDS,
                                                      ("route",)))
        self.rejections = self._add(LoopCounter(f"{PREFIX}_rejections", "Requests refused: unauthorized (401), "
                                                "payload_too_large (413), rate_limited (429)", ("reason",)))
        self.replays = self._add(LoopCounter(f"{PREFIX}_idempotent_replays",
                                             "Replies replayed for a repeated Idempotency-Key"))
        self.open_streams = 0
        self._add(LoopGauge(f"{PREFIX}_open_streams", "Streamed replies being written",
                            read=lambda: self.open_streams))
        self.tool_rounds = self._add(LoopHistogram(f"{PREFIX}_agent_tool_rounds",
                                                   "Rounds of tool calls per agent turn", ROUNDS))
        self.tokens = self._add(LoopCounter(f"{PREFIX}_tokens", "Tokens the upstream reported (usage), by direction",
                                            ("direction",)))
        self.tokens.inc(("in",), 0)  # both shown from the start
        self.tokens.inc(("out",), 0)
        self.upstream_calls = self._add(LoopCounter(f"{PREFIX}_upstream_calls", "Model calls by outcome",
                                                    ("outcome",)))
        self.upstream_seconds = self._add(LoopHistogram(f"{PREFIX}_upstream_call_duration_seconds",
                                                        "Model calls: time to the end of the reply", SECONDS))
        self.upstream_first_token = self._add(LoopHistogram(
            f"{PREFIX}_upstream_first_token_seconds",
            "Streamed model calls: time to the first text or tool-call delta", SECONDS))
        self.route_calls = self._add(LoopCounter(f"{PREFIX}_model_route_calls", "Model calls per model route by "
                                                 "outcome (ok, unreachable, upstream_error, rate_limited, timeout)",
                                                 ("route", "outcome")))
        self.route_fallbacks = self._add(LoopCounter(f"{PREFIX}_model_route_fallbacks", "Turns a model route passed "
                                                     "to its next fallback, by the route that failed and why",
                                                     ("route", "reason")))
        self.tool_calls = self._add(LoopCounter(f"{PREFIX}_tool_calls",
                                                "Agent tool calls by tool, provider and outcome",
                                                ("tool", "provider", "outcome")))
        self.tool_seconds = self._add(LoopHistogram(f"{PREFIX}_tool_call_duration_seconds",
                                                    "Agent tool calls: duration", SECONDS, ("tool", "provider")))
        # server: a configured server's label (the operator's, bounded) or `request` for one a request named
        self.mcp_calls = self._add(LoopCounter(f"{PREFIX}_mcp_calls", "MCP tool calls by server and outcome (ok, "
                                               "tool_error, timeout, error, bad_arguments, cancelled)",
                                               ("server", "outcome")))
        self.mcp_seconds = self._add(LoopHistogram(f"{PREFIX}_mcp_call_seconds", "MCP tool calls: duration",
                                                   SECONDS, ("server",)))
        self.research_citations_removed = self._add(LoopCounter(
            f"{PREFIX}_research_citations_removed",
            "Citations a deep-research report made to pages the run never read nor saw, removed before the "
            "client saw them"))
        self.store_operations = self._add(LoopCounter(f"{PREFIX}_store_operations",
                                                      "Response store operations by kind and outcome",
                                                      ("operation", "outcome")))
        self.store_seconds = self._add(LoopHistogram(f"{PREFIX}_store_operation_duration_seconds",
                                                     "Response store operations: duration", FAST_SECONDS,
                                                     ("operation",)))
        # key names are the operator's (agent-gateway keys create): a bounded label set
        self.key_usage = self._add(LoopCounter(f"{PREFIX}_key_usage", "Usage this replica counted per API key name, "
                                               "by kind (input_tokens, output_tokens, model_calls, web_searches, "
                                               "web_extracts; estimated_tokens: the part of the tokens that "
                                               "is an estimate)", ("key", "kind")))
        self.key_stored_bytes = self._add(LoopGauge(f"{PREFIX}_key_stored_bytes", "Bytes each API key's stored "
                                                    "objects take (the whole store, as of the last key refresh)",
                                                    ("key",)))

    def _add(self, collected: C) -> C:
        self._collected.append(collected)
        return collected

    @property
    def registry(self) -> CollectorRegistry:
        """prometheus_client's registry of these metrics, made (and the library imported) at the
        first scrape: one per app, since the library's default registry is process-global."""
        if self._registry is None:
            self._registry = _registry_of(self._collected)
        return self._registry

    @property
    def public_registry(self) -> CollectorRegistry:
        """The metrics without the per-key series: key names and each key's consumption are the
        operator's to see (API_SERVER_METRICS_KEY), not every key holder's."""
        if self._public_registry is None:
            per_key = (self.key_usage, self.key_stored_bytes)
            self._public_registry = _registry_of([c for c in self._collected if c not in per_key])
        return self._public_registry

    def key_used(self, key: str, kind: str, amount: int) -> None:
        self.key_usage.inc((key, kind), amount)

    def gauge(self, name: str, documentation: str, read: Callable[[], float]) -> None:
        """A gauge read only when scraped, from a count something else already keeps."""
        if self._registry is not None or self._public_registry is not None:
            raise RuntimeError("metrics are added before the first scrape")
        self._add(LoopGauge(f"{PREFIX}_{name}", documentation, read=read))

    # -- per request (the front door and the response-prepare hook) --

    def request_done(self, route: str, method: str, status: int | str, started: float, now: float) -> None:
        """`route`: `route_of(request)`; `now`: when the front door let the request go (the call
        itself may come a little later)."""
        method = method if method in KNOWN_METHODS else "other"
        self.requests.inc((route, method, str(status)))
        first_byte = FIRST_BYTE_AT.get()
        if first_byte is None:
            self.request_seconds.observe((route,), now - started)
        else:
            self.open_streams -= 1
            self.stream_first_byte.observe((route,), first_byte - started)
            self.stream_seconds.observe((route,), now - started)
        reason = REJECTIONS.get(status) if isinstance(status, int) else None
        if reason is not None:
            self.rejections.inc((reason,))

    def response_prepared(self, request: web.Request, response: web.StreamResponse) -> None:
        # A web.Response is prepared after the front door has returned it; a stream is prepared
        # inside the handler, so the front door's step after it sees the mark.
        if not isinstance(response, web.Response):
            FIRST_BYTE_AT.set(time.perf_counter())
            self.open_streams += 1
        elif "Idempotent-Replayed" in response.headers:
            self.replays.inc()

    # -- from the agent (gateway/observe/agent_calls.py) and the store wrapper --

    def upstream_done(self, outcome: str, seconds: float, first_token: float | None) -> None:
        self.upstream_calls.inc((outcome,))
        self.upstream_seconds.observe((), seconds)
        if first_token is not None:
            self.upstream_first_token.observe((), first_token)

    def route_attempt(self, route: str, outcome: str) -> None:
        self.route_calls.inc((route, outcome))

    def route_fallback(self, route: str, reason: str) -> None:
        self.route_fallbacks.inc((route, reason))

    def tool_done(self, tool: str, provider: str, outcome: str, seconds: float) -> None:
        self.tool_calls.inc((tool, provider, outcome))
        self.tool_seconds.observe((tool, provider), seconds)

    def mcp_done(self, server: str, outcome: str, seconds: float) -> None:
        self.mcp_calls.inc((server, outcome))
        self.mcp_seconds.observe((server,), seconds)

    def turn_done(self, tool_rounds: int, prompt_tokens: int, completion_tokens: int) -> None:
        self.tool_rounds.observe((), tool_rounds)
        if prompt_tokens:
            self.tokens.inc(("in",), prompt_tokens)
        if completion_tokens:
            self.tokens.inc(("out",), completion_tokens)

    def store_done(self, operation: str, outcome: str, seconds: float) -> None:
        self.store_operations.inc((operation, outcome))
        self.store_seconds.observe((operation,), seconds)


def route_of(request: web.Request) -> str:
    """The matched route's template; `unmatched` for a path no route serves (404s, scanners)."""
    resource = request.match_info.route.resource
    return resource.canonical if resource is not None else "unmatched"
