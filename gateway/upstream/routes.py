"""Model routes at run time: which upstream, model id, key and settings a request's `model` means.

The table is built once from the settings (gateway/config/routes.py parsed them). A request names a
model; `resolve` finds its route with one dict lookup; the agent sees one resolved route (its
`RouteTurn`). Without `models:` there is one route, the default, and any model id a client sends
means it (the id is cosmetic, as it always was).

Routes that share a base URL and key share one `UpstreamClient` (one connection pool). Discovery
(`auto`) asks the default upstream's `/models` at start, every `REFRESH_SECONDS` after, and when a
request names an id not known yet (at most once per `MISS_REFRESH_SECONDS` once a look got a list;
concurrent requests share one look); an upstream that is down at start only means an empty list
until it answers. A look that fails is not retried by the next request at once: the looks of a
failing upstream back off (`MISS_BACKOFF_SECONDS`, doubled per failure up to `MAX_MISS_BACKOFF`), so
a burst of unknown ids while it errors costs it a few `/models` calls, not one each.

Fallbacks: a turn tries its route, then the route's fallback chain, moving on only when the
upstream could not be reached, answered 5xx or 429 (or timed out) before the first byte of its
reply; a refusal of the request (400/422) is the client's and is not retried elsewhere. A route
that failed so is skipped by later turns for a while (`RouteHealth`), unless every route of the
chain is: then they are tried anyway, in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gateway.config.routes import RESEARCH_SUFFIX, RouteSpec
from gateway.config.settings import Settings
from gateway.errors import GatewayError, InvalidRequestError, RateLimitError, UpstreamTimeoutError
from gateway.upstream.capabilities import sees_images
from gateway.upstream.client import UpstreamClient
from gateway.upstream.context_window import from_model_entry
from gateway.upstream.transport import Reply

log = logging.getLogger("agent_gateway.routes")

REFRESH_SECONDS = 60.0
MISS_REFRESH_SECONDS = 5.0
MISS_BACKOFF_SECONDS = 1.0
MAX_MISS_BACKOFF = 60.0
PROBE_SECONDS = 3.0  # how long start-up waits for the upstreams' model lists
COOLDOWN_SECONDS = 30.0  # a route that failed before its first byte is skipped this long
MAX_RETRY_AFTER = 300.0
#: Discovered ids become metric labels; beyond this many they count as `other` (bounded labels).
MAX_ROUTE_LABELS = 64
OWNED_BY = "agent-gateway"


@dataclass(eq=False)
class Route:
    """One model id the gateway serves, resolved: its client, the upstream's model name and the
    per-route settings (the global ones where the route sets none)."""

    id: str
    model: str | None  # None: the upstream's first listed model (the default route without LLM_MODEL)
    client: UpstreamClient
    reasoning: str
    web_tools: str
    context_window: int | None = None
    owned_by: str = OWNED_BY
    fallbacks: tuple[Route, ...] = ()
    label: str = ""  # the metric label: the id, or `other` past MAX_ROUTE_LABELS
    #: The model reads images (`vision:` on the route, else what the upstream's model list says)
    vision: bool = False
    #: Fields of the upstream request left out for this route (`drop_params:`)
    drop_params: frozenset[str] = frozenset()
    #: The route has a deep-research id, `<id>-deep-research` (`research:` on the route, else AGENT_RESEARCH)
    research: bool = True

    def card(self, created: int, research: bool = False) -> dict[str, Any]:
        """The route (or, `research`, its deep-research id) as `/v1/models` lists it."""
        model_id = self.id + RESEARCH_SUFFIX if research else self.id
        card: dict[str, Any] = {"id": model_id, "object": "model", "created": created, "owned_by": self.owned_by}
        if self.context_window is not None:
            card["context_window"] = self.context_window
        return card


def fault_reason(exc: GatewayError) -> str:
    """Why a route failed, as a bounded word for the log and the metric label."""
    if isinstance(exc, RateLimitError):
        return "rate_limited"
    if isinstance(exc, UpstreamTimeoutError):
        return "timeout"
    if exc.code == "upstream_unreachable":
        return "unreachable"
    return "upstream_error"  # a 5xx, or an answer that is no model reply


class RouteHealth:
    """Routes that failed before their first byte, and until when they are skipped."""

    def __init__(self, cooldown: float = COOLDOWN_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self.cooldown = cooldown
        self._clock = clock
        #: route id -> when its back-off ends
        self.until: dict[str, float] = {}

    def cooling(self, route_id: str) -> bool:
        until = self.until.get(route_id)
        if until is None:
            return False
        if until <= self._clock():
            del self.until[route_id]
            return False
        return True

    def failed(self, route_id: str, exc: GatewayError) -> None:
        wait = self.cooldown
        if isinstance(exc, RateLimitError) and exc.retry_after:
            wait = max(wait, min(exc.retry_after, MAX_RETRY_AFTER))
        self.until[route_id] = self._clock() + wait

    def answered(self, route_id: str) -> None:
        self.until.pop(route_id, None)


@dataclass
class UpstreamState:
    """What start-up (and discovery) learnt of one upstream: its model list, or why there is none."""

    client: UpstreamClient
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    error: str | None = None
    answered: bool = False


class RouteTable:
    def __init__(self, settings: Settings, default_client: UpstreamClient) -> None:
        self.settings = settings
        self.configured = settings.llm_models is not None
        self.discover = bool(settings.llm_models and settings.llm_models.discover)
        self.health = RouteHealth()
        #: (route id, outcome) of every attempt, `fallback` (route id, reason) of every switch: metrics
        self.on_attempt: Callable[[str, str], None] | None = None
        self.on_fallback: Callable[[str, str], None] | None = None
        self._default_client = default_client
        self._clients: dict[tuple[str, str | None], UpstreamClient] = {
            (settings.llm_base_url.rstrip("/"), settings.llm_api_key): default_client}
        self.upstreams: dict[UpstreamClient, UpstreamState] = {default_client: UpstreamState(default_client)}
        self.specs: dict[str, RouteSpec] = {}
        self.routes: dict[str, Route] = {}
        self._labels: set[str] = set()
        self._refreshing: asyncio.Future[None] | None = None
        self._next_look = 0.0  # monotonic time before which a request's miss does not look again
        self._failed_looks = 0
        self._task: asyncio.Task[None] | None = None
        specs = settings.llm_models.routes if settings.llm_models else ()
        for spec in specs:
            self.specs[spec.id] = spec
            self._add(self._from_spec(spec))
        for spec in specs:  # fallbacks resolved once every route exists
            chain = settings.llm_models.chain(spec.id) if settings.llm_models else ()
            self.routes[spec.id].fallbacks = tuple(self.routes[name] for name in chain)
        configured_default = self.routes.get(settings.model_name)
        self.default = configured_default or self._labelled(Route(
            settings.model_name, settings.llm_model, default_client, settings.reasoning, settings.web_tools,
            research=settings.research and settings.web_tools != "off"))

    # -- building -------------------------------------------------------------------------------

    def _client(self, spec: RouteSpec) -> UpstreamClient:
        settings = self.settings
        base_url = (spec.base_url or settings.llm_base_url).rstrip("/")
        key = settings.env.get(spec.api_key_env) if spec.api_key_env else None
        if spec.api_key_env is None and spec.base_url is None:
            key = settings.llm_api_key  # the default upstream, with its key
        client = self._clients.get((base_url, key or None))
        if client is None:
            client = self._clients[(base_url, key or None)] = UpstreamClient(
                base_url, api_key=key or None, model=None, connect_timeout=settings.llm_connect_timeout,
                read_timeout=settings.llm_timeout, http_client=settings.llm_http_client)
            self.upstreams[client] = UpstreamState(client)
        return client

    def _from_spec(self, spec: RouteSpec) -> Route:
        settings = self.settings
        return Route(spec.id, spec.model, self._client(spec), spec.reasoning or settings.reasoning,
                     spec.web_tools or settings.web_tools, spec.context_window, vision=bool(spec.vision),
                     drop_params=frozenset(spec.drop_params),
                     # a plain relay (web_tools: off) has nothing to research with, unless it says so
                     research=(settings.research and (spec.web_tools or settings.web_tools) != "off"
                               if spec.research is None else spec.research))

    def _labelled(self, route: Route) -> Route:
        if route.id in self._labels or len(self._labels) < MAX_ROUTE_LABELS:
            self._labels.add(route.id)
            route.label = route.id
        else:
            route.label = "other"
        return route

    def _add(self, route: Route) -> None:
        self.routes[route.id] = self._labelled(route)

    # -- lifetime -------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the clients (the default one is started by its owner) and, with routes, ask each
        upstream for its model list (context windows, owners; discovery's ids), briefly."""
        for client in self.upstreams:
            if client is not self._default_client:
                await client.start()
        if not self.configured:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(PROBE_SECONDS):
                await self.probe()
        if self.discover:
            self._task = asyncio.get_running_loop().create_task(self._refresh_forever())

    async def close(self) -> None:
        for task in (self._task, self._refreshing):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        for client in self.upstreams:
            if client is not self._default_client:
                await client.close()

    async def probe(self) -> None:
        """Every upstream's model list, at once; what each said (or why not) goes in `upstreams`."""
        await asyncio.gather(*(self._list(state) for state in self.upstreams.values()))
        self._learn()

    async def _list(self, state: UpstreamState) -> None:
        try:
            entries = await state.client.model_entries()
        except (GatewayError, OSError) as exc:  # the client's faults are GatewayErrors
            state.error = exc.message if isinstance(exc, GatewayError) else str(exc)
            state.answered = False
            return
        state.entries = {str(entry["id"]): entry for entry in entries}
        state.error, state.answered = None, True

    def _learn(self) -> None:
        """Discovered routes from the default upstream's list; owners and context windows the
        upstreams told for every route whose config does not say."""
        if self.discover:
            state = self.upstreams[self._default_client]
            settings = self.settings
            for model_id in state.entries:
                if model_id not in self.routes:
                    self._add(Route(model_id, model_id, self._default_client, settings.reasoning, settings.web_tools,
                                    research=settings.research and settings.web_tools != "off"))
        for route in [*self.routes.values(), self.default]:
            entry = self.upstreams[route.client].entries.get(route.model or "")
            if entry is None:
                continue
            spec = self.specs.get(route.id)
            if spec is None or spec.context_window is None:
                route.context_window = from_model_entry(entry)
            if spec is None or spec.vision is None:
                route.vision = sees_images(entry)
            owner = entry.get("owned_by")
            if isinstance(owner, str) and owner:
                route.owned_by = owner

    async def refresh(self) -> None:
        """Discovery: the default upstream's list again. Requests that ask meanwhile wait for the
        same look, not one each."""
        if self._refreshing is None or self._refreshing.done():
            self._refreshing = asyncio.ensure_future(self._refresh())
        await asyncio.shield(self._refreshing)

    async def _refresh(self) -> None:
        state = self.upstreams[self._default_client]
        try:
            await self._list(state)
        finally:  # a look cut by its timeout counts as failed
            if state.answered and state.error is None:
                self._failed_looks = 0
                self._next_look = time.monotonic() + MISS_REFRESH_SECONDS
            else:
                backoff = min(MISS_BACKOFF_SECONDS * 2 ** min(self._failed_looks, 16), MAX_MISS_BACKOFF)
                self._failed_looks += 1
                self._next_look = time.monotonic() + backoff
        self._learn()

    async def _look(self) -> None:
        """A request's look at the list: shared with any look under way, none while backing off."""
        if (self._refreshing is not None and not self._refreshing.done()) or time.monotonic() >= self._next_look:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(PROBE_SECONDS):
                    await self.refresh()

    async def _refresh_forever(self) -> None:
        while True:
            await asyncio.sleep(REFRESH_SECONDS)
            try:
                await self.refresh()
            except Exception:  # noqa: BLE001 - a refresh that fails keeps the routes known
                log.exception("model discovery failed")

    # -- per request ----------------------------------------------------------------------------

    def resolve(self, model: str | None) -> Route | None:
        """The route a request's `model` names; the default for no model (or any, without routes)."""
        if not model or not self.configured:
            return self.default
        route = self.routes.get(model)
        if route is None and model == self.default.id:
            return self.default
        return route

    async def find(self, model: str | None) -> Route | None:
        """`resolve`, and for an id discovery does not know yet, one look at the upstream's list
        (at most every MISS_REFRESH_SECONDS, however many requests ask)."""
        route = self.resolve(model)
        if route is not None or not self.discover:
            return route
        await self._look()
        return self.resolve(model)

    async def listing_now(self, created: int) -> list[dict[str, Any]]:
        """`listing`, after one look at the upstream's list if discovery has none yet (it was down)."""
        if self.discover and not self.upstreams[self._default_client].answered:
            await self._look()
        return self.listing(created)

    def listing(self, created: int) -> list[dict[str, Any]]:
        """`/v1/models`: the default route first, then every other route, then their deep-research ids."""
        routes = [self.default, *(route for route in self.routes.values() if route is not self.default)]
        return [*(route.card(created) for route in routes),
                *(route.card(created, research=True) for route in routes if route.research)]



class RouteTurn:
    """One request's route: sends each model call of the turn, falling back along the chain.
    `served` is the route whose upstream answered (last), for the reply's `model`."""

    __slots__ = ("route", "served", "_table", "suffix")

    def __init__(self, route: Route, table: RouteTable, suffix: str = "") -> None:
        self.route = route
        self.served = route
        self._table = table
        #: What the reply's `model` adds to the route's id (a deep-research turn's RESEARCH_SUFFIX)
        self.suffix = suffix

    @property
    def model_id(self) -> str:
        """The reply's `model`: the route that answered, as the client named it."""
        return self.served.id + self.suffix

    async def open(self, payload: dict[str, Any], stream: bool,
                   headers: Mapping[str, str] | None) -> tuple[Reply, UpstreamClient]:
        """The `opener` for UpstreamClient.deltas: the first route of the chain whose upstream
        answers, its reply's head and client."""
        route = self.route
        table = self._table
        if route.fallbacks:
            chain = (route, *route.fallbacks)
            candidates: tuple[Route, ...] | list[Route] = \
                [r for r in chain if not table.health.cooling(r.id)] or list(chain)
        else:
            candidates = (route,)
        for index, candidate in enumerate(candidates):
            sent = payload
            if candidate.drop_params:  # fields this upstream refuses (say, reasoning_effort)
                sent = {key: value for key, value in payload.items() if key not in candidate.drop_params}
            try:
                response = await candidate.client.post_chat(sent, stream=stream, headers=headers,
                                                            model=candidate.model)
            except InvalidRequestError:
                raise  # the request itself was refused: another upstream would refuse it too
            except GatewayError as exc:
                reason = fault_reason(exc)
                table.health.failed(candidate.id, exc)
                if table.on_attempt is not None:
                    table.on_attempt(candidate.label, reason)
                if index == len(candidates) - 1:
                    raise
                following = candidates[index + 1]
                log.warning("model route %s failed (%s: %s); falling back to %s",
                            candidate.id, reason, exc.message, following.id)
                if table.on_fallback is not None:
                    table.on_fallback(candidate.label, reason)
                continue
            if table.health.until:  # a route on record (rare): no call per turn otherwise
                table.health.answered(candidate.id)
            if table.on_attempt is not None:
                table.on_attempt(candidate.label, "ok")
            self.served = candidate
            return response, candidate.client
        raise AssertionError("unreachable: the chain has at least one route")

