"""GET /v1/admin/status: what the admin page shows of this replica, for admin keys only (as the rest
of the admin API, routes/admin.py).

- `model_routes`: every configured route (the default one included), its upstream (the base URL,
  credentials masked) and whether that upstream answers now: each distinct upstream is asked for
  its model list once per call, at once, within `PROBE_SECONDS` (the start-up report,
  upstream/route_report.py, asks the same question once; this asks it when an admin looks). The
  route table is not changed by the look (discovery keeps its own schedule).
- `web`: each web provider (available, what it does, its place in the search and extract chains)
  and the cool-downs and cache of the running process (`WebState.status()`, as /v1/web/status).
- `runs`: the agent runs in progress on this replica and its limit, requests in flight, the
  background runs this replica holds.

Figures are this replica's: behind a load balancer each replica answers for itself (`replica`).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiohttp import web

from gateway.agent.web.fallback import fallback_setting, plan_chain
from gateway.common.redact import redact_url
from gateway.errors import GatewayError
from gateway.http import appkeys
from gateway.http.routes.admin import admin_store, json_reply
from gateway.runs.background import BACKGROUND_RUNS
from gateway.upstream.client import UpstreamClient
from gateway.upstream.routes import PROBE_SECONDS, RouteTable
from providers.registry import CAPABILITIES, ProviderRegistry, availability, supports

routes = web.RouteTableDef()


@routes.get("/v1/admin/status")
async def admin_status(request: web.Request) -> web.Response:
    admin_store(request)  # admin keys only: 403 for others, 404 on a keyless gateway (routes/admin.py)
    app = request.app
    runs = app.get(BACKGROUND_RUNS)
    return json_reply({  # no-store, as every admin reply
        "object": "admin.status",
        "replica": runs.replica if runs is not None else None,
        "started_at": app[appkeys.STARTED_AT],
        "model_routes": await model_routes(app[appkeys.ROUTES]),
        "web": web_providers(app.get(appkeys.WEB_REGISTRY), app),
        "runs": runs_in_flight(app),
    })


async def model_routes(table: RouteTable) -> list[dict[str, Any]]:
    """Each route with its upstream's answer (asked now, every upstream at once)."""
    shown = [table.default, *(r for r in table.routes.values() if r is not table.default and r.id in table.specs)]
    if table.discover:  # discovered routes: the ones the upstream listed, after the configured
        shown += [r for r in table.routes.values() if r is not table.default and r.id not in table.specs]
    clients = list(dict.fromkeys(route.client for route in shown))
    answers = dict(zip(clients, await asyncio.gather(*(_ask(client) for client in clients)), strict=True))
    rows = []
    for route in shown:
        answered, error, latency_ms, listed = answers[route.client]
        rows.append({
            "id": route.id,
            "model": route.model,
            "upstream": redact_url(route.client.base_url),
            "default": route is table.default,
            "fallbacks": [fallback.id for fallback in route.fallbacks],
            "answers": answered,
            "error": error,
            "latency_ms": latency_ms,
            # None: the upstream did not answer, or the route takes its first listed model
            "listed": None if not answered or route.model is None else route.model in listed,
            "cooling": table.health.cooling(route.id),
        })
    return rows


async def _ask(client: UpstreamClient) -> tuple[bool, str | None, int | None, set[str]]:
    """(answered, why not, milliseconds, the model ids it listed)."""
    started = time.perf_counter()
    try:
        async with asyncio.timeout(PROBE_SECONDS):
            entries = await client.model_entries()
    except TimeoutError:
        return False, f"no answer within {PROBE_SECONDS:g} s", None, set()
    except GatewayError as exc:  # the client's faults: already without the upstream's key
        return False, exc.message, None, set()
    except OSError as exc:
        return False, type(exc).__name__, None, set()
    return True, None, round((time.perf_counter() - started) * 1000), {str(e["id"]) for e in entries}


def web_providers(registry: ProviderRegistry | None, app: web.Application) -> dict[str, Any]:
    """The providers loaded (none when the app was built with its own tools) and the process's
    cool-downs and cache."""
    state = app[appkeys.WEB_STATE].status()
    cooling = {entry["provider"]: entry for entry in state["providers"]}
    chains: dict[str, list[str]] = {}
    providers: list[dict[str, Any]] = []
    if registry is not None:
        settings = app[appkeys.SETTINGS]
        chains = {capability: plan_chain(registry, capability, fallback_setting(settings, capability)).names()
                  for capability in ("search", "extract")}
        for provider in registry.providers():
            available, missing = availability(provider)
            fault = cooling.get(provider.name, {})
            providers.append({
                "name": provider.name,
                "available": available,
                "missing": missing,
                **{capability: supports(provider, capability) for capability in CAPABILITIES},
                # its place in each chain: 0 the one used first, 1.. its fallbacks; absent: not used
                "chains": {capability: names.index(provider.name) for capability, names in chains.items()
                           if provider.name in names},
                "failures": fault.get("failures", 0),
                "cooling_for": fault.get("cooling_for", 0),
                "reason": fault.get("reason"),
            })
    return {"providers": providers, "chains": chains, "cool_downs": state["providers"], "cache": state["cache"]}


def runs_in_flight(app: web.Application) -> dict[str, Any]:
    limiter = app[appkeys.LIMITER]
    runs = app.get(BACKGROUND_RUNS)
    held = runs.running() if runs is not None else []
    return {
        "active": limiter.active,
        "limit": limiter.limit,
        "requests_in_flight": app[appkeys.LIFECYCLE].in_flight,
        "background": len(held),
        "background_ids": sorted(run.response_id for run in held),
        "queue": app[appkeys.SETTINGS].max_queued_runs > 0,
    }
