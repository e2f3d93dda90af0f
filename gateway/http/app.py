"""The application factory: everything is built here, nothing at import time."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

from aiohttp import web

from gateway.agent.loop import Agent
from gateway.agent.observer import AgentObserver
from gateway.agent.toolbox import AgentTool, Toolbox
from gateway.agent.web.fallback import WebState, chain_report
from gateway.agent.web.tools import build_web_tools
from gateway.common.seal import Sealer
from gateway.config.seal_key import seal_key
from gateway.config.settings import Settings
from gateway.http import appkeys
from gateway.http.auth import add_rate_headers
from gateway.http.checks import add_security_headers, allowed_hosts
from gateway.http.client_notes import add_warning_header
from gateway.http.cors import CORS_POLICY, CorsPolicy, add_cors_headers
from gateway.http.lifecycle import Lifecycle, RunLimiter
from gateway.http.middleware import front_door
from gateway.http.routes import (
    admin,
    admin_page,
    admin_status,
    admin_usage,
    chat,
    conversations,
    files,
    health,
    metrics,
    models,
    openapi,
    responses,
    web_status,
)
from gateway.http.routes.responses_queue import background_runs_ctx
from gateway.keys.ring import KeyRing
from gateway.keys.usage import KeyUsageObserver
from gateway.observe.access_log import add_request_id_header
from gateway.observe.after_reply import AfterReply
from gateway.observe.agent_calls import GatewayObserver
from gateway.observe.memory_release import MemoryReleaser
from gateway.observe.metrics import Metrics
from gateway.runs.background import replica_name
from gateway.runs.deadlines import RunDeadlines
from gateway.store.api import ResponseStore, StoreUnavailableError
from gateway.store.idempotency import IdempotencyCache, InMemoryIdempotencyCache
from gateway.store.keys import COUNTERS, KeyStore, UsageDelta
from gateway.store.limits import LimitStore
from gateway.store.observed import ObservedStore
from gateway.store.owners import DEFAULT_KEY, owner_of, profile_label
from gateway.store.sqlite.keys import SQLiteKeyStore
from gateway.store.sqlite.store import SQLiteResponseStore
from gateway.upstream.client import UpstreamClient
from gateway.upstream.context_window import ContextWindows
from gateway.upstream.routes import RouteTable
from providers.loader import load_registry
from providers.registry import ProviderRegistry

if TYPE_CHECKING:
    from gateway.agent.mcp.tools import McpFamily
    from gateway.store.postgres.database import PostgresDatabase

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Tracer

log = logging.getLogger("agent_gateway")


def create_app(settings: Settings, *, tools: Iterable[AgentTool] | None = None,
               idempotency: IdempotencyCache | None = None,
               tracer_provider: TracerProvider | None = None) -> web.Application:
    """Build the gateway. `tools` replaces the agent's default tool set (tests use their own);
    `idempotency` replaces the in-memory Idempotency-Key cache (tests pass one with a fake clock);
    `tracer_provider` turns OpenTelemetry spans on (gateway/observe/tracing.py)."""
    # the order of the per-request steps lives in gateway/http/middleware.py
    tracer = tracer_provider.get_tracer("agent_gateway") if tracer_provider is not None else None
    middlewares = [front_door] if tracer is None else [_tracing_middleware(tracer), front_door]
    app = web.Application(middlewares=middlewares, client_max_size=settings.max_body_bytes)
    app[appkeys.SETTINGS] = settings
    app[CORS_POLICY] = CorsPolicy.from_origins(settings.cors_origins)
    app[appkeys.ALLOWED_HOSTS] = allowed_hosts(settings)
    app[appkeys.STARTED_AT] = int(time.time())
    app[appkeys.LIMITER] = RunLimiter(settings.max_concurrent_runs, queue=settings.max_queued_runs > 0)
    app[appkeys.LIFECYCLE] = Lifecycle()
    app[appkeys.RUN_DEADLINES] = RunDeadlines(settings.run_timeout)
    app[appkeys.REASONING_SEALER] = Sealer(seal_key(settings), "reasoning", settings.profile or "")
    # one database for the store and the Idempotency-Key entries when replicas share PostgreSQL
    database: PostgresDatabase | None = None
    if settings.database_url:
        # imported only here: asyncpg and the PostgreSQL backend are memory a one-machine gateway
        # (SQLite) never uses
        from gateway.store.postgres.database import PostgresDatabase
        from gateway.store.postgres.idempotency import PostgresIdempotencyCache

        database = PostgresDatabase(settings.database_url, legacy_owner=owner_of(settings.profile, DEFAULT_KEY))
        if idempotency is None:
            idempotency = PostgresIdempotencyCache(database, ttl=settings.idempotency_ttl,
                                                   lease=settings.run_timeout + 30)
    if idempotency is None:
        idempotency = InMemoryIdempotencyCache(ttl=settings.idempotency_ttl)
    app[appkeys.IDEMPOTENCY] = idempotency
    app[appkeys.KEYRING] = KeyRing(settings.profile, settings.api_key, _key_store(settings, database),
                                     _shared_limits(database), usage_days=settings.usage_days)
    if settings.metrics_enabled:
        app[appkeys.METRICS] = _metrics(app)
        app.router.add_routes(metrics.routes)
    after_reply = app[appkeys.AFTER_REPLY] = AfterReply()
    observer = KeyUsageObserver(GatewayObserver(app.get(appkeys.METRICS), tracer, after_reply), app[appkeys.KEYRING])
    app.on_response_prepare.append(_response_headers(app[CORS_POLICY], app.get(appkeys.METRICS)))
    app.cleanup_ctx.append(_upstream_ctx)
    app.cleanup_ctx.append(_agent_ctx(tools, observer))
    app.cleanup_ctx.append(_store_ctx(database))
    app.cleanup_ctx.append(background_runs_ctx)  # after the store: its runs stop before it closes
    app.cleanup_ctx.append(_keyring_ctx)  # after the store: stopped (its usage written) before it closes
    app.cleanup_ctx.append(_memory_release_ctx)
    app.on_cleanup.append(_write_after_reply)  # after every request has ended (the grace included)
    for module in (health, openapi, models, chat, responses, conversations, files, web_status, admin, admin_usage,
                   admin_status, admin_page):
        app.router.add_routes(module.routes)
    return app


async def _write_after_reply(app: web.Application) -> None:
    """The last replies' access lines and metrics, which would otherwise wait for a request that
    never comes (observe/after_reply.py)."""
    app[appkeys.AFTER_REPLY].run()


def _response_headers(cors: CorsPolicy, metrics_: Metrics | None) -> Callable[
        [web.Request, web.StreamResponse], Awaitable[None]]:
    """The on_response_prepare hook: runs for JSON, errors and streams alike. One hook calling
    plain functions rather than three hooks: a signal receiver is a coroutine per response. What
    the app fixed at its build (its CORS policy, whether it counts metrics) is bound here, not
    looked up on every response."""
    cors_enabled = cors.enabled

    async def hook(request: web.Request, response: web.StreamResponse) -> None:
        add_security_headers(response)
        add_request_id_header(response)
        if cors_enabled:  # off (no API_SERVER_CORS_ORIGINS): no CORS header at all
            add_cors_headers(request, response)
        add_rate_headers(request, response)
        add_warning_header(response)
        if metrics_ is not None:
            metrics_.response_prepared(request, response)

    return hook


def _metrics(app: web.Application) -> Metrics:
    registry = Metrics()
    limiter, lifecycle = app[appkeys.LIMITER], app[appkeys.LIFECYCLE]
    registry.gauge("agent_runs", "Agent runs in progress", lambda: limiter.active)
    registry.gauge("requests_in_flight", "Requests admitted and not yet answered", lambda: lifecycle.in_flight)
    return registry


def _key_store(settings: Settings, database: PostgresDatabase | None) -> KeyStore:
    profile = profile_label(settings.profile)
    if database is not None:
        from gateway.store.postgres.keys import PostgresKeyStore

        return PostgresKeyStore(database, profile)
    return SQLiteKeyStore(settings.db_path, profile, legacy_owner=owner_of(settings.profile, DEFAULT_KEY))


def _shared_limits(database: PostgresDatabase | None) -> LimitStore | None:
    """Behind replicas, every limit of a limited key is counted in the database (keys/limits.py)."""
    if database is None:
        return None
    from gateway.store.postgres.limits import PostgresLimits

    return PostgresLimits(database, replica_name())


async def _keyring_ctx(app: web.Application) -> AsyncIterator[None]:
    ring = app[appkeys.KEYRING]
    await ring.start()
    if (metrics_ := app.get(appkeys.METRICS)) is not None:
        metrics_.key_stored_bytes.clear()
        ring.on_refresh = lambda: _stored_bytes_gauge(metrics_, ring)
        ring.on_counted = lambda batch: _key_usage_counters(metrics_, batch)
        _stored_bytes_gauge(metrics_, ring)
    yield
    await ring.stop()


def _key_usage_counters(metrics_: Metrics, batch: dict[str, UsageDelta]) -> None:
    for name, delta in batch.items():
        for kind in (*COUNTERS, "estimated_tokens"):
            if amount := getattr(delta, kind):
                metrics_.key_used(name, kind, amount)


def _stored_bytes_gauge(metrics_: Metrics, ring: KeyRing) -> None:
    for name, size in ring.stored_bytes.items():
        metrics_.key_stored_bytes.set((name,), size)


def _tracing_middleware(tracer: Tracer) -> Any:
    from gateway.observe.tracing import tracing_middleware  # imports OpenTelemetry: only when tracing

    return tracing_middleware(tracer)


async def _upstream_ctx(app: web.Application) -> AsyncIterator[None]:
    settings = app[appkeys.SETTINGS]
    upstream = UpstreamClient(
        settings.llm_base_url,
        api_key=settings.llm_api_key,
        model=settings.llm_model,
        connect_timeout=settings.llm_connect_timeout,
        read_timeout=settings.llm_timeout,
        http_client=settings.llm_http_client,
    )
    await upstream.start()
    app[appkeys.UPSTREAM] = upstream
    app[appkeys.CONTEXT_WINDOWS] = ContextWindows(upstream.get_json, settings.llm_context_window)
    routes = RouteTable(settings, upstream)  # model routes (`models:`); one default route without
    if (metrics_ := app.get(appkeys.METRICS)) is not None:
        routes.on_attempt, routes.on_fallback = metrics_.route_attempt, metrics_.route_fallback
    await routes.start()
    app[appkeys.ROUTES] = routes
    yield
    await routes.close()
    await upstream.close()


def _agent_ctx(tools: Iterable[AgentTool] | None,
               observer: AgentObserver | None) -> Callable[[web.Application], AsyncIterator[None]]:
    async def ctx(app: web.Application) -> AsyncIterator[None]:
        settings = app[appkeys.SETTINGS]
        registry: ProviderRegistry | None = None
        web_state = WebState.from_settings(settings)
        app[appkeys.WEB_STATE] = web_state
        agent_tools = tools
        if agent_tools is None:
            registry = load_registry(settings.plugin_settings())
            for error in registry.load_errors:
                log.warning("web plugin %s failed to load: %s", error.plugin, error.reason)
            for line in chain_report(registry, settings)[0]:
                log.info("%s", line)
            agent_tools = build_web_tools(registry, settings, web_state)
            app[appkeys.WEB_REGISTRY] = registry
        toolbox = Toolbox(agent_tools)
        app[appkeys.TOOLBOX] = toolbox
        mcp = _mcp_family(settings)
        app[appkeys.AGENT] = Agent(
            app[appkeys.UPSTREAM],
            toolbox,
            max_rounds=settings.max_rounds,
            tool_timeout=settings.tool_timeout,
            system_prompt=settings.system_prompt,
            observer=observer,
            web_tools=settings.web_tools,
            client_web_tools=settings.client_web_tools,
            mcp=mcp,
            mcp_allowed_hosts=settings.mcp_allowed_hosts,
        )
        try:
            yield
        finally:  # stdio servers are children of this process: ended on shutdown and SIGTERM alike
            family = app[appkeys.AGENT].mcp  # made by a request naming a server, if none was configured
            if family is not None:
                await family.close()
        await web_state.aclose()
        if registry is not None:
            await registry.aclose()

    return ctx


def _mcp_family(settings: Settings) -> McpFamily | None:
    """The configured MCP servers' tools; None (and no MCP code imported) when there are none."""
    if not settings.mcp_servers:
        return None
    from gateway.agent.mcp.registry import McpRegistry
    from gateway.agent.mcp.tools import McpFamily, registry_configs

    # the allowed hosts hold for the servers requests name beside the configured ones
    registry = McpRegistry(registry_configs(settings.mcp_servers), allowed_hosts=settings.mcp_allowed_hosts)
    return McpFamily(registry, settings.mcp_servers)


def _store_ctx(database: PostgresDatabase | None) -> Callable[[web.Application], AsyncIterator[None]]:
    """The Responses store. A store that cannot open does not stop the gateway: chat still works,
    the Responses routes answer 503 saying why, and the store retries (SQLite: on the next request;
    PostgreSQL: in the background, with backoff). A database with a newer schema stops the start."""

    async def ctx(app: web.Application) -> AsyncIterator[None]:
        settings = app[appkeys.SETTINGS]
        max_bytes = settings.max_store_mb * 1_000_000
        store: ResponseStore
        if database is not None:  # shared by every replica on the database
            from gateway.store.postgres.store import PostgresResponseStore

            store = PostgresResponseStore(database, settings.max_stored_responses, max_bytes=max_bytes,
                                          profile=profile_label(settings.profile))
        else:
            store = SQLiteResponseStore(settings.db_path, settings.max_stored_responses, max_bytes=max_bytes,
                                        legacy_owner=owner_of(settings.profile, DEFAULT_KEY),
                                        profile=profile_label(settings.profile))
        if (metrics_ := app.get(appkeys.METRICS)) is not None:
            store = ObservedStore(store, metrics_.store_done)
        try:
            await store.open()
        except StoreUnavailableError as exc:
            retrying = " Retrying in the background." if database is not None else ""
            logging.getLogger("agent_gateway.store").warning("%s%s", exc.detail, retrying)
        app[appkeys.STORE] = store
        yield
        await store.close()

    return ctx


async def _memory_release_ctx(app: web.Application) -> AsyncIterator[None]:
    """Freed heap pages go back to the OS once a burst of requests is over (gateway/observe/memory_release.py)."""
    lifecycle = app[appkeys.LIFECYCLE]
    releaser = MemoryReleaser(lambda: lifecycle.in_flight == 0)
    lifecycle.on_idle = releaser.after_idle
    yield
    lifecycle.on_idle = None
    releaser.cancel()
